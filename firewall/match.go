package firewall

import (
	"net/netip"
	"slices"
	"strings"
)

// Verdict is what the policy says about one DNS name.
type Verdict struct {
	Allowed bool
	// Reason says why a name is not allowed ("denied", "not-allowed",
	// "invalid-name").
	Reason string
	// AnyPort is true when an allow entry without a port matched; otherwise
	// Ports lists the ports the matching entries allow.
	AnyPort bool
	Ports   []uint16
	// DenyPorts lists the ports of deny entries with a port that match the
	// name: its addresses go into the deny-port sets, which the rules check
	// before any allow, so those ports stay closed while the others follow
	// the allow entries.
	DenyPorts []uint16
	// Protected is true when the name is in Config.Protect: its addresses
	// go into the protect sets too.
	Protected bool
}

// Match decides whether name (a DNS name, with or without the trailing dot,
// any case) may be resolved. Deny entries win over allow entries.
func (c Config) Match(name string) Verdict {
	name = strings.ToLower(strings.TrimSuffix(name, "."))
	if !validName(name) {
		return Verdict{Reason: "invalid-name"}
	}
	var v Verdict
	for _, d := range c.Deny {
		if !d.matchesName(name) {
			continue
		}
		if d.Port == 0 {
			return Verdict{Reason: "denied"}
		}
		v.DenyPorts = appendUnique(v.DenyPorts, d.Port)
	}
	for _, d := range c.Allow {
		if !d.matchesName(name) {
			continue
		}
		v.Allowed = true
		if d.Port == 0 {
			v.AnyPort = true
		} else {
			v.Ports = appendUnique(v.Ports, d.Port)
		}
	}
	if !v.Allowed {
		return Verdict{Reason: "not-allowed"}
	}
	// A port both allowed and denied stays in Ports: the deny-port set is
	// checked first, so it is closed all the same.
	if v.AnyPort {
		v.Ports = nil
	}
	for _, p := range c.Protect {
		if p == name || strings.HasPrefix(p, "*.") && strings.HasSuffix(name, p[1:]) {
			v.Protected = true
		}
	}
	return v
}

// AllowsPort reports whether a connection to port of a name with this
// verdict gets through: the name is allowed, no deny entry closes the port,
// and an allow entry opens it (or any port).
func (v Verdict) AllowsPort(port uint16) bool {
	if !v.Allowed || slices.Contains(v.DenyPorts, port) {
		return false
	}
	return v.AnyPort || slices.Contains(v.Ports, port)
}

// MatchAddr decides a TCP or UDP connection to dst by the address entries
// (prefixes) alone, as the rules do: a deny entry without a port, then a
// deny entry on dst's port, then any allow entry for dst's address and port.
// It knows nothing of the addresses the DNS filter learns for allowed names
// at run time; Match decides those by name.
func (c Config) MatchAddr(dst netip.AddrPort) Verdict {
	a := dst.Addr().Unmap()
	covers := func(d Destination) bool {
		return d.Prefix.IsValid() && d.Prefix.Contains(a) && (d.Port == 0 || d.Port == dst.Port())
	}
	for _, d := range c.Deny {
		if covers(d) {
			return Verdict{Reason: "denied"}
		}
	}
	for _, d := range c.Allow {
		if covers(d) {
			v := Verdict{Allowed: true, AnyPort: d.Port == 0}
			if d.Port != 0 {
				v.Ports = []uint16{d.Port}
			}
			return v
		}
	}
	return Verdict{Reason: "not-allowed"}
}

func (d Destination) matchesName(name string) bool {
	if d.Name == "" {
		return false
	}
	if d.Wildcard {
		return strings.HasSuffix(name, "."+d.Name)
	}
	return name == d.Name
}

func appendUnique(ps []uint16, p uint16) []uint16 {
	if slices.Contains(ps, p) {
		return ps
	}
	return append(ps, p)
}

// metadataAddrs are the cloud instance metadata services; an allowed name
// must never be pointed at them.
var metadataAddrs = []netip.Addr{
	netip.MustParseAddr("169.254.169.254"),
	netip.MustParseAddr("fd00:ec2::254"),
	netip.MustParseAddr("100.100.100.200"), // Alibaba Cloud
}

// AddressVerdict says why a resolved address must be dropped from an answer
// ("" when it may be used).
func (c Config) AddressVerdict(a netip.Addr) string {
	a = a.Unmap()
	for _, m := range metadataAddrs {
		if a == m {
			return "metadata"
		}
	}
	switch {
	case !a.IsValid() || a.IsUnspecified():
		return "unspecified"
	case a.IsLoopback():
		return "loopback"
	case a.IsMulticast() || a == netip.AddrFrom4([4]byte{255, 255, 255, 255}):
		return "multicast"
	case a.IsLinkLocalUnicast():
		return "link-local"
	}
	for _, d := range c.Deny {
		if d.Prefix.IsValid() && d.Port == 0 && d.Prefix.Contains(a) {
			return "denied"
		}
	}
	return ""
}
