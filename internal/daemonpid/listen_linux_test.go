//go:build linux

package daemonpid

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/devbox-dev/devbox/internal/devboxtest"
)

const helperEnv = "DEVBOX_DAEMONPID_HELPER"

// helper runs one of the test's other processes:
//   - "squat NET/ADDR…": the agent on the ports (devboxtest.Squat).
//   - "daemon": a daemon; it takes its sockets (Inherit), answers each
//     TCP connection with its pid, and on SIGUSR1 closes its sockets but
//     stays alive, as a daemon whose listener broke would.
func helper(name string, args []string) int {
	switch name {
	case "squat":
		return devboxtest.Squat(args, nil)
	case "daemon":
		in, err := Inherit("test daemon")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		for _, l := range in.TCP {
			go func() {
				for {
					c, err := l.Accept()
					if err != nil {
						return
					}
					fmt.Fprintf(c, "%d\n", os.Getpid())
					c.Close()
				}
			}()
		}
		usr1 := make(chan os.Signal, 1)
		signal.Notify(usr1, syscall.SIGUSR1)
		<-usr1
		in.Close()
		select {}
	}
	fmt.Fprintln(os.Stderr, "unknown helper", name)
	return 2
}

// copyBinary copies the test binary where other uids can run it.
func copyBinary(t *testing.T) string {
	return devboxtest.CopyTestBinary(t, devboxtest.SharedTempDir(t, "daemonpid-"), "daemonpid.test")
}

// agent starts uid 1000 binding addrs in a loop (devboxtest.Squat).
func agent(t *testing.T, bin string, addrs []Addr) *devboxtest.Squatter {
	t.Helper()
	var args []string
	for _, a := range addrs {
		args = append(args, a.Net+"/"+a.Addr.String())
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = []string{helperEnv + "=squat"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 1000, Gid: 1000, Groups: []uint32{}}}
	return devboxtest.StartSquat(t, cmd)
}

// freePort is a port free on both loopback addresses, TCP and UDP.
func freePort(t *testing.T) uint16 {
	t.Helper()
	for i := 0; i < 50; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		ls, err := Listen("probe", addrsAt(uint16(port)))
		if err == nil {
			ls.Close()
			return uint16(port)
		}
	}
	t.Fatal("no free port")
	return 0
}

func addrsAt(port uint16) []Addr {
	var out []Addr
	for _, h := range []string{"127.0.0.1", "::1"} {
		ap := netip.AddrPortFrom(netip.MustParseAddr(h), port)
		out = append(out, Addr{"tcp", ap}, Addr{"udp", ap})
	}
	return out
}

