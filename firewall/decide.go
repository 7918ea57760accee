package firewall

import (
	"net/netip"
	"slices"
)

// AllowsAddr reports whether the rules let a TCP or UDP packet to a:port
// out on the strength of the Config's static entries alone (IP literals and
// CIDRs), checked in the rules' order: the deny set, the deny-port set,
// then the allow and allow-port sets (see rules and staticEntries).
func (c Config) AllowsAddr(a netip.Addr, port uint16) bool {
	return c.decide(a.Unmap(), port, Verdict{})
}

// AllowsResolved reports whether a TCP or UDP packet to a:port gets out
// after the DNS filter answered name with the address a: the filter must
// answer name (Match), keep a in the answer (AddressVerdict), and the sets
// it fills from the Verdict (allow, allow-port, deny-port) together with
// the static entries must let the packet through in the rules' order.
func (c Config) AllowsResolved(name string, a netip.Addr, port uint16) bool {
	v := c.Match(name)
	if !v.Allowed || c.AddressVerdict(a) != "" {
		return false
	}
	return c.decide(a.Unmap(), port, v)
}

// decide mirrors DEVBOX-OUTPUT for one packet whose address the filter
// inserted with verdict v (the zero Verdict: not inserted).
func (c Config) decide(a netip.Addr, port uint16, v Verdict) bool {
	for _, d := range c.Deny {
		if d.Prefix.IsValid() && d.Prefix.Contains(a) && (d.Port == 0 || d.Port == port) {
			return false
		}
	}
	if slices.Contains(v.DenyPorts, port) {
		return false
	}
	if v.AnyPort || slices.Contains(v.Ports, port) {
		return true
	}
	for _, d := range c.Allow {
		if d.Prefix.IsValid() && d.Prefix.Contains(a) && (d.Port == 0 || d.Port == port) {
			return true
		}
	}
	return false
}
