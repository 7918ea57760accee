//go:build linux

package daemonpid

import (
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"syscall"
)

// HoldEnv, set to "1", makes any program that imports this package (the
// devbox binary, a test binary: Start runs the daemon's own Argv[0] where
// there is no sleep(1), see holdCommand) a holder instead of itself, before its main runs: it keeps the
// descriptors it inherited and waits for SIGTERM. It reads nothing and
// serves nothing.
const HoldEnv = "DEVBOX_HOLD_SOCKETS"

// HolderUID is the uid holders run as: nobody, the kernel's overflow uid.
// Not the agent's, so the agent can neither signal nor trace a holder;
// not the daemon's, so "the processes of the daemon's uid" stay the
// daemon alone (doctor, the escape suite and the tests count them).
const HolderUID = 65534

func init() {
	if os.Getenv(HoldEnv) != "1" {
		return
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	signal.Ignore(syscall.SIGHUP, syscall.SIGPIPE)
	<-sig
	os.Exit(0)
}

// sleepPaths are where holdCommand looks for sleep(1).
var sleepPaths = []string{"/usr/bin/sleep", "/bin/sleep"}

// holdCommand is the holder for a daemon run by self: sleep(1) for 68
// years when the system has it at a fixed path (108 KiB of private memory
// where the devbox binary, its packages initialized, dirties 16 MiB; a
// fixed path, not $PATH, so no directory on the search path decides what
// holds the ports), else self with HoldEnv. Either keeps the descriptors
// it inherits and dies on SIGTERM.
func holdCommand(self string) *exec.Cmd {
	for _, p := range sleepPaths {
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0 {
			cmd := exec.Command(p, strconv.Itoa(1<<31-1))
			cmd.Env = []string{}
			return cmd
		}
	}
	cmd := exec.Command(self)
	cmd.Env = []string{HoldEnv + "=1"}
	return cmd
}