// TestListen_AgentNeverGetsThePort: root's sockets keep the agent's uid off
// a daemon's port on both families, for TCP and UDP, before the daemon
// starts, while it runs, while root binds its successor and after the
// daemon is killed (its holder keeps them); when the daemon loses its
// sockets and its holder is gone, the agent may bind, and then Check names
// the port and the agent's uid, and a new Listen fails the same way.
func TestListen_AgentNeverGetsThePort(t *testing.T) {
	devboxtest.RequireRoot(t)
	trustedOwner = 0
	defer func() { trustedOwner = os.Geteuid() }()
	bin := copyBinary(t)
	port := freePort(t)
	addrs := addrsAt(port)

	ls, err := Listen("test daemon", addrs)
	if err != nil {
		t.Fatal(err)
	}
	if len(ls.Sockets) != 4 || len(ls.Notes) != 0 {
		t.Fatalf("Listen made %+v, notes %q; want 4 sockets", ls.Sockets, ls.Notes)
	}
	mustRefuse := func(when string) {
		t.Helper()
		s := agent(t, bin, addrs)
		time.Sleep(100 * time.Millisecond)
		if took, tries := s.Stop(); len(took) > 0 || tries == 0 {
			t.Errorf("%s: the agent took %q in %d tries", when, took, tries)
		}
	}
	mustRefuse("before the daemon starts")

	// Root binds the successor while the first set still holds the port.
	next, err := Listen("test daemon", addrs)
	if err != nil {
		t.Fatalf("root's second Listen while the first holds the port: %v", err)
	}
	ls.Close()
	mustRefuse("after the first set closed")

	dir := t.TempDir()
	pidfile := filepath.Join(dir, "test.pid")
	out, _ := os.Create(filepath.Join(dir, "out"))
	defer out.Close()
	spec := Spec{
		Name: "test daemon", Argv: []string{bin}, Env: []string{helperEnv + "=daemon"},
		UID: 997, GID: 997, Output: out, PIDFile: pidfile, Listeners: next,
		Ready: func(ctx context.Context, pid int) error {
			c, err := net.Dial("tcp", net.JoinHostPort("::1", strconv.Itoa(int(port))))
			if err != nil {
				return err
			}
			defer c.Close()
			b, _ := io.ReadAll(c)
			if strings.TrimSpace(string(b)) != strconv.Itoa(pid) {
				return fmt.Errorf("answered %q", b)
			}
			return nil
		},
	}
	pid, err := Start(context.Background(), spec)
	if err != nil {
		raw, _ := os.ReadFile(out.Name())
		t.Fatalf("Start: %v\n%s", err, raw)
	}
	defer Stop(pidfile)
	if _, err := Check(pidfile, "test daemon"); err != nil {
		t.Errorf("Check of the running daemon: %v", err)
	}
	mustRefuse("while the daemon runs")

	rec, err := Load(pidfile)
	if err != nil || rec.Holder == 0 {
		t.Fatalf("pidfile %+v, %v: no holder recorded", rec, err)
	}

	// The daemon dies (a crash, the OOM killer): its holder keeps the
	// ports, and a client is refused at once, as by a closed port.
	syscall.Kill(pid, syscall.SIGKILL)
	for i := 0; rec.Alive("/proc") == nil; i++ {
		if i == 100 {
			t.Fatal("the daemon survived SIGKILL")
		}
		time.Sleep(10 * time.Millisecond)
	}
	mustRefuse("after the daemon was killed")
	if c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(int(port))), time.Second); err == nil || !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("a connection to the dead daemon's port: %v, want connection refused", err)
		if c != nil {
			c.Close()
		}
	}
	if _, err := Check(pidfile, "test daemon"); err == nil || !strings.Contains(err.Error(), "not running") {
		t.Errorf("Check of a killed daemon = %v", err)
	}

	// Restarted, it loses its sockets but lives, and its holder is gone
	// too (only root or its uid could do that): now the agent can bind,
	// and nothing may count its sockets as the daemon's.
	next, err = Listen("test daemon", addrs)
	if err != nil {
		t.Fatalf("Listen beside the holder: %v", err)
	}
	if err := Stop(pidfile); err != nil {
		t.Fatal(err)
	}
	spec.Listeners = next
	if pid, err = Start(context.Background(), spec); err != nil {
		t.Fatalf("restart: %v", err)
	}
	if _, err := Check(pidfile, "test daemon"); err != nil {
		t.Errorf("Check after the restart: %v", err)
	}
	if _, alive := Read(pidfile, "/proc"); !alive {
		t.Fatal("restarted daemon not alive")
	}
	if err := rec.HolderAlive("/proc"); err == nil {
		t.Error("the first holder outlived the restart")
	}
	rec, _ = Load(pidfile)
	syscall.Kill(rec.Holder, syscall.SIGKILL)
	syscall.Kill(pid, syscall.SIGUSR1)
	s := agent(t, bin, addrs)
	for range addrs {
		if l := s.Next(); !strings.HasPrefix(l, "took ") {
			t.Fatalf("agent: %q", l)
		}
	}
	defer s.Stop()
	_, err = Check(pidfile, "test daemon")
	if err == nil || !strings.Contains(err.Error(), "is taken by a socket that is not the test daemon's (uid 1000") {
		t.Errorf("Check with the agent on the port = %v, want it named with uid 1000", err)
	}
	for _, a := range addrs {
		if !strings.Contains(err.Error(), a.String()+" is taken") {
			t.Errorf("Check does not name %s: %v", a, err)
		}
	}
	if _, err := Listen("test daemon", addrs); err == nil || !strings.Contains(err.Error(), "is taken by a socket devbox did not make (uid 1000") {
		t.Errorf("Listen with the agent on the port = %v, want a failure naming uid 1000", err)
	}

	// A pidfile others could have written proves nothing.
	os.Chmod(pidfile, 0o666)
	if _, err := Check(pidfile, "test daemon"); err == nil || !strings.Contains(err.Error(), "not trusted") {
		t.Errorf("Check of a world-writable pidfile = %v", err)
	}
	os.Chmod(pidfile, 0o644)
}

