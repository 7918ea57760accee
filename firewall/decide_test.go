package firewall

import (
	"net/netip"
	"testing"
)

func TestAllowsResolved(t *testing.T) {
	pfx := netip.MustParsePrefix
	cfg := Config{
		Allow: []Destination{
			{Prefix: pfx("10.1.0.0/16"), Port: 443},
			{Prefix: pfx("192.0.2.0/24")},
			{Name: "corp.test", Wildcard: true, Port: 443},
			{Name: "git.corp.test"},
		},
		Deny: []Destination{
			{Prefix: pfx("10.1.99.0/24")},
			{Prefix: pfx("192.0.2.7/32"), Port: 22},
			{Name: "git.corp.test", Port: 22},
			{Name: "secrets.corp.test"},
		},
	}
	a := netip.MustParseAddr
	for _, tc := range []struct {
		name string
		addr string
		port uint16
		want bool
	}{
		{"", "10.1.2.3", 443, true},
		{"", "10.1.2.3", 80, false},
		{"", "10.1.99.3", 443, false}, // deny wins
		{"", "192.0.2.7", 80, true},
		{"", "192.0.2.7", 22, false}, // deny-port wins
		{"", "198.51.100.1", 443, false},
		{"api.corp.test", "198.51.100.1", 443, true},
		{"api.corp.test", "198.51.100.1", 80, false},
		{"api.corp.test", "10.1.99.3", 443, false}, // answer dropped: denied address
		{"api.corp.test", "127.0.0.1", 443, false}, // answer dropped: loopback
		{"git.corp.test", "198.51.100.2", 80, true},
		{"git.corp.test", "198.51.100.2", 22, false}, // the name's deny port
		{"secrets.corp.test", "198.51.100.3", 443, false},
		{"corp.test", "198.51.100.4", 443, false}, // the wildcard is strict
		{"api.corp.test", "10.1.2.3", 80, false},
		{"git.corp.test", "10.1.2.3", 80, true}, // the name allows any port
	} {
		var got bool
		if tc.name == "" {
			got = cfg.MatchAddr(netip.AddrPortFrom(a(tc.addr), tc.port)).Allowed
		} else {
			got = cfg.AllowsResolved(tc.name, a(tc.addr), tc.port)
		}
		if got != tc.want {
			t.Errorf("%q %s:%d: got %v, want %v", tc.name, tc.addr, tc.port, got, tc.want)
		}
	}
}
