//go:build linux

package firewall

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

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
	t     testing.TB
	w     *testworld.World
	cfg   Config
	dir   string
	bin   string
	apply applyOut
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

// newFence builds a world and applies cfg in its client (Apply, StartDNS
// and Warm, as the entrypoint does).
func newFence(t *testing.T, cfg Config) *fence {
	t.Helper()
	f := newWorld(t, cfg)
	f.mustApply()
	return f
}

func (f *fence) mustApply(env ...string) {
	f.t.Helper()
	if err := f.applyErr(env...); err != nil {
		f.t.Fatalf("apply: %v", err)
	}
	for _, w := range f.apply.Warnings {
		f.t.Logf("apply: warning: %s", w)
	}
}

// newWorld builds a world and writes cfg (with the test's paths) without
// applying it.
func newWorld(t testing.TB, cfg Config) *fence {
	t.Helper()
	devboxtest.RequireRoot(t)
	for _, b := range []string{"ip", "iptables-restore", "ip6tables-restore"} {
		devboxtest.RequireBinary(t, b)
	}
	dir := devboxtest.SharedTempDir(t, "devbox-fw-")
	f := &fence{t: t, dir: dir}
	// Where the DNS filter's user (998) can execute it.
	f.bin = devboxtest.CopyTestBinary(t, dir, "fwtest")
	f.w = testworld.New(t)
	standardZone(f.w.DNS)
	cfg.StateDir = dir
	cfg.Log = true
	cfg.LogFile = filepath.Join(dir, "firewall.jsonl")
	f.cfg = cfg
	t.Cleanup(func() {
		StopDNS(f.cfg)
		StopGate(f.cfg)
		if t.Failed() {
			f.logDaemonErrors()
		}
	})
	return f
}

// logDaemonErrors puts the end of the daemons' stderr files in a failed
// test's output: a refusal the test did not expect is often explained
// there (a bindings lookup that failed, a set write refused).
func (f *fence) logDaemonErrors() {
	for _, name := range []string{daemonErrFile, gateErrFile} {
		raw, err := os.ReadFile(filepath.Join(f.dir, name))
		if err != nil || len(raw) == 0 {
			continue
		}
		f.t.Logf("%s (last 4 KiB):\n%s", name, raw[max(0, len(raw)-4096):])
	}
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
	var wrap []string
	if uid >= 0 {
		wrap = []string{"setpriv", "--reuid", itoa(uid), "--regid", itoa(uid), "--clear-groups", "--inh-caps=-all", "--"}
	}
	return f.probeWrapped(wrap, args...)
}

func itoa(i int) string { return strconv.Itoa(i) }

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
	// apply pre-resolved api.test; every later lookup within the TTL is
	// answered from the filter's cache.
	nA := 0
	for _, q := range f.w.DNS.QueriesFor("api.test") {
		if q.Type == "A" {
			nA++
		}
	}
	if nA != 1 {
		t.Errorf("the world saw %d A queries for api.test, want 1 (then cached)", nA)
	}
	if h := f.status().Daemon.Health; h == nil || h.CacheHits == 0 {
		t.Errorf("no cache hits: %+v", h)
	}
}

// status reads ReadStatus from inside the client.
func (f *fence) status() Status {
	f.t.Helper()
	out, ok := f.probe("status", filepath.Join(f.dir, "config.json"))
	if !ok {
		f.t.Fatalf("status: %s", out)
	}
	var st Status
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		f.t.Fatalf("status: %v\n%s", err, out)
	}
	return st
}

// clientRun runs a command in the client namespace and returns its output.
func (f *fence) clientRun(argv ...string) (string, error) {
	out, err := f.w.Command(context.Background(), argv...).CombinedOutput()
	return string(out), err
}

func (f *fence) logEvents() []Event {
	evs, err := ReadLog(f.cfg.LogFile)
	if err != nil {
		f.t.Fatal(err)
	}
	return evs
}

func countEvents(evs []Event, match func(Event) bool) int {
	n := 0
	for _, e := range evs {
		if match(e) {
			n++
		}
	}
	return n
}

