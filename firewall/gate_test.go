package firewall

import (
	"net/netip"
	"reflect"
	"testing"
	"time"
)

func TestGateVerdict(t *testing.T) {
	cfg := Config{
		Allow: []Destination{
			{Name: "good.test"},
			{Name: "cdn.test", Wildcard: true},
			{Name: "api.test", Port: 443},
			{Name: "other.test"},
		},
		Deny: []Destination{{Name: "bad.cdn.test"}, {Name: "good.test", Port: 25}},
	}
	tests := []struct {
		kind, name string
		ech        bool
		port       uint16
		bound      []string
		want       string
	}{
		{streamTLS, "good.test", false, 443, []string{"good.test"}, ""},
		{streamTLS, "GOOD.test", false, 443, []string{"good.test"}, ""},
		{streamHTTP, "good.test", false, 80, []string{"evil.test", "good.test"}, ""},
		// Another name of the same wildcard entry resolved to the address.
		{streamTLS, "a.cdn.test", false, 443, []string{"b.cdn.test"}, ""},
		{streamTLS, "evil.test", false, 443, []string{"good.test"}, GateNotAllowed},
		{streamTLS, "bad.cdn.test", false, 443, []string{"a.cdn.test"}, GateNotAllowed},
		{streamTLS, "good.test", false, 25, []string{"good.test"}, GateNotAllowed},
		{streamTLS, "api.test", false, 8443, []string{"api.test"}, GateNotAllowed},
		// Allowed, but the address is another allowed name's.
		{streamTLS, "other.test", false, 443, []string{"good.test"}, GateSNIMismatch},
		{streamTLS, "good.test", false, 443, nil, GateSNIMismatch},
		{streamHTTP, "other.test", false, 80, []string{"good.test"}, GateHostMismatch},
		{streamHTTP, "", false, 80, []string{"good.test"}, GateHostMismatch},
		{streamTLS, "", false, 443, []string{"good.test"}, GateNoSNI},
		{streamTLS, "", true, 443, []string{"good.test"}, GateECH},
		{streamTLS, "evil.test", true, 443, []string{"good.test"}, GateECH},
		{streamTLS, "other.test", true, 443, []string{"good.test"}, GateECH},
		// An ECH hello whose outer name passes is passed (see docs).
		{streamTLS, "good.test", true, 443, []string{"good.test"}, ""},
		{"", "", false, 22, []string{"good.test"}, GateNoName},
		{streamTLS, "bad\x00.test", false, 443, []string{"good.test"}, GateNotAllowed},
	}
	for _, tt := range tests {
		if got := cfg.gateVerdict(tt.kind, tt.name, tt.ech, tt.port, tt.bound); got != tt.want {
			t.Errorf("gateVerdict(%s %q ech=%v :%d bound %v) = %q, want %q", tt.kind, tt.name, tt.ech, tt.port, tt.bound, got, tt.want)
		}
	}
}

func TestHostName(t *testing.T) {
	for in, want := range map[string]string{
		"good.test": "good.test", "Good.Test:8080": "good.test", "good.test.": "good.test",
		"10.0.0.1": "", "10.0.0.1:80": "", "[fd00::1]:80": "", "": "",
	} {
		if got := hostName(in); got != want {
			t.Errorf("hostName(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestBindings(t *testing.T) {
	var b bindings
	now := time.Now()
	a := netip.MustParseAddr("10.0.0.1")
	b.add(a, "b.test", now.Add(time.Minute))
	b.add(netip.MustParseAddr("::ffff:10.0.0.1"), "a.test", now.Add(time.Second))
	b.add(a, "b.test", now.Add(-time.Hour)) // never shortens
	if got := b.names(a, now); !reflect.DeepEqual(got, []string{"a.test", "b.test"}) {
		t.Errorf("names = %v", got)
	}
	if got := b.names(a, now.Add(2*time.Second)); !reflect.DeepEqual(got, []string{"b.test"}) {
		t.Errorf("names after a.test expired = %v", got)
	}
	b.sweep(now.Add(2 * time.Minute))
	if len(b.m) != 0 || b.n != 0 {
		t.Errorf("after sweep: %v (%d)", b.m, b.n)
	}
}

func TestStaticAllows(t *testing.T) {
	cfg := Config{Allow: []Destination{{Prefix: netip.MustParsePrefix("10.1.0.0/16")}, {Prefix: netip.MustParsePrefix("10.2.0.1/32"), Port: 22}}}
	for _, tt := range []struct {
		a    string
		port uint16
		want bool
	}{{"10.1.2.3", 443, true}, {"10.2.0.1", 22, true}, {"10.2.0.1", 443, false}, {"10.3.0.1", 443, false}} {
		if got := cfg.staticAllows(netip.MustParseAddr(tt.a), tt.port); got != tt.want {
			t.Errorf("staticAllows(%s, %d) = %v", tt.a, tt.port, got)
		}
	}
}
