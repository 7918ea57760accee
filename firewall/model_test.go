package firewall

import (
	"net/netip"
	"testing"

	"github.com/devbox-dev/devbox/internal/layout"
)

// TestModelDecide pins the model's reading of the compiled rules on the
// paths that matter: the protect rule before everything for every uid but
// the gateway's, deny before allow, static prefixes on the direct path,
// names behind the gate, UDP to names closed without QUIC.
func TestModelDecide(t *testing.T) {
	api, shared, static, other := mustAddr("10.77.0.2"), mustAddr("10.77.0.2"), mustAddr("10.9.0.1"), mustAddr("10.77.0.3")
	cfg := Config{
		Gate: true,
		Allow: []Destination{
			{Name: "api.test", Port: 443}, {Name: "api.test", Port: 8443}, {Name: "cdn.test"},
			{Prefix: mustPrefix("10.9.0.0/16")}, {Prefix: mustPrefix("10.77.0.2/32"), Port: 80}, {Name: "other.test"},
		},
		Deny:    []Destination{{Prefix: mustPrefix("10.9.9.0/24")}, {Name: "other.test", Port: 22}},
		Protect: []string{"api.test"},
	}
	answers := Answers{"api.test": {api}, "cdn.test": {shared}, "other.test": {other}, "evil.test": {other}}
	m, err := NewModel(cfg, answers)
	if err != nil {
		t.Fatal(err)
	}
	ap := func(a netip.Addr, p uint16) netip.AddrPort { return netip.AddrPortFrom(a, p) }
	for _, c := range []struct {
		p    Packet
		want Decision
	}{
		{Packet{1000, "tcp", ap(api, 443), "api.test"}, Decision{Reason: ChainProtect}},
		{Packet{1000, "tcp", ap(api, 8443), "api.test"}, Decision{Reason: ChainProtect}},
		{Packet{1000, "tcp", ap(shared, 443), "cdn.test"}, Decision{Reason: ChainProtect}},
		{Packet{1000, "tcp", ap(api, 80), ""}, Decision{Reason: ChainProtect}},
		{Packet{1000, "udp", ap(api, 443), ""}, Decision{Reason: ChainProtect}},
		{Packet{layout.GatewayUID, "tcp", ap(api, 443), "api.test"}, Decision{Out: true, Gate: true}},
		{Packet{layout.GatewayUID, "tcp", ap(api, 443), "evil.test"}, Decision{Gate: true, Reason: "gate:" + GateNotAllowed}},
		{Packet{layout.GatewayUID, "tcp", ap(api, 80), ""}, Decision{Out: true}}, // static, direct
		{Packet{1000, "tcp", ap(static, 22), ""}, Decision{Out: true}},
		{Packet{1000, "tcp", ap(mustAddr("10.9.9.1"), 22), ""}, Decision{Reason: ChainDenied}},
		{Packet{1000, "tcp", ap(other, 443), "other.test"}, Decision{Out: true, Gate: true}},
		{Packet{1000, "tcp", ap(other, 443), "cdn.test"}, Decision{Gate: true, Reason: "gate:" + GateHostMismatch}},
		{Packet{1000, "tcp", ap(other, 443), ""}, Decision{Gate: true, Reason: "gate:" + GateNoSNI}},
		{Packet{1000, "tcp", ap(other, 22), "other.test"}, Decision{Reason: ChainDenied}},
		{Packet{1000, "udp", ap(other, 443), ""}, Decision{Reason: ChainUDPGated}},
		{Packet{1000, "tcp", ap(mustAddr("10.8.0.1"), 443), "other.test"}, Decision{Reason: ChainBlocked}},
		{Packet{1000, "udp", ap(other, 53), ""}, Decision{Reason: "dns"}},
	} {
		if got := m.Decide(c.p); got != c.want {
			t.Errorf("%s: %+v, want %+v", c.p, got, c.want)
		}
	}
}

// TestModelReadsEveryRule: every rule Rules can emit (gate on and off,
// QUIC, logging, protect, Docker's DNS, an upstream on another port)
// is one the model reads.
func TestModelReadsEveryRule(t *testing.T) {
	for _, cfg := range []Config{
		{},
		{Gate: true, QUIC: true, Log: true, Protect: []string{"a.test"}, Allow: []Destination{{Name: "a.test", Port: 443}},
			Upstream: []netip.AddrPort{DockerDNS, netip.MustParseAddrPort("[fd00::53]:5353"), netip.MustParseAddrPort("10.0.0.53:5353")}},
		{Protect: []string{"a.test"}, Allow: []Destination{{Name: "a.test", Port: 443}}},
	} {
		if _, err := NewModel(cfg, nil); err != nil {
			t.Errorf("%+v: %v", cfg, err)
		}
	}
}