// TestInherit_Refuses: a daemon started without sockets, or with a
// descriptor that is not the socket the variable names, does not run.
func TestInherit_Refuses(t *testing.T) {
	os.Unsetenv(ListenEnv)
	if _, err := Inherit("test daemon"); err == nil || !strings.Contains(err.Error(), "does not bind its own ports") {
		t.Errorf("Inherit with nothing handed over = %v", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	f, _ := l.(*net.TCPListener).File()
	defer f.Close()
	for _, v := range []string{
		fmt.Sprintf("%d/tcp/127.0.0.1:1", f.Fd()),  // another port
		fmt.Sprintf("%d/udp/%s", f.Fd(), l.Addr()), // another type
		"99999/tcp/127.0.0.1:1",                    // no such descriptor
		"x",
	} {
		os.Setenv(ListenEnv, v)
		if _, err := Inherit("test daemon"); err == nil {
			t.Errorf("Inherit(%q) accepted it", v)
		}
	}
	if _, ok := os.LookupEnv(ListenEnv); ok {
		t.Error("Inherit left the variable set")
	}
}

// TestHold: the holder is sleep(1) where the system has it, else the
// daemon's own binary with HoldEnv; either keeps a killed daemon's ports.
func TestHold(t *testing.T) {
	devboxtest.RequireRoot(t)
	trustedOwner = 0
	defer func() { trustedOwner = os.Geteuid() }()
	bin := copyBinary(t)
	for _, tc := range []struct {
		name  string
		paths []string
		want  string // the holder's argv[0]
	}{
		{"sleep", sleepPaths, "/usr/bin/sleep"},
		{"no sleep: the daemon's binary", nil, bin},
	} {
		t.Run(tc.name, func(t *testing.T) {
			saved := sleepPaths
			sleepPaths = tc.paths
			defer func() { sleepPaths = saved }()
			port := freePort(t)
			ls, err := Listen("test daemon", addrsAt(port))
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			pidfile := filepath.Join(dir, "test.pid")
			pid, err := Start(context.Background(), Spec{Name: "test daemon", Argv: []string{bin}, Env: []string{helperEnv + "=daemon"},
				UID: 997, GID: 997, Output: os.Stderr, PIDFile: pidfile, Listeners: ls,
				Ready: func(context.Context, int) error { return nil }})
			if err != nil {
				t.Fatal(err)
			}
			defer Stop(pidfile)
			rec, _ := Load(pidfile)
			cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", rec.Holder))
			if argv0, _, _ := strings.Cut(string(cmdline), "\x00"); argv0 != tc.want {
				t.Errorf("holder runs %q, want %s", cmdline, tc.want)
			}
			if err := rec.HolderAlive("/proc"); err != nil || rec.HolderUID != HolderUID {
				t.Errorf("holder: %v, uid %d", err, rec.HolderUID)
			}
			syscall.Kill(pid, syscall.SIGKILL)
			for i := 0; rec.Alive("/proc") == nil; i++ {
				if i == 100 {
					t.Fatal("the daemon survived SIGKILL")
				}
				time.Sleep(10 * time.Millisecond)
			}
			s := agent(t, bin, addrsAt(port))
			time.Sleep(100 * time.Millisecond)
			if took, tries := s.Stop(); len(took) > 0 || tries == 0 {
				t.Errorf("the agent took %q in %d tries with the daemon dead", took, tries)
			}
			if err := Stop(pidfile); err != nil || rec.HolderAlive("/proc") == nil {
				t.Errorf("Stop left the holder: %v", err)
			}
		})
	}
}