func TestFence_DeniedNameRefused(t *testing.T) {
	f := newFence(t, Config{Allow: []Destination{allowName("api.test")}})
	if rc, _ := f.lookup("other.test", "A"); rc != "REFUSED" {
		t.Errorf("other.test: %s, want REFUSED", rc)
	}
	if q := f.w.DNS.QueriesFor("other.test"); len(q) != 0 {
		t.Errorf("the world's DNS server received %v", q)
	}
	if _, ok := f.probe("connect", "other.test:443"); ok {
		t.Error("connect other.test:443 succeeded")
	}
}

func TestFence_RawIPNotInPolicyRejected(t *testing.T) {
	f := newFence(t, Config{Allow: []Destination{allowName("api.test")}})
	f.mustBlock(ap(hostOther, 80))
	f.mustBlock(ap(hostWild, 443))
	if out, ok := f.probe("udp", ap(hostOther, 5000).String()); ok {
		t.Errorf("udp to a raw IP got through: %s", out)
	}
}

func TestFence_OtherPortOfAllowedHostRejected(t *testing.T) {
	f := newFence(t, Config{Allow: []Destination{{Name: "api.test", Port: 443}}})
	if rc, ans := f.lookup("api.test", "A"); rc != "NOERROR" || len(ans) != 1 {
		t.Fatalf("api.test: %s %v", rc, ans)
	}
	f.mustConnect(ap(hostAPI, 443))
	f.mustBlock(ap(hostAPI, 80))
	f.mustBlock(ap(hostAPI, 8080))
	if _, ok := f.probe("udp", ap(hostAPI, 443).String()); !ok {
		t.Error("udp api.test:443 blocked, want allowed (ports cover TCP and UDP)")
	}
	if _, ok := f.probe("udp", ap(hostAPI, 5000).String()); ok {
		t.Error("udp api.test:5000 allowed")
	}
}

func TestFence_WildcardMatchesSubdomainsOnly(t *testing.T) {
	f := newFence(t, Config{Allow: []Destination{{Name: "wild.test", Wildcard: true}}})
	if rc, ans := f.lookup("x.wild.test", "A"); rc != "NOERROR" || len(ans) != 1 || ans[0] != hostWild.String() {
		t.Fatalf("x.wild.test: %s %v", rc, ans)
	}
	f.mustConnect(ap(hostWild, 80))
	for _, name := range []string{"wild.test", "alias.test", "xwild.test"} {
		if rc, _ := f.lookup(name, "A"); rc != "REFUSED" {
			t.Errorf("%s: %s, want REFUSED", name, rc)
		}
		if q := f.w.DNS.QueriesFor(name); len(q) != 0 {
			t.Errorf("%s reached the world: %v", name, q)
		}
	}
}

func TestFence_DenyBeatsAllow(t *testing.T) {
	f := newFence(t, Config{
		Allow: []Destination{{Name: "wild.test", Wildcard: true}, {Prefix: netip.MustParsePrefix("10.77.0.0/24")}},
		Deny:  []Destination{{Name: "evil.wild.test"}, {Prefix: netip.PrefixFrom(hostOther, 32)}},
	})
	if rc, _ := f.lookup("evil.wild.test", "A"); rc != "REFUSED" {
		t.Errorf("evil.wild.test: %s, want REFUSED", rc)
	}
	if q := f.w.DNS.QueriesFor("evil.wild.test"); len(q) != 0 {
		t.Errorf("denied name reached the world: %v", q)
	}
	f.mustConnect(ap(hostWild, 80)) // inside the allowed /24
	f.mustBlock(ap(hostOther, 80))  // denied /32 inside the allowed /24
	waitFor(t, "the denied connection in the log", func() bool {
		return countEvents(f.logEvents(), func(e Event) bool {
			return e.Reason == "denied" && e.Dst == hostOther.String() && e.Port == 80 && e.Proto == "tcp"
		}) == 1
	})
}

