//go:build linux

package firewall

import (
	"context"
	"encoding/json"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/devbox-dev/devbox/internal/devboxtest"
	"github.com/devbox-dev/devbox/internal/testworld"
)

// Addresses the standard zone points at (all in the world namespace).
var (
	hostAPI   = testworld.HostsV4[1] // api.test
	hostOther = testworld.HostsV4[2] // not in any policy
	hostWild  = testworld.HostsV4[3] // *.wild.test
	hostAPI6  = testworld.HostsV6[1]
)

// fence is one test's world with the firewall applied in its client.
type fence struct {
	t     *testing.T
	w     *testworld.World
	cfg   Config
	dir   string
	bin   string
	apply applyOut
}

// testBinary copies the test binary where the DNS filter's user (998) can
// execute it: go test's own work directory is private to root.
func testBinary(t *testing.T, dir string) string {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	in, err := os.Open(self)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	bin := filepath.Join(dir, "fwtest")
	out, err := os.OpenFile(bin, os.O_CREATE|os.O_WRONLY, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	out.Close()
	return bin
}

func standardZone(d *testworld.DNSServer) {
	d.Set("api.test", dns.TypeA, 300, hostAPI.String())
	d.Set("api.test", dns.TypeAAAA, 300, hostAPI6.String())
	d.Set("other.test", dns.TypeA, 300, hostOther.String())
	d.Set("x.wild.test", dns.TypeA, 300, hostWild.String())
	d.Set("evil.wild.test", dns.TypeA, 300, hostOther.String())
	d.Set("wild.test", dns.TypeA, 300, hostWild.String())
	d.Set("cdn.test", dns.TypeA, 1, hostAPI.String())
	d.Set("meta.test", dns.TypeA, 300, "169.254.169.254", hostAPI.String())
	d.Set("loop.test", dns.TypeA, 300, "127.0.0.1")
	d.Set("loop.test", dns.TypeAAAA, 300, "::1")
	d.Set("alias.test", dns.TypeCNAME, 300, "x.wild.test.")
	d.Set("api.test", dns.TypeTXT, 300, `"hello"`)
}

// newFence builds a world, writes cfg (with test paths) and, unless
// noApply, applies it in the client and starts the DNS filter there.
func newFence(t *testing.T, cfg Config, env ...string) *fence {
	t.Helper()
	devboxtest.RequireRoot(t)
	for _, b := range []string{"ip", "iptables-restore", "ip6tables-restore"} {
		devboxtest.RequireBinary(t, b)
	}
	dir, err := os.MkdirTemp("", "devbox-fw-")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir, 0o755)
	t.Cleanup(func() { os.RemoveAll(dir) })
	f := &fence{t: t, dir: dir}
	f.bin = testBinary(t, dir)
	f.w = testworld.New(t)
	standardZone(f.w.DNS)
	cfg.StateDir = dir
	cfg.Log = true
	cfg.LogFile = filepath.Join(dir, "firewall.jsonl")
	f.cfg = cfg
	t.Cleanup(func() { StopDNS(f.cfg) })
	if err := f.applyErr(env...); err != nil {
		t.Fatalf("apply: %v", err)
	}
	return f
}

func (f *fence) writeConfig() string {
	raw, _ := json.Marshal(f.cfg)
	p := filepath.Join(f.dir, "config.json")
	if err := os.WriteFile(p, raw, 0o644); err != nil {
		f.t.Fatal(err)
	}
	return p
}

// applyErr runs Apply + StartDNS + Warm inside the client namespace.
func (f *fence) applyErr(env ...string) error {
	cmd := f.w.Command(context.Background(), f.bin, "--config", f.writeConfig())
	cmd.Env = append([]string{helperEnv + "=apply", "PATH=" + os.Getenv("PATH")}, env...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return &applyError{err, strings.TrimSpace(stderr.String())}
	}
	if err := json.Unmarshal(out, &f.apply); err != nil {
		return err
	}
	return nil
}

type applyError struct {
	err    error
	stderr string
}

func (e *applyError) Error() string { return e.err.Error() + ": " + e.stderr }

// probe runs one probe in the client; it returns the probe's output and
// whether it succeeded.
func (f *fence) probe(args ...string) (string, bool) {
	return f.probeAs(-1, args...)
}

func (f *fence) probeAs(uid int, args ...string) (string, bool) {
	f.t.Helper()
	argv := append([]string{f.bin}, args...)
	if uid >= 0 {
		argv = append([]string{"setpriv", "--reuid", itoa(uid), "--regid", itoa(uid), "--clear-groups", "--inh-caps=-all", "--"}, argv...)
	}
	cmd := f.w.Command(context.Background(), argv...)
	cmd.Env = []string{helperEnv + "=probe", "PATH=" + os.Getenv("PATH")}
	out, err := cmd.CombinedOutput()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok && ee.ExitCode() == 3 {
			return strings.TrimSpace(string(out)), false
		}
		f.t.Fatalf("probe %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out)), true
}

func itoa(i int) string { return strings.TrimSpace(strings.Repeat(" ", 0) + fmtInt(i)) }

func fmtInt(i int) string { b, _ := json.Marshal(i); return string(b) }

func (f *fence) mustConnect(addr netip.AddrPort) {
	f.t.Helper()
	if out, ok := f.probe("tcp", addr.String()); !ok {
		f.t.Errorf("tcp %s blocked, want connected: %s", addr, out)
	}
	if f.w.Rec.Seen(addr.Addr(), addr.Port()) == 0 {
		f.t.Errorf("the world did not see the connection to %s", addr)
	}
}

func (f *fence) mustBlock(addr netip.AddrPort) {
	f.t.Helper()
	if out, ok := f.probe("tcp", addr.String()); ok {
		f.t.Errorf("tcp %s connected, want blocked: %s", addr, out)
	}
	if n := f.w.Rec.Seen(addr.Addr(), addr.Port()); n != 0 {
		f.t.Errorf("the world saw %d connections to %s, want none", n, addr)
	}
}

// lookup asks the filter through the redirect (any server, port 53).
func (f *fence) lookup(name, qtype string) (rcode string, answers []string) {
	f.t.Helper()
	return f.lookupVia(testworld.DNSAddr.String(), name, qtype, "udp")
}

func (f *fence) lookupVia(server, name, qtype, network string) (string, []string) {
	f.t.Helper()
	out, ok := f.probe("dns", server, name, qtype, network)
	if !ok {
		return "ERROR", []string{out}
	}
	fields := strings.Fields(out)
	return fields[0], fields[1:]
}

func ap(a netip.Addr, port uint16) netip.AddrPort { return netip.AddrPortFrom(a, port) }

func allowName(n string) Destination { return Destination{Name: n} }

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for i := 0; i < 100; i++ {
		if cond() {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s", what)
}

func TestFence_AllowedNameConnects(t *testing.T) {
	f := newFence(t, Config{Allow: []Destination{allowName("api.test")}})
	rc, ans := f.lookup("api.test", "A")
	if rc != "NOERROR" || len(ans) != 1 || ans[0] != hostAPI.String() {
		t.Fatalf("api.test A = %s %v", rc, ans)
	}
	f.mustConnect(ap(hostAPI, 443))
	if out, ok := f.probe("connect", "api.test:80"); !ok {
		t.Errorf("connect api.test:80 through the system resolver: %s", out)
	}
}
