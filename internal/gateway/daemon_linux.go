//go:build linux

package gateway

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

	"github.com/devbox-dev/devbox/internal/daemonpid"
	"github.com/devbox-dev/devbox/internal/layout"
)

// Harden makes the calling process undumpable: no core dump, and its
// /proc/PID/{environ,mem,maps} and ptrace become root's alone, even for a
// process of the same uid. The gateway calls it before it reads a secret.
func Harden() error {
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("gateway: prctl(PR_SET_DUMPABLE, 0): %w", err)
	}
	var lim unix.Rlimit
	if err := unix.Setrlimit(unix.RLIMIT_CORE, &lim); err != nil {
		return fmt.Errorf("gateway: setrlimit(RLIMIT_CORE, 0): %w", err)
	}
	return nil
}

// Start (re)starts the gateway daemon detached, under its own uid, and
// returns its pid once it answers on Addr. An earlier daemon named by the
// pidfile is stopped first. Its output goes to LogDir/gateway.log.
func Start(ctx context.Context, o StartOptions) (int, error) {
	if len(o.Command) == 0 {
		return 0, errors.New("gateway: Start needs StartOptions.Command")
	}
	o.defaults()
	ap, err := netip.ParseAddrPort(o.Addr)
	if err != nil {
		return 0, fmt.Errorf("gateway: address %q: %w", o.Addr, err)
	}
	// Its socket first, while the old gateway still holds the port, so
	// the port is never free for another process to take (see
	// daemonpid.Listen).
	ls, err := daemonpid.Listen("credential gateway", []daemonpid.Addr{{Net: "tcp", Addr: ap}})
	if err != nil {
		return 0, fmt.Errorf("gateway: %w", err)
	}
	defer ls.Close()
	if err := Stop(o.StateDir); err != nil {
		return 0, err
	}
	for _, d := range []string{o.StateDir, o.LogDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return 0, fmt.Errorf("gateway: %w", err)
		}
	}
	logPath := filepath.Join(o.LogDir, logFile)
	lf, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o640)
	if err != nil {
		return 0, fmt.Errorf("gateway: %w", err)
	}
	defer lf.Close()
	return daemonpid.Start(ctx, daemonpid.Spec{
		Name:      "gateway",
		Argv:      o.Command,
		Env:       o.Env,
		Dir:       "/",
		UID:       o.UID,
		GID:       o.GID,
		Output:    lf,
		PIDFile:   filepath.Join(o.StateDir, pidFile),
		Listeners: ls,
		Wait:      o.Wait,
		Poll:      10 * time.Millisecond,
		// Start also proves the socket that answers is the one handed
		// to this process (daemonpid.Check).
		Ready: func(ctx context.Context, _ int) error { return Health(ctx, o.Addr) },
		Tail:  func() string { return lastLines(logPath) },
	})
}

// PID returns the pid in stateDir's pidfile and whether that process is
// the gateway Start started (alive, and started when the pidfile says: a
// pid alone may name a process of a later container start).
func PID(stateDir string) (int, bool) {
	return daemonpid.Read(filepath.Join(stateDir, pidFile), "/proc")
}

// Check proves the gateway recorded in stateDir's pidfile runs and is the
// only holder of its socket (daemonpid.Check); the error names a taken
// port and its holder.
func Check(stateDir string) error {
	_, err := daemonpid.Check(filepath.Join(stateDir, pidFile), "credential gateway")
	return err
}

// Listener returns the socket root handed to this gateway for addr (Start
// makes it): the gateway never binds its port itself.
func Listener(addr string) (net.Listener, error) {
	in, err := daemonpid.Inherit("credential gateway")
	if err != nil {
		return nil, fmt.Errorf("gateway: %w", err)
	}
	if len(in.TCP) != 1 || len(in.UDP) != 0 || in.TCP[0].Addr().String() != addr {
		in.Close()
		return nil, fmt.Errorf("gateway: handed %d TCP and %d UDP sockets, want one TCP socket on %s", len(in.TCP), len(in.UDP), addr)
	}
	return in.TCP[0], nil
}

// Stop stops the gateway named by stateDir's pidfile, if it runs.
func Stop(stateDir string) error {
	if err := daemonpid.Stop(filepath.Join(stateDir, pidFile)); err != nil {
		return fmt.Errorf("gateway: %w", err)
	}
	return nil
}

// Launch brings the gateway up for a policy, as root, on every container
// start: secrets directory, git's system config, then the daemon. With no
// credentials it stops any gateway and removes the git block. It returns
// the daemon's pid (0 when none runs).
func Launch(ctx context.Context, o LaunchOptions) (int, error) {
	if o.GitConfig == "" {
		o.GitConfig = layout.GitConfigPath
	}
	o.Start.defaults()
	if err := WriteGitConfig(o.GitConfig, GitConfig(o.Creds, o.Start.Addr)); err != nil {
		return 0, err
	}
	if o.Creds.IsZero() {
		return 0, Stop(o.Start.StateDir)
	}
	if err := o.Store.Prepare(); err != nil {
		// A mounted directory may be read-only: acceptable only when no
		// one else can read it already.
		if cerr := o.Store.Check(); cerr != nil {
			return 0, fmt.Errorf("%v; and %w", err, cerr)
		}
	}
	if err := o.Store.Check(); err != nil {
		return 0, err
	}
	return Start(ctx, o.Start)
}
