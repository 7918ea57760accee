//go:build linux

package firewall

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// helperSquat is the agent trying to take the daemons' ports: as whatever
// uid it runs as, it binds every "tcp/ADDR" or "udp/ADDR" of args over and
// over (with SO_REUSEADDR and SO_REUSEPORT, its best chance), keeps what it
// gets and says so ("took tcp 127.0.0.1:53443"), until its stdin closes;
// then it prints "tries N". A TCP socket it took answers every connection
// with a name-gate health answer carrying the pid in DEVBOX_SQUAT_PID (the
// pidfile is world-readable), as a squatter would to pass a health check.
func helperSquat(args []string) int {
	done := make(chan struct{})
	go func() { io.Copy(io.Discard, os.Stdin); close(done) }()
	pid, _ := strconv.Atoi(os.Getenv("DEVBOX_SQUAT_PID"))
	lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
		return c.Control(func(fd uintptr) {
			unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEADDR, 1)
			unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEPORT, 1)
		})
	}}
	left := append([]string(nil), args...)
	var held []io.Closer
	tries := 0
	fmt.Println("started")
	for {
		select {
		case <-done:
			fmt.Println("tries", tries)
			for _, c := range held {
				c.Close()
			}
			return 0
		default:
		}
		if len(left) == 0 {
			time.Sleep(10 * time.Millisecond)
			continue
		}
		for i := 0; i < len(left); i++ {
			network, addr, _ := strings.Cut(left[i], "/")
			tries++
			var err error
			if network == "udp" {
				var pc net.PacketConn
				if pc, err = lc.ListenPacket(context.Background(), "udp", addr); err == nil {
					held = append(held, pc)
				}
			} else {
				var l net.Listener
				if l, err = lc.Listen(context.Background(), "tcp", addr); err == nil {
					held = append(held, l)
					go func() {
						for {
							c, err := l.Accept()
							if err != nil {
								return
							}
							json.NewEncoder(c).Encode(GateHealth{PID: pid})
							c.Close()
						}
					}()
				}
			}
			if err == nil {
				fmt.Println("took", network, addr)
				left = append(left[:i], left[i+1:]...)
				i--
			}
		}
	}
}

// squatter is a running helperSquat.
type squatter struct {
	t     *testing.T
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan string
}

// squat starts helperSquat in the fence's client namespace as uid 1000,
// the agent's, with no capability.
func (f *fence) squat(pid int, addrs ...string) *squatter {
	f.t.Helper()
	argv := append([]string{"setpriv", "--reuid", "1000", "--regid", "1000", "--clear-groups", "--inh-caps=-all", "--", f.bin}, addrs...)
	cmd := f.w.Command(context.Background(), argv...)
	cmd.Env = []string{helperEnv + "=squat", "DEVBOX_SQUAT_PID=" + strconv.Itoa(pid), "PATH=" + os.Getenv("PATH")}
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		f.t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		f.t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		f.t.Fatal(err)
	}
	s := &squatter{t: f.t, cmd: cmd, stdin: stdin, lines: make(chan string, 100)}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			s.lines <- sc.Text()
		}
		close(s.lines)
	}()
	f.t.Cleanup(func() { stdin.Close(); cmd.Process.Kill(); cmd.Wait() })
	if l := s.next(); l != "started" {
		f.t.Fatalf("squatter: %q", l)
	}
	return s
}

func (s *squatter) next() string {
	select {
	case l := <-s.lines:
		return l
	case <-time.After(10 * time.Second):
		s.t.Fatal("squatter: no line in 10s")
		return ""
	}
}

// stop ends the squatter and returns what it took and how many binds it
// tried.
func (s *squatter) stop() (took []string, tries int) {
	s.stdin.Close()
	for l := range s.lines {
		if t, ok := strings.CutPrefix(l, "took "); ok {
			took = append(took, t)
		}
		if n, ok := strings.CutPrefix(l, "tries "); ok {
			tries, _ = strconv.Atoi(n)
		}
	}
	s.cmd.Wait()
	return took, tries
}

var (
	agentGatePorts = []string{"tcp/127.0.0.1:53443", "tcp/[::1]:53443"}
	agentDNSPorts  = []string{"udp/127.0.0.1:53535", "tcp/127.0.0.1:53535", "udp/[::1]:53535", "tcp/[::1]:53535"}
)

