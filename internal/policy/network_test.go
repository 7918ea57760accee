package policy

import (
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
		if !ex.NoNetwork {
			t.Errorf("%s: NoNetwork = %v, want true", in, ex.NoNetwork)
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
}
