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