// TestFence_DenyNameWithPort: a deny entry with a port for a name that a
// wildcard allows keeps the name resolvable and every other port open, and
// closes that port (TCP and UDP, both families) for the addresses the
// filter learns.
func TestFence_DenyNameWithPort(t *testing.T) {
	f := newFence(t, Config{
		Allow: []Destination{{Name: "test", Wildcard: true}},
		Deny:  []Destination{{Name: "api.test", Port: 443}},
	})
	if rc, ans := f.lookup("api.test", "A"); rc != "NOERROR" || len(ans) != 1 || ans[0] != hostAPI.String() {
		t.Fatalf("api.test A = %s %v, want %s", rc, ans, hostAPI)
	}
	if rc, ans := f.lookup("api.test", "AAAA"); rc != "NOERROR" || len(ans) != 1 || ans[0] != hostAPI6.String() {
		t.Fatalf("api.test AAAA = %s %v, want %s", rc, ans, hostAPI6)
	}
	if rc, _ := f.lookup("other.test", "A"); rc != "NOERROR" {
		t.Fatalf("other.test A = %s", rc)
	}
	f.mustBlock(ap(hostAPI, 443))
	f.mustBlock(ap(hostAPI6, 443))
	f.mustConnect(ap(hostAPI, 80))
	f.mustConnect(ap(hostAPI6, 8080))
	f.mustConnect(ap(hostOther, 443)) // another allowed name keeps port 443
	if out, ok := f.probe("udp", ap(hostAPI, 443).String()); ok {
		t.Errorf("udp api.test:443 got through: %s", out)
	}
	if out, ok := f.probe("udp", ap(hostAPI, 5000).String()); !ok {
		t.Errorf("udp api.test:5000 blocked, want allowed: %s", out)
	}
	// A second lookup is a cache hit; the port stays closed.
	if rc, _ := f.lookup("api.test", "A"); rc != "NOERROR" {
		t.Fatalf("api.test A again = %s", rc)
	}
	f.mustBlock(ap(hostAPI, 443))
	waitFor(t, "the denied connection in the log", func() bool {
		return countEvents(f.logEvents(), func(e Event) bool {
			return e.Reason == "denied" && e.Dst == hostAPI.String() && e.Port == 443 && e.Proto == "tcp" && e.Name == "api.test"
		}) >= 1
	})
}

// TestFence_LogFilesBounded: the daemon keeps the JSON log under
// LogMaxBytes plus one rotated copy, both handed to its user by StartDNS,
// and the rotated copy of dns.err exists for it too.
func TestFence_LogFilesBounded(t *testing.T) {
	const bound = 1024
	f := newFence(t, Config{Allow: []Destination{allowName("api.test")}, LogMaxBytes: bound})
	const n = 30 // about 100 bytes per refused query: three rotations
	for i := range n {
		if rc, _ := f.lookup(fmt.Sprintf("q%d.other.test", i), "A"); rc != "REFUSED" {
			t.Fatalf("q%d.other.test: %s", i, rc)
		}
	}
	for _, p := range []string{f.cfg.LogFile, f.cfg.LogFile + ".1", filepath.Join(f.dir, "dns.err.1")} {
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if st.Size() > bound {
			t.Errorf("%s is %d bytes, bound %d", p, st.Size(), bound)
		}
		if uid := st.Sys().(*syscall.Stat_t).Uid; uid != 998 {
			t.Errorf("%s owned by uid %d, want the daemon's 998", p, uid)
		}
	}
	evs := f.logEvents()
	if len(evs) == 0 || len(evs) >= n {
		t.Fatalf("log holds %d events, want the newest few of %d", len(evs), n)
	}
	if last := evs[len(evs)-1]; last.Name != fmt.Sprintf("q%d.other.test", n-1) || last.Reason != "dns-not-allowed" {
		t.Errorf("newest event %+v, want q%d.other.test dns-not-allowed", last, n-1)
	}
}

