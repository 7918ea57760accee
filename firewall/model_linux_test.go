//go:build linux

package firewall

import (
	"net/netip"
	"testing"

	"github.com/devbox-dev/devbox/internal/layout"
)

// TestFence_ProtectedHostEveryForm is a team image's resolved fence where
// the repository dropped the baseline's credential route for api.test but
// kept the host on other ports (8080, 80), through another allowed name
// sharing its address (cdn.test), and through a static entry for its
// address: the baseline's protection is carried (Protect), so the agent's
// uid is refused on every form while the gateway's uid passes. Each probe
// also checks that the model (Model.Decide, which internal/baseline decides
// containment with) agrees with the kernel.
func TestFence_ProtectedHostEveryForm(t *testing.T) {
	cfg := Config{
		Gate: true,
		Allow: []Destination{
			{Name: "api.test", Port: 8080}, {Name: "api.test", Port: 80},
			{Name: "cdn.test"}, {Prefix: netip.PrefixFrom(hostAPI, 32), Port: 443},
			{Name: "other.test"},
		},
		Protect: []string{"api.test"},
	}
	f := newFence(t, cfg)
	// What the world's DNS answers for the names the fence resolves (the
	// entrypoint's warm-up resolved each allowed name, as here).
	m, err := NewModel(f.cfg, Answers{"api.test": {hostAPI, hostAPI6}, "cdn.test": {hostAPI}, "other.test": {hostOther}})
	if err != nil {
		t.Fatal(err)
	}
	type probe struct {
		dst  netip.AddrPort
		name string
	}
	every := []probe{
		{ap(hostAPI, 8080), "api.test"}, // another port
		{ap(hostAPI, 80), "api.test"},   // port 80
		{ap(hostAPI, 443), "cdn.test"},  // another name sharing the address
		{ap(hostAPI, 8080), "cdn.test"},
		{ap(hostAPI, 443), "static.test"}, // the static entry: direct path
	}
	for _, uid := range []int{1000, layout.GatewayUID} {
		for _, p := range every {
			want := uid == layout.GatewayUID
			f.checkModel(m, uid, p.dst, p.name, want)
		}
		// Controls: another allowed name stays open to the agent; a name
		// sent to an address it never resolved to stays refused.
		f.checkModel(m, uid, ap(hostOther, 443), "other.test", true)
		f.checkModel(m, uid, ap(hostOther, 80), "api.test", false)
	}
}

// checkModel sends an HTTP request to dst with Host name as uid, and fails
// unless the kernel and the model both decide want.
func (f *fence) checkModel(m *Model, uid int, dst netip.AddrPort, name string, want bool) {
	f.t.Helper()
	out, ok := f.probeAs(uid, "http", dst.String(), name)
	d := m.Decide(Packet{UID: uid, Proto: "tcp", Dst: dst, Name: name})
	if ok != want || d.Out != want {
		f.t.Errorf("uid %d → %s (Host %s): kernel passed=%v (%s), model %+v; want passed=%v", uid, dst, name, ok, out, d, want)
	}
}

// TestModelAgreesWithKernel: a fence with name, wildcard, port-bound,
// static and deny entries, probed over TCP (with a Host the gate reads)
// and UDP as the agent's uid, the gateway's and root: for each probe the
// kernel's outcome is the model's.
func TestModelAgreesWithKernel(t *testing.T) {
	cfg := Config{
		Gate: true,
		Allow: []Destination{
			{Name: "api.test", Port: 443}, {Name: "wild.test", Wildcard: true}, {Name: "cdn.test", Port: 8080},
			{Prefix: netip.PrefixFrom(hostOther, 32), Port: 80}, {Prefix: netip.PrefixFrom(hostWild, 32), Port: 5000},
		},
		Deny:    []Destination{{Name: "evil.wild.test"}, {Prefix: netip.PrefixFrom(hostAPI, 32), Port: 8080}},
		Protect: []string{"api.test"},
	}
	f := newFence(t, cfg)
	// The wildcard's names are resolved on demand, as a client would.
	for _, n := range []string{"x.wild.test", "evil.wild.test"} {
		f.lookup(n, "A")
	}
	m, err := NewModel(f.cfg, Answers{"api.test": {hostAPI, hostAPI6}, "cdn.test": {hostAPI}, "x.wild.test": {hostWild}, "evil.wild.test": {hostOther}})
	if err != nil {
		t.Fatal(err)
	}
	n, passed := 0, 0
	for _, uid := range []int{1000, layout.GatewayUID, 0} {
		for _, a := range []netip.Addr{hostAPI, hostWild, hostOther} {
			for _, port := range []uint16{80, 443, 8080} {
				for _, name := range []string{"api.test", "x.wild.test", "cdn.test", "evil.wild.test"} {
					dst := ap(a, port)
					out, ok := f.probeAs(uid, "http", dst.String(), name)
					if ok {
						passed++
					}
					if d := m.Decide(Packet{UID: uid, Proto: "tcp", Dst: dst, Name: name}); d.Out != ok {
						t.Errorf("uid %d tcp %s Host %s: kernel passed=%v (%s), model %+v", uid, dst, name, ok, out, d)
					}
					n++
				}
			}
			for _, port := range []uint16{443, 5000} {
				dst := ap(a, port)
				out, ok := f.probeAs(uid, "udp", dst.String())
				if ok {
					passed++
				}
				if d := m.Decide(Packet{UID: uid, Proto: "udp", Dst: dst}); d.Out != ok {
					t.Errorf("uid %d udp %s: kernel passed=%v (%s), model %+v", uid, dst, ok, out, d)
				}
				n++
			}
		}
	}
	t.Logf("%d probes (%d passed), kernel and model agree", n, passed)
	if passed < 10 || n-passed < 10 {
		t.Errorf("%d of %d probes passed: too one-sided to show agreement", passed, n)
	}
}
