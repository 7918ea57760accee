package baseline

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/devbox-dev/devbox/firewall"
	"github.com/devbox-dev/devbox/firewall/fwpolicy"
	"github.com/devbox-dev/devbox/internal/policy"
)

// The fuzzer builds baseline and repository policies from these pieces:
// names and wildcards that nest (corp.test ⊃ a.corp.test ⊃ x.a.corp.test),
// prefixes that nest and overlap in both families, and a few ports.
var (
	fuzzHosts  = []string{"corp.test", "a.corp.test", "b.corp.test", "x.a.corp.test", "other.test", "registry.npmjs.org"}
	fuzzWilds  = []string{"*.corp.test", "*.a.corp.test", "*.b.corp.test", "*.other.test"}
	fuzzCIDRs  = []string{"10.0.0.0/8", "10.1.0.0/16", "10.1.2.0/24", "10.1.2.3", "10.2.0.0/16", "192.0.2.0/24", "192.0.2.7", "fd00::/8", "fd00:1::/32", "fd00:1::5"}
	fuzzPorts  = []uint16{0, 22, 443, 8443}
	fuzzPreset = []string{"npm", "go"}

	// Probes: every name, address and port the property is checked on.
	probeNames = []string{"corp.test", "a.corp.test", "b.corp.test", "x.a.corp.test", "y.a.corp.test", "z.b.corp.test",
		"q.corp.test", "other.test", "w.other.test", "registry.npmjs.org", "proxy.golang.org", "evil.test"}
	probeAddrs = []netip.Addr{netip.MustParseAddr("10.1.2.3"), netip.MustParseAddr("10.1.2.9"), netip.MustParseAddr("10.1.7.1"),
		netip.MustParseAddr("10.2.0.1"), netip.MustParseAddr("10.9.9.9"), netip.MustParseAddr("192.0.2.7"),
		netip.MustParseAddr("192.0.2.8"), netip.MustParseAddr("198.51.100.1"), netip.MustParseAddr("fd00:1::5"),
		netip.MustParseAddr("fd00:1::6"), netip.MustParseAddr("fd00:2::1"), netip.MustParseAddr("2001:db8::1")}
	probePorts = []uint16{22, 53, 80, 443, 8443}
)

// bytesReader hands out small choices from the fuzzer's bytes, then zeros.
type bytesReader struct{ b []byte }

func (r *bytesReader) next(n int) int {
	if len(r.b) == 0 {
		return 0
	}
	v := int(r.b[0]) % n
	r.b = r.b[1:]
	return v
}

func (r *bytesReader) dest() string {
	var host string
	switch r.next(3) {
	case 0:
		host = fuzzHosts[r.next(len(fuzzHosts))]
	case 1:
		host = fuzzWilds[r.next(len(fuzzWilds))]
	default:
		host = fuzzCIDRs[r.next(len(fuzzCIDRs))]
	}
	port := fuzzPorts[r.next(len(fuzzPorts))]
	if port == 0 {
		return host
	}
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	return fmt.Sprintf("%s:%d", host, port)
}

func (r *bytesReader) list(max int) []string {
	n := r.next(max + 1)
	out := make([]string, 0, n)
	for range n {
		out = append(out, r.dest())
	}
	return out
}

func (r *bytesReader) policy() string {
	var presets []string
	for _, p := range fuzzPreset {
		if r.next(4) == 0 {
			presets = append(presets, fmt.Sprintf("%q", p))
		}
	}
	q := func(l []string) string {
		for i := range l {
			l[i] = fmt.Sprintf("%q", l[i])
		}
		return strings.Join(l, ", ")
	}
	allow, deny := r.list(6), r.list(3)
	// A credential route to one of the hosts (the policy must allow it on
	// 443, or it does not validate).
	creds := ""
	if h := r.next(len(fuzzHosts) + 2); h < len(fuzzHosts) {
		allow = append(allow, fuzzHosts[h]+":443")
		creds = fmt.Sprintf(`, "credentials": {"http": [{"host": %q, "header": "X-Key", "value": "${secret}", "secret": "k"}]}`, fuzzHosts[h])
	}
	return fmt.Sprintf(`{"network": {"presets": [%s], "allow": [%s], "deny": [%s]}%s}`,
		strings.Join(presets, ", "), q(allow), q(deny), creds)
}

// fuzzWorld is the DNS the fuzzer probes in: each probe name answers an
// address of its own, and the hosts a route may name also answer one
// shared address inside the ranges (10.1.2.3), so a credential host is
// reachable through another name and through a static range.
var fuzzWorld = func() firewall.Answers {
	w := firewall.Answers{}
	for i, n := range probeNames {
		w[n] = []netip.Addr{probeAddrs[i%len(probeAddrs)]}
	}
	for _, h := range fuzzHosts {
		w[h] = append(w[h], netip.MustParseAddr("10.1.2.3"))
	}
	return w
}()

