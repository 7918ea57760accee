package firewall

import (
	"net/netip"
	"slices"
)

// AllowsResolved reports whether a TCP or UDP packet to a:port gets out
// after the DNS filter answered name with the address a, composed from the
// one matcher: the filter answers name (Match) and keeps a in the answer
// (AddressVerdict); then the rules check the address entries' denies
// (MatchAddr), the deny ports the filter wrote for the name, and allow the
// packet when the name's verdict opens the port (Verdict.AllowsPort) or an
// address entry does. The name gate, when on, checks more (the SNI or
// Host); this is the most the sets let through.
func (c Config) AllowsResolved(name string, a netip.Addr, port uint16) bool {
	v := c.Match(name)
	if !v.Allowed || c.AddressVerdict(a) != "" {
		return false
	}
	static := c.MatchAddr(netip.AddrPortFrom(a.Unmap(), port))
	if static.Reason == "denied" || slices.Contains(v.DenyPorts, port) {
		return false
	}
	return v.AllowsPort(port) || static.Allowed
}