func TestFence_EmptyAllowListNothingLeaves(t *testing.T) {
	f := newFence(t, Config{})
	for _, name := range []string{"api.test", "other.test"} {
		if rc, _ := f.lookup(name, "A"); rc != "REFUSED" {
			t.Errorf("%s: %s, want REFUSED", name, rc)
		}
	}
	for _, a := range append(append([]netip.Addr(nil), testworld.HostsV4...), testworld.HostsV6...) {
		f.probe("tcp", ap(a, 443).String())
		f.probe("udp", ap(a, 5000).String())
	}
	if c := f.w.Rec.Conns(); len(c) != 0 {
		t.Errorf("the world saw %v", c)
	}
	if q := f.w.DNS.Queries(); len(q) != 0 {
		t.Errorf("the world's DNS saw %v", q)
	}
}

func TestFence_CDNRotationNewAddressAfterLookup(t *testing.T) {
	f := newFence(t, Config{Allow: []Destination{allowName("cdn.test")}})
	if rc, ans := f.lookup("cdn.test", "A"); rc != "NOERROR" || len(ans) != 1 || ans[0] != hostAPI.String() {
		t.Fatalf("cdn.test: %s %v", rc, ans)
	}
	f.mustConnect(ap(hostAPI, 443))
	f.w.DNS.Set("cdn.test", dns.TypeA, 1, hostWild.String())
	f.mustBlock(ap(hostWild, 443)) // not looked up yet
	// The old answer may be served from the filter's cache until its
	// 1 s TTL runs out; then the lookup must return the new address.
	waitFor(t, "cdn.test to resolve to the new address", func() bool {
		rc, ans := f.lookup("cdn.test", "A")
		return rc == "NOERROR" && len(ans) == 1 && ans[0] == hostWild.String()
	})
	f.mustConnect(ap(hostWild, 443))
}

func TestFence_DNSToAnotherResolverGoesToTheFilter(t *testing.T) {
	f := newFence(t, Config{Allow: []Destination{allowName("api.test")}})
	before := len(f.w.DNS.Queries())
	for _, server := range []string{"10.77.0.2:53", "10.77.0.3:53", "[fd77::2]:53", "[fd77::4]:53"} {
		if rc, _ := f.lookupVia(server, "other.test", "A", "udp"); rc != "REFUSED" {
			t.Errorf("other.test via %s: %s, want REFUSED from the filter", server, rc)
		}
		// Nothing listens on 10.77.0.3 / fd77::4 port 53: an answer proves
		// the query was redirected to the filter.
		if rc, ans := f.lookupVia(server, "api.test", "A", "udp"); rc != "NOERROR" || len(ans) != 1 {
			t.Errorf("api.test via %s: %s %v", server, rc, ans)
		}
	}
	for _, q := range f.w.DNS.Queries()[before:] {
		if q.Name != "api.test" || q.From.Addr() != testworld.ClientV4 {
			t.Errorf("unexpected query at the world: %+v", q)
		}
	}
}

func TestFence_DNSOverTCPFiltered(t *testing.T) {
	// x.wild.test is not pre-resolved by apply, so nothing is cached.
	f := newFence(t, Config{Allow: []Destination{{Name: "wild.test", Wildcard: true}}})
	if rc, _ := f.lookupVia("10.77.0.2:53", "other.test", "A", "tcp"); rc != "REFUSED" {
		t.Errorf("other.test over TCP: %s", rc)
	}
	if rc, ans := f.lookupVia("10.77.0.2:53", "x.wild.test", "A", "tcp"); rc != "NOERROR" || len(ans) != 1 {
		t.Errorf("x.wild.test over TCP: %s %v", rc, ans)
	}
	tcp := 0
	for _, q := range f.w.DNS.Queries() {
		if q.Name == "other.test" {
			t.Errorf("other.test reached the world: %+v", q)
		}
		if q.Net == "tcp" && q.Name == "x.wild.test" {
			tcp++
		}
	}
	if tcp == 0 {
		t.Error("the allowed TCP query was not forwarded over TCP")
	}
}

func TestFence_DNSReusingTheFiltersConntrackEntryBlocked(t *testing.T) {
	f := newFence(t, Config{Allow: []Destination{allowName("api.test")}})
	before := len(f.w.DNS.QueriesFor("api.test"))
	out, ok := f.probe("reuse", testworld.DNSAddr.String())
	if ok {
		t.Errorf("an unmarked query reusing a marked flow got an answer: %s", out)
	}
	if n := len(f.w.DNS.QueriesFor("api.test")) - before; n != 1 {
		t.Errorf("the marked setup query reached the world %d times, want 1", n)
	}
	for _, q := range f.w.DNS.Queries() {
		if strings.Contains(q.Name, "exfil") {
			t.Errorf("the unmarked query reached the world: %+v", q)
		}
	}
}

