package policy_test

// The policy as the firewall enforces it: these tests read policies with
// this package and decide names and addresses with the firewall's matcher
// (through fwpolicy), the one the DNS filter runs. The policy package has
// no matcher of its own.

import (
	"net/netip"
	"slices"
	"testing"

	"github.com/devbox-dev/devbox/firewall"
	"github.com/devbox-dev/devbox/firewall/fwpolicy"
	"github.com/devbox-dev/devbox/internal/policy"
)

// enforced parses a policy and returns the firewall config it becomes.
func enforced(t testing.TB, in string) firewall.Config {
	t.Helper()
	p, err := policy.Parse("test.jsonc", []byte(in))
	if err != nil {
		t.Fatalf("Parse(%s): %v", in, err)
	}
	return fwpolicy.Config(p)
}

func TestMatchName(t *testing.T) {
	cfg := enforced(t, `{"network": {
	  "allow": ["api.x.test:443", "*.cdn.test", "open.test", "10.0.0.0/8", "ssh.test:22"],
	  "deny": ["bad.cdn.test", "open.test:25", "*.evil.cdn.test"],
	}}`)
	tests := []struct {
		name string
		want bool
	}{
		{"api.x.test", true},
		{"API.X.TEST.", true},
		{"x.test", false},
		{"other.x.test", false},
		{"a.cdn.test", true},
		{"cdn.test", false},
		{"bad.cdn.test", false},
		{"ok.bad.cdn.test", true}, // the deny is exact: only bad.cdn.test itself
		{"a.evil.cdn.test", false},
		{"open.test", true}, // a deny with a port closes that port only
		{"10.1.2.3", false},
		{"a\x00.cdn.test", false},
		{"a..cdn.test", false},
		{"", false},
		{"unrelated.test", false},
	}
	for _, tt := range tests {
		if got := cfg.Match(tt.name).Allowed; got != tt.want {
			t.Errorf("Match(%q).Allowed = %v, want %v", tt.name, got, tt.want)
		}
	}
}

// TestMatchDestination: one entry at a time, as policy's own
// Destination.MatchName used to decide it.
func TestMatchDestination(t *testing.T) {
	host := `{"network": {"allow": ["api.x.test"]}}`
	wild := `{"network": {"allow": ["*.x.test"]}}`
	ip := `{"network": {"allow": ["192.0.2.1"]}}`
	tests := []struct {
		policy, name string
		want         bool
	}{
		{host, "api.x.test", true},
		{host, "API.X.TEST.", true},
		{host, "x.test", false},
		{host, "a.api.x.test", false},
		{host, "api.x.test.evil.test", false},
		{wild, "a.x.test", true},
		{wild, "a.b.x.test", true},
		{wild, "a.x.test.", true},
		{wild, "x.test", false},
		{wild, "ax.test", false},
		{wild, "a\x00b.x.test", false},
		{wild, "a b.x.test", false},
		{wild, "*.x.test", false},
		// The enforced matcher takes underscores in service labels
		// (_dmarc, _acme-challenge); policy's deleted one refused them.
		{wild, "a_b.x.test", true},
		{wild, "", false},
		{ip, "192.0.2.1", false},
	}
	for _, tt := range tests {
		if got := enforced(t, tt.policy).Match(tt.name).Allowed; got != tt.want {
			t.Errorf("%s: Match(%q).Allowed = %v, want %v", tt.policy, tt.name, got, tt.want)
		}
	}
}