// FuzzContainment: for random baseline and repository policies (network
// entries, presets, a credential route), whenever Check accepts the
// repository, the fence the entrypoint applies for it (FenceConfig) lets
// out no packet the baseline's fence refuses: Widens decides both on the
// compiled rules (firewall.Model) in fuzzWorld, which Check's own world
// does not know. The policy-level matchers (Match, MatchAddr,
// AllowsResolved) must agree too.
func FuzzContainment(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, []byte{9, 8, 7, 6, 5, 4, 3, 2, 1, 0})
	f.Add([]byte{1, 2, 1, 0, 2, 1, 2, 3, 1, 0}, []byte{1, 2, 0, 1, 1, 0, 2, 2})
	f.Add([]byte{3, 4, 1, 0, 0, 2, 3, 2, 1, 1, 0, 3}, []byte{3, 3, 0, 1, 2, 0, 1, 1, 2, 2, 3, 3})
	f.Fuzz(func(t *testing.T, bb, rb []byte) { containment(t, bb, rb) })
}

// containment is one FuzzContainment case; it reports whether Check
// accepted the pair.
func containment(t *testing.T, bb, rb []byte) bool {
	baseSrc := (&bytesReader{bb}).policy()
	repoSrc := (&bytesReader{rb}).policy()
	base, err := policy.Parse("baseline.jsonc", []byte(baseSrc))
	if err != nil {
		return false
	}
	repo, err := policy.Explain("repo.jsonc", []byte(repoSrc))
	if err != nil {
		return false
	}
	if Check(base, "baseline.jsonc", repo) != nil {
		return false
	}
	bc, rc := fwpolicy.Config(base), FenceConfig(base, repo.Policy)
	fail := func(what string) {
		t.Fatalf("%s: allowed by the repository, not by the baseline\nbaseline: %s\nrepo:     %s", what, baseSrc, repoSrc)
	}
	if w, err := Widens(bc, rc, fuzzWorld); err != nil {
		t.Fatal(err)
	} else if w != nil {
		fail(w.String())
	}
	for _, n := range probeNames {
		if rc.Match(n).Allowed && !bc.Match(n).Allowed {
			fail("name " + n)
		}
	}
	for _, a := range probeAddrs {
		for _, p := range probePorts {
			if rc.MatchAddr(netip.AddrPortFrom(a, p)).Allowed && !bc.MatchAddr(netip.AddrPortFrom(a, p)).Allowed {
				fail(fmt.Sprintf("address %s port %d", a, p))
			}
			for _, n := range probeNames {
				if rc.AllowsResolved(n, a, p) && !bc.AllowsResolved(n, a, p) {
					fail(fmt.Sprintf("%s → %s port %d", n, a, p))
				}
			}
		}
	}
	return true
}

// TestContainmentRandom is FuzzContainment's bounded run in CI: a fixed
// number of pseudo-random pairs (seeded, so a failure reproduces), with
// the figures logged.
func TestContainmentRandom(t *testing.T) {
	n := 15000
	if testing.Short() {
		n = 1000
	}
	rng := rand.New(rand.NewPCG(24, 24))
	bytes := func() []byte {
		b := make([]byte, 8+rng.IntN(16))
		for i := range b {
			b[i] = byte(rng.UintN(256))
		}
		return b
	}
	start := time.Now()
	accepted := 0
	for i := range n {
		bb, rb := bytes(), bytes()
		if i%2 == 1 {
			// A repository close to its baseline: Check accepts more of
			// these, so the compiled comparison runs more often.
			rb = append([]byte(nil), bb...)
			for range 1 + rng.IntN(3) {
				rb[rng.IntN(len(rb))] = byte(rng.UintN(256))
			}
		}
		if containment(t, bb, rb) {
			accepted++
		}
	}
	t.Logf("%d pairs, %d accepted by Check and contained on the compiled rules, in %v", n, accepted, time.Since(start).Round(time.Millisecond))
	if accepted < n/50 {
		t.Errorf("only %d of %d pairs accepted: the generator tests too little", accepted, n)
	}
}

// TestFuzzerReachesBothOutcomes keeps the generator honest: among its seed
// space, some pairs are accepted with a non-empty network and some refused.
func TestFuzzerReachesBothOutcomes(t *testing.T) {
	accepted, refused := 0, 0
	for i := range 2000 {
		bb := []byte{byte(i), byte(i >> 3), byte(i * 7), byte(i * 13), byte(i * 31), 5, 2, 1}
		rb := []byte{byte(i >> 1), byte(i * 3), byte(i * 11), byte(i * 17), 1, 2}
		base, err := policy.Parse("b", []byte((&bytesReader{bb}).policy()))
		if err != nil {
			continue
		}
		repo, err := policy.Explain("r", []byte((&bytesReader{rb}).policy()))
		if err != nil {
			continue
		}
		if Check(base, "b", repo) == nil {
			if len(repo.Policy.Network.Allow) > 0 {
				accepted++
			}
		} else {
			refused++
		}
	}
	if accepted < 20 || refused < 20 {
		t.Fatalf("the generator gives %d accepted pairs with a network and %d refused; want both ≥ 20", accepted, refused)
	}
}