func TestFence_TXTTunnelNeverReachesWorld(t *testing.T) {
	f := newFence(t, Config{Allow: []Destination{allowName("api.test")}})
	for _, name := range []string{"c2VjcmV0LWRhdGE.exfil.test", "bWFpbA.exfil.test"} {
		for _, network := range []string{"udp", "tcp"} {
			if rc, _ := f.lookupVia(testworld.DNSAddr.String(), name, "TXT", network); rc != "REFUSED" {
				t.Errorf("%s TXT over %s: %s", name, network, rc)
			}
		}
	}
	for _, q := range f.w.DNS.Queries() {
		if strings.Contains(q.Name, "exfil") {
			t.Errorf("tunnel query reached the world: %+v", q)
		}
	}
	// The allowed name's TXT is answered: the filter is not a type filter.
	if rc, ans := f.lookup("api.test", "TXT"); rc != "NOERROR" || len(ans) != 1 {
		t.Errorf("api.test TXT: %s %v", rc, ans)
	}
}

func TestFence_IPv6(t *testing.T) {
	f := newFence(t, Config{Allow: []Destination{allowName("api.test")}})
	if rc, ans := f.lookup("api.test", "AAAA"); rc != "NOERROR" || len(ans) != 1 || ans[0] != hostAPI6.String() {
		t.Fatalf("api.test AAAA: %s %v", rc, ans)
	}
	f.mustConnect(ap(hostAPI6, 443))
	f.mustBlock(ap(testworld.HostsV6[2], 443))
	f.mustBlock(ap(testworld.HostsV6[3], 80))
	if _, ok := f.probe("udp", ap(testworld.HostsV6[2], 5000).String()); ok {
		t.Error("udp over IPv6 to a raw address got through")
	}
}

func TestFence_ICMPBlocked(t *testing.T) {
	f := newWorld(t, Config{Allow: []Destination{allowName("api.test")}})
	if out, ok := f.probe("icmp", hostAPI.String()); !ok {
		t.Fatalf("ping before the fence failed, the test cannot tell: %s", out)
	}
	f.mustApply()
	if out, ok := f.probe("icmp", hostAPI.String()); ok {
		t.Errorf("ping to an allowed host got through: %s", out)
	}
}

func TestFence_UDPToAllowedIPOtherPortBlocked(t *testing.T) {
	f := newFence(t, Config{Allow: []Destination{{Prefix: netip.PrefixFrom(hostAPI, 32), Port: 443}}})
	if _, ok := f.probe("udp", ap(hostAPI, 443).String()); !ok {
		t.Error("udp to the allowed ip:port blocked")
	}
	if _, ok := f.probe("udp", ap(hostAPI, 5000).String()); ok {
		t.Error("udp to the allowed ip, other port, got through")
	}
	f.mustConnect(ap(hostAPI, 443))
	f.mustBlock(ap(hostAPI, 80))
	if n := f.w.Rec.Seen(hostAPI, 5000); n != 0 {
		t.Errorf("world saw %d datagrams on port 5000", n)
	}
}

