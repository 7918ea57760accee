//go:build linux

package daemonpid

import (
	"os"
	"os/signal"
	"syscall"
)

// HoldEnv, set to "1", makes any program that imports this package (the
// devbox binary, a test binary: Start runs the daemon's own Argv[0]) a
// holder instead of itself, before its main runs: it keeps the
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
