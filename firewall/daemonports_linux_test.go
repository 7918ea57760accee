//go:build linux

package firewall

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/devbox-dev/devbox/internal/daemonpid"
	"github.com/devbox-dev/devbox/internal/devboxtest"
)

// helperSquat is the agent on the daemons' ports (devboxtest.Squat): a
// TCP port it takes answers with a name-gate health answer carrying the
// pid in DEVBOX_SQUAT_PID (the pidfile is world-readable), as a squatter
// would to pass a health check.
func helperSquat(args []string) int {
	pid, _ := strconv.Atoi(os.Getenv("DEVBOX_SQUAT_PID"))
	return devboxtest.Squat(args, func(c net.Conn) { json.NewEncoder(c).Encode(GateHealth{PID: pid}) })
}

// squat starts helperSquat in the fence's client namespace as uid 1000,
// the agent's, with no capability.
func (f *fence) squat(pid int, addrs ...string) *devboxtest.Squatter {
	f.t.Helper()
	argv := append([]string{"setpriv", "--reuid", "1000", "--regid", "1000", "--clear-groups", "--inh-caps=-all", "--", f.bin}, addrs...)
	cmd := f.w.Command(context.Background(), argv...)
	cmd.Env = []string{helperEnv + "=squat", "DEVBOX_SQUAT_PID=" + strconv.Itoa(pid), "PATH=" + os.Getenv("PATH")}
	return devboxtest.StartSquat(f.t, cmd)
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
	took, tries := s.Stop()
	if len(took) > 0 {
		t.Errorf("the agent took %q during 3 restarts", took)
	}
	if tries < 100 {
		t.Errorf("the squatter tried only %d binds", tries)
	}
	t.Logf("the agent tried %d binds during 3 restarts and took %d ports", tries, len(took))
	st := g.status()
	if st.Daemon.Health == nil || st.Gate.Health == nil {
		t.Errorf("after the restarts: DNS filter %+v, gate %+v", st.Daemon, st.Gate)
	}
	if out, ok := g.probe("verify", g.writeConfig(), "-", "-", "-"); !ok {
		t.Errorf("verify after the restarts: %s", out)
	}
}

// TestDaemonPorts_TakenAfterACrash: once the gate dies (SIGKILL, as the
// out-of-memory killer would), its holder keeps its ports from the agent.
// With the holder gone too (only root or the gate's uid could do that)
// the agent may bind them; then no health check counts its listener as
// the gate, even when it answers with the dead gate's pid, and a new
// apply fails naming the port and the agent's uid instead of starting a
// gate on one family only.
func TestDaemonPorts_TakenAfterACrash(t *testing.T) {
	g := newGateFence(t, Config{Allow: []Destination{allowName("good.test")}})
	kill := func(holder bool) int {
		rec, err := daemonpid.Load(filepath.Join(g.cfg.StateDir, gatePIDFile))
		if err != nil || rec.Alive("/proc") != nil || rec.HolderAlive("/proc") != nil {
			t.Fatalf("gate not running: %+v %v", rec, err)
		}
		syscall.Kill(rec.PID, syscall.SIGKILL)
		if holder {
			syscall.Kill(rec.Holder, syscall.SIGKILL)
		}
		waitFor(t, "the gate to die", func() bool { _, alive := GatePID(g.cfg); return !alive })
		return rec.PID
	}

	t.Run("killed: the holder keeps its ports", func(t *testing.T) {
		pid := kill(false)
		s := g.squat(pid, agentGatePorts...)
		time.Sleep(200 * time.Millisecond)
		if took, tries := s.Stop(); len(took) > 0 || tries == 0 {
			t.Errorf("the agent took %q in %d tries with the gate dead", took, tries)
		}
		if out, ok := g.probeAs(1000, "tcp", "127.0.0.1:53443"); ok || !strings.Contains(out, "connection refused") {
			t.Errorf("a connection to the dead gate's port: ok=%v %s, want connection refused", ok, out)
		}
		if st := g.status(); st.Gate.Health != nil || !strings.Contains(st.Gate.Error, "name gate not running") {
			t.Errorf("gate status with the gate dead: %+v", st.Gate)
		}
		g.mustApply()
	})

	t.Run("IPv6 taken: no IPv4-only gate", func(t *testing.T) {
		pid := kill(true)
		s := g.squat(pid, "tcp/[::1]:53443")
		if l := s.Next(); l != "took tcp [::1]:53443" {
			t.Fatalf("squatter: %q", l)
		}
		err := g.applyErr()
		if err == nil || !strings.Contains(err.Error(), "[::1]:53443 is taken") || !strings.Contains(err.Error(), "uid 1000") {
			t.Errorf("apply with [::1]:53443 taken by the agent = %v, want a failure naming it and uid 1000", err)
		}
		if _, alive := GatePID(g.cfg); alive {
			t.Error("a gate runs while the agent holds its IPv6 port")
		}
		s.Stop()
		g.mustApply()
	})

	t.Run("IPv4 taken, answering with the gate's pid", func(t *testing.T) {
		pid := kill(true)
		s := g.squat(pid, agentGatePorts...)
		for range agentGatePorts {
			if l := s.Next(); !strings.HasPrefix(l, "took ") {
				t.Fatalf("squatter: %q", l)
			}
		}
		for _, uid := range []int{-1, 1000} {
			out, _ := g.probeAs(uid, "status", g.writeConfig())
			var st Status
			if err := json.Unmarshal([]byte(out), &st); err != nil {
				t.Fatalf("status as uid %d: %v\n%s", uid, err, out)
			}
			if st.Gate.Health != nil || !strings.Contains(st.Gate.Error, "tcp 127.0.0.1:53443 is taken") || !strings.Contains(st.Gate.Error, "uid 1000") {
				t.Errorf("status as uid %d with the agent on the gate's port: %+v, want it named with uid 1000", uid, st.Gate)
			}
			if out, ok := g.probeAs(uid, "verify", g.writeConfig(), "-", "-", "-"); ok || !strings.Contains(out, `"target":"name gate","ok":false`) || !strings.Contains(out, "53443 is taken") {
				t.Errorf("verify as uid %d with the agent on the gate's port: ok=%v %s", uid, ok, out)
			}
		}
		err := g.applyErr()
		if err == nil || !strings.Contains(err.Error(), "53443 is taken") || !strings.Contains(err.Error(), "uid 1000") {
			t.Errorf("apply with the gate's port taken = %v, want a failure naming it and uid 1000", err)
		}
		s.Stop()
		g.mustApply()
		if st := g.status(); st.Gate.Health == nil {
			t.Errorf("gate after the squatter left: %+v", st.Gate)
		}
	})
}