func TestFence_AnswerToMetadataOrLoopbackDropped(t *testing.T) {
	f := newFence(t, Config{Allow: []Destination{allowName("meta.test"), allowName("loop.test")}})
	rc, ans := f.lookup("meta.test", "A")
	if rc != "NOERROR" || len(ans) != 1 || ans[0] != hostAPI.String() {
		t.Errorf("meta.test: %s %v, want only %s", rc, ans, hostAPI)
	}
	for _, qt := range []string{"A", "AAAA"} {
		if rc, ans := f.lookup("loop.test", qt); len(ans) != 0 {
			t.Errorf("loop.test %s: %s %v, want no address", qt, rc, ans)
		}
	}
	out, _ := f.clientRun("ipset", "list", SetName(SetNamed, IPv4))
	if strings.Contains(out, "169.254.169.254") || strings.Contains(out, "127.0.0.1") {
		t.Errorf("dropped address in the set:\n%s", out)
	}
	evs := f.logEvents()
	for _, want := range []struct{ reason, dst string }{{"answer-metadata", "169.254.169.254"}, {"answer-loopback", "127.0.0.1"}, {"answer-loopback", "::1"}} {
		if countEvents(evs, func(e Event) bool { return e.Reason == want.reason && e.Dst == want.dst }) == 0 {
			t.Errorf("no %s event for %s in %v", want.reason, want.dst, evs)
		}
	}
}

func TestFence_UnprivilegedUserCannotChangeFence(t *testing.T) {
	devboxtest.RequireBinary(t, "setpriv")
	devboxtest.RequireBinary(t, "ipset")
	f := newFence(t, Config{Allow: []Destination{allowName("api.test")}})
	attempts := [][]string{
		{"iptables", "-F", ChainOutput},
		{"iptables", "-P", "OUTPUT", "ACCEPT"},
		{"ip6tables", "-I", ChainOutput, "-j", "ACCEPT"},
		{"iptables", "-t", "nat", "-F", ChainDNS},
		{"ipset", "flush", SetName(SetDeny, IPv4)},
		{"ipset", "add", SetName(SetAllow, IPv4), hostOther.String()},
		{"ipset", "destroy", SetName(SetAllowPort, IPv4)},
	}
	for _, a := range attempts {
		argv := append([]string{"setpriv", "--reuid", "1000", "--regid", "1000", "--clear-groups", "--inh-caps=-all", "--"}, a...)
		if out, err := f.clientRun(argv...); err == nil {
			t.Errorf("uid 1000 ran %v: %s", a, out)
		}
	}
	if out, ok := f.probeAs(1000, "setadd", hostOther.String()+"/32"); ok {
		t.Errorf("uid 1000 added to a set through netlink: %s", out)
	}
	if out, ok := f.probeAs(1000, "mark"); ok {
		t.Errorf("uid 1000 set SO_MARK: %s", out)
	}
	// The fence is unchanged.
	f.mustBlock(ap(hostOther, 80))
	if rc, _ := f.lookup("other.test", "A"); rc != "REFUSED" {
		t.Errorf("other.test: %s", rc)
	}
	st := f.status()
	for _, fs := range st.Families {
		if !fs.Loaded || fs.Policy != "DROP" {
			t.Errorf("%s: loaded=%v policy=%s", fs.Family, fs.Loaded, fs.Policy)
		}
	}
}

func TestFence_FaultUpstreamDownAtStart(t *testing.T) {
	f := newWorld(t, Config{Allow: []Destination{allowName("api.test")}})
	f.w.DNS.SetDown(true)
	f.mustApply()
	if len(f.apply.Warnings) != 1 || !strings.Contains(f.apply.Warnings[0], "api.test does not resolve") {
		t.Errorf("warnings = %q, want one naming api.test", f.apply.Warnings)
	}
	if rc, _ := f.lookup("api.test", "A"); rc != "SERVFAIL" {
		t.Errorf("api.test with the upstream down: %s, want SERVFAIL", rc)
	}
	f.mustBlock(ap(hostAPI, 443))
	st := f.status()
	if st.Daemon.Health == nil || st.Daemon.Health.UpstreamErrors == 0 {
		t.Errorf("status does not count upstream errors: %+v", st.Daemon)
	}
	f.w.DNS.SetDown(false)
	if rc, ans := f.lookup("api.test", "A"); rc != "NOERROR" || len(ans) != 1 {
		t.Fatalf("api.test after the upstream came back: %s %v", rc, ans)
	}
	f.mustConnect(ap(hostAPI, 443))
}