// openPorts lists the ports of v's entries that a connection gets through.
func openPorts(v firewall.Verdict) []uint16 {
	var out []uint16
	for _, p := range v.Ports {
		if v.AllowsPort(p) {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}

func TestMatchPorts(t *testing.T) {
	cfg := enforced(t, `{"network": {
	  "allow": ["api.x.test:443", "api.x.test:8443", "*.x.test:443", "open.test", "open.test:443", "mixed.test:22", "mixed.test:443"],
	  "deny": ["open.test:25", "mixed.test:22", "gone.test"],
	}}`)
	tests := []struct {
		name   string
		ports  []uint16
		any    bool
		denied []uint16
	}{
		{"api.x.test", []uint16{443, 8443}, false, nil},
		{"b.x.test", []uint16{443}, false, nil},
		{"open.test", nil, true, []uint16{25}},
		{"mixed.test", []uint16{443}, false, []uint16{22}},
		{"gone.test", nil, false, nil},
		{"nowhere.test", nil, false, nil},
	}
	for _, tt := range tests {
		v := cfg.Match(tt.name)
		if ports := openPorts(v); !slices.Equal(ports, tt.ports) || v.AnyPort != tt.any {
			t.Errorf("Match(%q) opens %v, any %v; want %v, %v", tt.name, ports, v.AnyPort, tt.ports, tt.any)
		}
		if d := slices.Sorted(slices.Values(v.DenyPorts)); !slices.Equal(d, tt.denied) {
			t.Errorf("Match(%q).DenyPorts = %v, want %v", tt.name, d, tt.denied)
		}
		for _, p := range tt.denied {
			if v.AllowsPort(p) {
				t.Errorf("Match(%q).AllowsPort(%d) = true for a denied port", tt.name, p)
			}
		}
		if tt.any && !v.AllowsPort(8080) {
			t.Errorf("Match(%q).AllowsPort(8080) = false under an any-port allow", tt.name)
		}
	}
}

func TestMatchAddr(t *testing.T) {
	cfg := enforced(t, `{"network": {
	  "allow": ["10.1.0.0/16", "192.0.2.0/24:443", "[2001:db8::/32]:22", "x.test"],
	  "deny": ["10.0.0.0/8", "192.0.2.7/32:443"],
	}}`)
	// A deny without a port drops the address from answers too.
	if cfg.AddressVerdict(netip.MustParseAddr("10.9.9.9")) != "denied" || cfg.AddressVerdict(netip.MustParseAddr("192.0.2.1")) != "" {
		t.Errorf("AddressVerdict wrong for %v", cfg.Deny)
	}
	tests := []struct {
		dst    string
		want   bool
		reason string
	}{
		{"10.1.2.3:443", false, "denied"}, // the allow was removed by the wider deny
		{"192.0.2.1:443", true, ""},
		{"192.0.2.1:80", false, "not-allowed"},
		{"192.0.2.7:443", false, "denied"},
		{"[::ffff:192.0.2.1]:443", true, ""},
		{"[2001:db8::1]:22", true, ""},
		{"[2001:db8::1]:443", false, "not-allowed"},
		{"198.51.100.1:443", false, "not-allowed"},
	}
	for _, tt := range tests {
		v := cfg.MatchAddr(netip.MustParseAddrPort(tt.dst))
		if v.Allowed != tt.want || v.Reason != tt.reason {
			t.Errorf("MatchAddr(%s) = %+v, want allowed %v reason %q", tt.dst, v, tt.want, tt.reason)
		}
		if v.Allowed && !v.AllowsPort(netip.MustParseAddrPort(tt.dst).Port()) {
			t.Errorf("MatchAddr(%s) allowed but not its port: %+v", tt.dst, v)
		}
	}
}

func TestNoNetworkMatchesNothing(t *testing.T) {
	for _, in := range []string{
		`{}`,
		`{ /* nothing */ }`,
		`{"network": {"allow": []}}`,
		`{"network": {"allow": ["x.test"], "deny": ["x.test"]}}`,
	} {
		v := enforced(t, in).Match("x.test")
		if v.Allowed || v.AnyPort || v.Ports != nil {
			t.Errorf("%s: Match(x.test) = %+v, want nothing allowed", in, v)
		}
	}
}

func TestPresetMatch(t *testing.T) {
	cfg := enforced(t, `{"network": {"presets": ["anthropic"]}}`)
	if !cfg.Match("api.anthropic.com").Allowed || cfg.Match("claude.ai").Allowed {
		t.Error("anthropic preset must allow the API and not the login hosts")
	}
	cfg = enforced(t, `{"network": {"presets": ["npm"]},}`)
	if !cfg.Match("registry.npmjs.org").Allowed {
		t.Error("npm preset must allow registry.npmjs.org")
	}
}
