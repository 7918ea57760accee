package fwpolicy

import (
	"encoding/json"
	"net/netip"
	"testing"

	"github.com/devbox-dev/devbox/firewall"
	"github.com/devbox-dev/devbox/internal/layout"
	"github.com/devbox-dev/devbox/internal/policy"
)

func TestConfig(t *testing.T) {
	p := &policy.Policy{Network: policy.Network{
		Allow: []policy.Destination{
			{Kind: policy.Host, Name: "api.example.test", Port: 443},
			{Kind: policy.Wildcard, Name: "cdn.test"},
			{Kind: policy.Prefix, Prefix: netip.MustParsePrefix("10.1.0.0/16")},
		},
		Deny: []policy.Destination{{Kind: policy.Prefix, Prefix: netip.MustParsePrefix("169.254.0.0/16")}},
		Log:  policy.Log{Blocked: true},
	}}
	cfg := Config(p)
	want := firewall.Config{
		Allow:   []firewall.Destination{{Name: "api.example.test", Port: 443}, {Name: "cdn.test", Wildcard: true}, {Prefix: netip.MustParsePrefix("10.1.0.0/16")}},
		Deny:    []firewall.Destination{{Prefix: netip.MustParsePrefix("169.254.0.0/16")}},
		Log:     true,
		LogFile: layout.LogPath,
		Gate:    true,
	}
	got, _ := json.Marshal(cfg)
	w, _ := json.Marshal(want)
	if string(got) != string(w) {
		t.Errorf("Config:\n got %s\nwant %s", got, w)
	}
	if err := cfg.Validate(); err != nil {
		t.Error(err)
	}
}

func TestConfigProtectsCredentialHosts(t *testing.T) {
	p, err := policy.Parse("p", []byte(`{
	  "network": { "allow": ["api.example.test", "api.anthropic.test:443", "*.git.test"] },
	  "credentials": {
	    "anthropic": { "secret": "a", "host": "api.anthropic.test" },
	    "git": [ { "host": "a.git.test", "secret": "g", "repos": ["a/b"] } ],
	    "http": [ { "host": "api.example.test", "header": "X-Key", "value": "${secret}", "secret": "h" } ],
	  },
	}`))
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config(p)
	if got, want := cfg.Protect, []string{"api.anthropic.test", "a.git.test", "api.example.test"}; len(got) != 3 || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Errorf("Protect = %v, want %v", got, want)
	}
	if cfg.ProtectUID != 996 {
		t.Errorf("ProtectUID = %d", cfg.ProtectUID)
	}
	for _, h := range cfg.Protect {
		v := cfg.Match(h)
		if !v.Allowed || !v.Protected {
			t.Errorf("Match(%s) = %+v: a credential host must resolve (for the gateway) and be protected", h, v)
		}
	}
	if v := cfg.Match("other.test"); v.Protected {
		t.Error("other.test protected")
	}
}

// TestConfigProtectsTheService: a git route for github.com protects its
// service's other hosts (api., uploads., raw. …) and the policy's own
// protect entries; an unrelated allowed name stays unprotected.
func TestConfigProtectsTheService(t *testing.T) {
	p, err := policy.Parse("p", []byte(`{
	  "network": { "presets": ["github"], "allow": ["api.corp.test:443", "*.corp.test:443"] },
	  "credentials": {
	    "git": [ { "host": "github.com", "secret": "github", "repos": ["acme/app"] } ],
	    "http": [ { "host": "api.corp.test", "header": "Authorization", "value": "Bearer ${secret}", "secret": "corp", "protect": ["*.uploads.corp.test"] } ],
	  },
	}`))
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config(p)
	// uploads.github.com is protected too, but the github preset does not
	// allow it: the DNS filter refuses it, so nobody reaches it at all.
	for name, want := range map[string]string{
		"github.com": "protected", "api.github.com": "protected", "codeload.github.com": "protected",
		"raw.githubusercontent.com": "protected", "objects.githubusercontent.com": "protected",
		"uploads.github.com": "not-allowed",
		"api.corp.test":      "protected", "eu.uploads.corp.test": "protected", "www.corp.test": "open",
	} {
		v := cfg.Match(name)
		got := "open"
		switch {
		case !v.Allowed:
			got = v.Reason
		case v.Protected:
			got = "protected"
		}
		if got != want {
			t.Errorf("Match(%q) = %+v: %s, want %s", name, v, got, want)
		}
	}
}