func TestFence_FaultBadRuleLeavesDenyAll(t *testing.T) {
	f := newFence(t, Config{Allow: []Destination{allowName("api.test"), {Prefix: netip.PrefixFrom(hostWild, 32)}}})
	f.mustConnect(ap(hostWild, 80))
	err := f.applyErr("DEVBOX_FW_BADRULE=1")
	if err == nil {
		t.Fatal("apply with a bad rule succeeded")
	}
	for _, want := range []string{"load ipv4 rules", "iptables-restore", "denying all egress"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	f.mustBlock(ap(hostWild, 443))
	f.mustBlock(ap(hostAPI, 443))
	before := len(f.w.DNS.Queries())
	f.lookup("api.test", "A")
	f.lookupVia("10.77.0.2:53", "api.test", "A", "tcp")
	if n := len(f.w.DNS.Queries()) - before; n != 0 {
		t.Errorf("%d DNS queries left in deny-all", n)
	}
	st := f.status()
	for _, fs := range st.Families {
		if fs.Policy != "DROP" {
			t.Errorf("%s OUTPUT policy %s", fs.Family, fs.Policy)
		}
	}
	// A good apply recovers.
	f.mustApply()
	f.mustConnect(ap(hostWild, 443))
}

func TestFence_FaultDaemonKilled(t *testing.T) {
	f := newFence(t, Config{Allow: []Destination{allowName("api.test"), allowName("cdn.test")}})
	killAndWait(t, "the daemon", f.cfg, DaemonPID)
	before := len(f.w.DNS.Queries())
	if rc, ans := f.lookup("api.test", "A"); rc != "ERROR" {
		t.Errorf("api.test with the daemon dead: %s %v", rc, ans)
	}
	if n := len(f.w.DNS.Queries()) - before; n != 0 {
		t.Errorf("%d queries reached the world with the daemon dead", n)
	}
	f.mustBlock(ap(hostOther, 443))
	st := f.status()
	if st.Daemon.Running || !strings.Contains(st.Daemon.Error, "DNS filter not running") {
		t.Errorf("status daemon = %+v", st.Daemon)
	}
	out, ok := f.probe("verify", filepath.Join(f.dir, "config.json"), "-", ap(hostOther, 443).String(), "evil.test")
	if ok || !strings.Contains(out, "DNS filter not answering") {
		t.Errorf("verify with the daemon dead: ok=%v %s", ok, out)
	}
}

func TestFence_ApplyTwiceSameState(t *testing.T) {
	f := newFence(t, Config{Allow: []Destination{allowName("api.test"), {Prefix: netip.MustParsePrefix("10.77.0.4/32")}, {Prefix: netip.MustParsePrefix("fd77::4/128"), Port: 80}}})
	save := func() string {
		var b strings.Builder
		for _, c := range [][]string{{"iptables-save"}, {"ip6tables-save"}} {
			out, err := f.clientRun(c...)
			if err != nil {
				t.Fatal(err)
			}
			for _, l := range strings.Split(out, "\n") {
				if !strings.HasPrefix(l, "#") { // timestamps
					b.WriteString(l + "\n")
				}
			}
		}
		out, _ := f.clientRun("ipset", "list", "-n")
		return b.String() + out
	}
	first := save()
	f.mustApply()
	second := save()
	if first != second {
		t.Errorf("second apply changed the state:\n--- first\n%s\n--- second\n%s", first, second)
	}
	if n := strings.Count(second, "-A OUTPUT -j "+ChainOutput); n != 2 { // one per family
		t.Errorf("%d OUTPUT jumps, want 2", n)
	}
	if f.apply.Static != 3 { // one /32 + tcp and udp entries for [fd77::4]:80
		t.Errorf("static entries = %d, want 3", f.apply.Static)
	}
	f.mustConnect(ap(hostWild, 443))
	f.mustConnect(ap(testworld.HostsV6[3], 80))
	f.mustBlock(ap(testworld.HostsV6[3], 443))
	// A changed policy converges too.
	f.cfg.Allow = []Destination{allowName("other.test")}
	f.mustApply()
	f.mustBlock(ap(hostWild, 8080))
	if rc, ans := f.lookup("other.test", "A"); rc != "NOERROR" || len(ans) != 1 {
		t.Fatalf("other.test after the policy change: %s %v", rc, ans)
	}
	f.mustConnect(ap(hostOther, 443))
}

func TestFence_LogAndStatusMatchWhatHappened(t *testing.T) {
	f := newFence(t, Config{Allow: []Destination{{Name: "api.test", Port: 443}}})
	if rc, _ := f.lookup("api.test", "A"); rc != "NOERROR" {
		t.Fatal(rc)
	}
	for i := 0; i < 3; i++ {
		f.probe("tcp", ap(hostOther, 8080).String())
	}
	f.probe("tcp", ap(hostAPI, 8080).String())
	f.lookup("evil.test", "A")
	f.lookup("c2VjcmV0.exfil.test", "TXT")
	waitFor(t, "4 blocked packets in the log", func() bool {
		return countEvents(f.logEvents(), func(e Event) bool { return e.Reason == "not-allowed" }) == 4
	})
	evs := f.logEvents()
	checks := []struct {
		what string
		n    int
		ok   func(Event) bool
	}{
		{"tcp to other:8080", 3, func(e Event) bool {
			return e.Reason == "not-allowed" && e.Proto == "tcp" && e.Dst == hostOther.String() && e.Port == 8080 && e.Name == ""
		}},
		{"tcp to api.test:8080 named", 1, func(e Event) bool {
			return e.Reason == "not-allowed" && e.Dst == hostAPI.String() && e.Port == 8080 && e.Name == "api.test"
		}},
		{"refused evil.test", 1, func(e Event) bool { return e.Reason == "dns-not-allowed" && e.Name == "evil.test" && e.QType == "A" }},
		{"refused TXT tunnel", 1, func(e Event) bool { return e.Reason == "dns-not-allowed" && e.QType == "TXT" }},
	}
	for _, c := range checks {
		if got := countEvents(evs, c.ok); got != c.n {
			t.Errorf("%s: %d log lines, want %d\n%v", c.what, got, c.n, evs)
		}
	}
	if len(evs) != 6 {
		t.Errorf("%d log lines, want 6: %v", len(evs), evs)
	}
	st := f.status()
	var v4 FamilyStatus
	for _, fs := range st.Families {
		if fs.Family == "ipv4" {
			v4 = fs
		}
	}
	last := v4.Rules[len(v4.Rules)-1]
	if last.Rule != "-j "+ChainBlocked || last.Packets != 4 {
		t.Errorf("last ipv4 rule %+v, want -j %s with 4 packets", last, ChainBlocked)
	}
	if st.Sets[SetName(SetNamedPort, IPv4)] != 2 || st.Sets[SetName(SetNamedPort, IPv6)] != 2 { // tcp+udp :443
		t.Errorf("set sizes %v", st.Sets)
	}
	if h := st.Daemon.Health; h == nil || h.Refused != 2 || h.Blocked != 4 {
		t.Errorf("daemon health %+v, want 2 refused and 4 blocked", st.Daemon.Health)
	}
}

func TestVerify(t *testing.T) {
	f := newFence(t, Config{Allow: []Destination{allowName("api.test")}})
	cfgPath := filepath.Join(f.dir, "config.json")
	out, ok := f.probe("verify", cfgPath, "api.test:443,"+ap(hostAPI, 80).String(), "other.test:443,"+ap(hostOther, 80).String()+",[fd77::3]:443", "evil.test,x.exfil.test")
	if !ok {
		t.Fatalf("verify of a good fence failed: %s", out)
	}
	var checks []Check
	if err := json.Unmarshal([]byte(out), &checks); err != nil || len(checks) != 8 {
		t.Fatalf("verify printed %d checks (%v): %s", len(checks), err, out)
	}
	// Verify must notice a fence that lets a "denied" target through.
	if out, ok := f.probe("verify", cfgPath, "-", "api.test:443", "-"); ok || !strings.Contains(out, "CONNECTED") {
		t.Errorf("verify did not catch an open target: %s", out)
	}
	if out, ok := f.probe("verify", cfgPath, ap(hostOther, 80).String(), "-", "api.test"); ok {
		t.Errorf("verify did not catch a blocked allowed target and an answered name: %s", out)
	}
}