// TestDaemonPorts_RestartNeverFreesThem: while `apply` restarts the DNS
// filter and the name gate, the agent binds their ports in a tight loop
// and never gets one: root binds each new daemon's sockets before the old
// daemon stops (SO_REUSEPORT, which the agent's uid cannot join).
func TestDaemonPorts_RestartNeverFreesThem(t *testing.T) {
	g := newGateFence(t, Config{Allow: []Destination{allowName("good.test")}})
	s := g.squat(0, append(append([]string(nil), agentGatePorts...), agentDNSPorts...)...)
	for i := 0; i < 3; i++ {
		g.mustApply()
	}
	took, tries := s.stop()
	if len(took) > 0 {
		t.Errorf("the agent took %q during 3 restarts", took)
	}
	if tries < 100 {
		t.Errorf("the squatter tried only %d binds", tries)
	}
	t.Logf("the agent tried %d binds during 3 restarts, took none", tries)
	st := g.status()
	if st.Daemon.Health == nil || st.Gate.Health == nil {
		t.Errorf("after the restarts: DNS filter %+v, gate %+v", st.Daemon, st.Gate)
	}
	if out, ok := g.probe("verify", g.writeConfig(), "-", "-", "-"); !ok {
		t.Errorf("verify after the restarts: %s", out)
	}
}

// TestDaemonPorts_TakenAfterACrash: once the gate dies (SIGKILL, as the
// out-of-memory killer would), the agent may bind its port; then no
// health check counts its listener as the gate, even when it answers
// with the dead gate's pid, and a new apply fails naming the port and the
// agent's uid instead of starting a gate on one family only.
func TestDaemonPorts_TakenAfterACrash(t *testing.T) {
	g := newGateFence(t, Config{Allow: []Destination{allowName("good.test")}})
	kill := func() int {
		pid, alive := GatePID(g.cfg)
		if !alive {
			t.Fatal("gate not running")
		}
		syscall.Kill(pid, syscall.SIGKILL)
		waitFor(t, "the gate to die", func() bool { _, alive := GatePID(g.cfg); return !alive })
		return pid
	}

	t.Run("IPv6 taken: no IPv4-only gate", func(t *testing.T) {
		pid := kill()
		s := g.squat(pid, "tcp/[::1]:53443")
		if l := s.next(); l != "took tcp [::1]:53443" {
			t.Fatalf("squatter: %q", l)
		}
		err := g.applyErr()
		if err == nil || !strings.Contains(err.Error(), "[::1]:53443 is taken") || !strings.Contains(err.Error(), "uid 1000") {
			t.Errorf("apply with [::1]:53443 taken by the agent = %v, want a failure naming it and uid 1000", err)
		}
		if _, alive := GatePID(g.cfg); alive {
			t.Error("a gate runs while the agent holds its IPv6 port")
		}
		s.stop()
		g.mustApply()
	})

	t.Run("IPv4 taken, answering with the gate's pid", func(t *testing.T) {
		pid := kill()
		s := g.squat(pid, agentGatePorts...)
		for range agentGatePorts {
			if l := s.next(); !strings.HasPrefix(l, "took ") {
				t.Fatalf("squatter: %q", l)
			}
		}
		for _, uid := range []int{-1, 1000} {
			out, _ := g.probeAs(uid, "status", g.writeConfig())
			var st Status
			if err := json.Unmarshal([]byte(out), &st); err != nil {
				t.Fatalf("status as uid %d: %v\n%s", uid, err, out)
			}
			if st.Gate.Health != nil || st.Gate.Error == "" {
				t.Errorf("status as uid %d with the agent on the gate's port: %+v", uid, st.Gate)
			}
			if out, ok := g.probeAs(uid, "verify", g.writeConfig(), "-", "-", "-"); ok || !strings.Contains(out, `"target":"name gate","ok":false`) {
				t.Errorf("verify as uid %d with the agent on the gate's port: ok=%v %s", uid, ok, out)
			}
		}
		err := g.applyErr()
		if err == nil || !strings.Contains(err.Error(), "53443 is taken") || !strings.Contains(err.Error(), "uid 1000") {
			t.Errorf("apply with the gate's port taken = %v, want a failure naming it and uid 1000", err)
		}
		s.stop()
		g.mustApply()
		if st := g.status(); st.Gate.Health == nil {
			t.Errorf("gate after the squatter left: %+v", st.Gate)
		}
	})
}
