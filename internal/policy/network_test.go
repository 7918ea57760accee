package policy

import (
	"net/netip"
	"slices"
	"testing"
)

func mustParse(t testing.TB, in string) *Policy {
	t.Helper()
	p, err := Parse("test.jsonc", []byte(in))
	if err != nil {
		t.Fatalf("Parse(%s): %v", in, err)
	}
	return p
}

func TestAllowsName(t *testing.T) {
	n := mustParse(t, `{"network": {
	  "allow": ["api.x.test:443", "*.cdn.test", "open.test", "10.0.0.0/8", "ssh.test:22"],
	  "deny": ["bad.cdn.test", "open.test:25", "*.evil.cdn.test"],
	}}`).Network
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
		if got := n.AllowsName(tt.name); got != tt.want {
			t.Errorf("AllowsName(%q) = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestNamePorts(t *testing.T) {
	n := mustParse(t, `{"network": {
	  "allow": ["api.x.test:443", "api.x.test:8443", "*.x.test:443", "open.test", "open.test:443", "mixed.test:22", "mixed.test:443"],
	  "deny": ["open.test:25", "mixed.test:22", "gone.test"],
	}}`).Network
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
		ports, any := n.NamePorts(tt.name)
		if !slices.Equal(ports, tt.ports) || any != tt.any {
			t.Errorf("NamePorts(%q) = %v, %v; want %v, %v", tt.name, ports, any, tt.ports, tt.any)
		}
		if d := n.DeniedPorts(tt.name); !slices.Equal(d, tt.denied) {
			t.Errorf("DeniedPorts(%q) = %v, want %v", tt.name, d, tt.denied)
		}
	}
}

func TestDenyWinsAndFold(t *testing.T) {
	ex, err := Explain("p", []byte(`{"network": {
	  "presets": ["npm", "npm"],
	  "allow": ["x.test", "X.test", "x.test.", "a.y.test:443", "10.1.0.0/16", "keep.test", "registry.npmjs.org:443"],
	  "deny": ["*.y.test", "10.0.0.0/8", "x.test:22", "x.test:22"],
	}}`))
	if err != nil {
		t.Fatal(err)
	}
	n := ex.Policy.Network
	var allow, deny []string
	for _, a := range n.Allow {
		allow = append(allow, a.String())
	}
	for _, d := range n.Deny {
		deny = append(deny, d.String())
	}
	if want := []string{"keep.test", "registry.npmjs.org:443", "x.test"}; !slices.Equal(allow, want) {
		t.Errorf("allow = %q, want %q", allow, want)
	}
	if want := []string{"x.test:22", "*.y.test", "10.0.0.0/8"}; !slices.Equal(deny, want) {
		t.Errorf("deny = %q, want %q", deny, want)
	}
	if want := []string{"npm"}; !slices.Equal(n.Presets, want) {
		t.Errorf("presets = %q, want %q", n.Presets, want)
	}
	var removed []string
	for _, r := range ex.Removed {
		removed = append(removed, r.Allow.String()+" by "+r.Deny.String())
	}
	if want := []string{"a.y.test:443 by *.y.test", "10.1.0.0/16 by 10.0.0.0/8"}; !slices.Equal(removed, want) {
		t.Errorf("removed = %q, want %q", removed, want)
	}
	for _, a := range ex.Allowed {
		if a.Destination.String() == "registry.npmjs.org:443" && !slices.Equal(a.From, []string{"allow", "preset:npm"}) {
			t.Errorf("registry.npmjs.org from %q, want allow and preset:npm", a.From)
		}
	}
	if !n.DeniesAddr(netip.MustParseAddr("10.9.9.9")) || n.DeniesAddr(netip.MustParseAddr("192.0.2.1")) {
		t.Errorf("DeniesAddr wrong for %v", n.Deny)
	}
}

func TestEmptyAllowIsNoNetwork(t *testing.T) {
	for _, in := range []string{
		`{}`,
		`{"network": {"allow": []}}`,
		`{"network": {"allow": ["x.test"], "deny": ["x.test"]}}`,
	} {
		ex, err := Explain("p", []byte(in))
		if err != nil {
			t.Fatal(err)
		}
		if !ex.NoNetwork || ex.Policy.Network.AllowsName("x.test") {
			t.Errorf("%s: NoNetwork = %v, want true", in, ex.NoNetwork)
		}
		if ports, any := ex.Policy.Network.NamePorts("x.test"); any || ports != nil {
			t.Errorf("%s: NamePorts = %v, %v", in, ports, any)
		}
	}
}

func TestPresets(t *testing.T) {
	want := []string{"anthropic", "claude-login", "debian", "github", "go", "npm", "pypi", "vscode"}
	if got := PresetNames(); !slices.Equal(got, want) {
		t.Fatalf("PresetNames = %q, want %q", got, want)
	}
	for _, name := range want {
		entries, ok := Preset(name)
		if !ok || len(entries) == 0 {
			t.Errorf("preset %s is empty", name)
		}
		for _, e := range entries {
			if e.Why == "" {
				t.Errorf("preset %s: %s has no reason", name, e.Destination)
			}
			if e.Destination.Kind == Prefix {
				t.Errorf("preset %s: %s: presets name hosts, addresses rotate", name, e.Destination)
			}
		}
		p := mustParse(t, `{"network": {"presets": ["`+name+`"]}}`)
		for _, e := range entries {
			if !slices.Contains(p.Network.Allow, e.Destination) {
				t.Errorf("preset %s: %s missing after expansion", name, e.Destination)
			}
		}
	}
	if _, ok := Preset("nope"); ok {
		t.Error(`Preset("nope") found`)
	}
	p := mustParse(t, `{"network": {"presets": ["anthropic"]}}`)
	if !p.Network.AllowsName("api.anthropic.com") || p.Network.AllowsName("claude.ai") {
		t.Error("anthropic preset must allow the API and not the login hosts")
	}
}
