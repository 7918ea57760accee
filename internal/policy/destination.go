package policy

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Limits from RFC 1035 §2.3.4, kept by RFC 1123 §2.1.
const (
	maxLabelLen = 63
	maxNameLen  = 253
)

// DestinationError says why a string is not a valid destination. Reason is
// written for a person and never contains the raw input, which may hold
// control characters; Input is quoted when printed.
type DestinationError struct {
	Input  string
	Reason string
}

func (e *DestinationError) Error() string {
	return fmt.Sprintf("invalid destination %q: %s", e.Input, e.Reason)
}

// ParseDestination parses one allow or deny entry:
//
//	api.example.com          a host name (RFC 1123, at least two labels)
//	*.example.com            every strict subdomain of example.com
//	192.0.2.1, 2001:db8::1   an IP literal
//	10.0.0.0/8, fd00::/8     a CIDR (host bits must be zero)
//	any of them + ":443"     one port; IPv6 needs brackets: [2001:db8::1]:443
//
// Host names are lower-cased and one trailing dot is stripped. Anything else
// (URLs, paths, spaces, control or non-ASCII characters, empty strings) is
// rejected with a *DestinationError saying why.
func ParseDestination(s string) (Destination, error) {
	reason := checkBytes(s)
	if reason == "" {
		var d Destination
		d, reason = parseDestination(s)
		if reason == "" {
			return d, nil
		}
	}
	return Destination{}, &DestinationError{Input: s, Reason: reason}
}

// checkBytes rejects what can never be part of a destination, before any
// other parsing: a peer's proxy was once bypassed by a NUL byte in a host
// name, so nothing below ever sees one.
func checkBytes(s string) string {
	if s == "" {
		return "empty destination"
	}
	if len(s) > 300 {
		return fmt.Sprintf("too long (%d bytes)", len(s))
	}
	if !utf8.ValidString(s) {
		return "not valid UTF-8"
	}
	for i, r := range s {
		switch {
		case r == 0:
			return fmt.Sprintf("contains a NUL byte at offset %d", i)
		case r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0):
			return fmt.Sprintf("contains the control character %U at offset %d", r, i)
		case r == ' ' || r == '\u00a0' || r == '\u3000' || r == '\u2028' || r == '\u2029':
			return fmt.Sprintf("contains a space at offset %d; give one destination per entry", i)
		case r >= 0x80:
			return "contains non-ASCII characters: give an internationalized name as punycode (xn--…)"
		}
	}
	if strings.Contains(s, "://") {
		return "is a URL: give only the host name, optionally with :port (for example x.test:443)"
	}
	return ""
}

func parseDestination(s string) (Destination, string) {
	host, port, reason := splitPort(s)
	if reason != "" {
		return Destination{}, reason
	}
	d := Destination{Port: port}
	bracketed := strings.HasPrefix(host, "[")
	if bracketed {
		host = host[1 : len(host)-1]
	}
	if slash := strings.IndexByte(host, '/'); slash >= 0 {
		// A CIDR, or a host followed by a path.
		pfx, err := netip.ParsePrefix(host)
		if err != nil {
			if _, aerr := netip.ParseAddr(host[:slash]); aerr == nil {
				return d, fmt.Sprintf("bad CIDR prefix length %q", host[slash+1:])
			}
			return d, "contains a path: give only the host name, optionally with :port"
		}
		if reason := checkAddr(pfx.Addr(), bracketed); reason != "" {
			return d, reason
		}
		if pfx.Masked() != pfx {
			return d, fmt.Sprintf("host bits are set; did you mean %s?", pfx.Masked())
		}
		d.Kind, d.Prefix = Prefix, pfx
		return d, ""
	}
	if strings.ContainsAny(host, ":") || bracketed || looksNumeric(host) {
		addr, err := netip.ParseAddr(host)
		if err != nil {
			return d, "not a valid IP address"
		}
		if reason := checkAddr(addr, bracketed); reason != "" {
			return d, reason
		}
		if addr.IsUnspecified() {
			return d, "the unspecified address (0.0.0.0, ::) is not a destination; a range is written as a CIDR such as 10.0.0.0/8"
		}
		d.Kind, d.Prefix = Prefix, netip.PrefixFrom(addr, addr.BitLen())
		return d, ""
	}
	if host == "*" {
		return d, "a bare \"*\" would allow every host: list the hosts you need, or use presets"
	}
	if rest, ok := strings.CutPrefix(host, "*."); ok {
		if !strings.Contains(strings.TrimSuffix(rest, "."), ".") {
			return d, "a wildcard needs at least two labels after \"*.\" (\"*.example.com\", not \"*.com\")"
		}
		name, reason := canonicalName(rest)
		if reason != "" {
			return d, "after \"*.\": " + reason
		}
		d.Kind, d.Name = Wildcard, name
		return d, ""
	}
	if strings.Contains(host, "*") {
		return d, "a wildcard is only allowed as the whole first label, as in \"*.example.com\""
	}
	name, reason := canonicalName(host)
	if reason != "" {
		return d, reason
	}
	d.Kind, d.Name = Host, name
	return d, ""
}

// splitPort splits an optional ":port" off s. IPv6 literals need brackets
// to carry a port; an unbracketed string with two or more colons is an IPv6
// address (or CIDR) with no port.
func splitPort(s string) (host string, port uint16, reason string) {
	if strings.HasPrefix(s, "[") {
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return "", 0, "missing \"]\" after a bracketed IPv6 address"
		}
		host, rest := s[:end+1], s[end+1:]
		if rest == "" {
			return host, 0, ""
		}
		if rest[0] != ':' {
			return "", 0, "unexpected text after \"]\"; a port is written [2001:db8::1]:443"
		}
		p, reason := parsePort(rest[1:])
		return host, p, reason
	}
	if strings.Count(s, ":") >= 2 {
		return s, 0, ""
	}
	host, ps, ok := strings.Cut(s, ":")
	if !ok {
		return s, 0, ""
	}
	p, reason := parsePort(ps)
	return host, p, reason
}

func parsePort(s string) (uint16, string) {
	if s == "" {
		return 0, "empty port after \":\""
	}
	for _, c := range []byte(s) {
		if c < '0' || c > '9' {
			return 0, fmt.Sprintf("port %q is not a decimal number", s)
		}
	}
	if len(s) > 1 && s[0] == '0' {
		return 0, fmt.Sprintf("port %q has a leading zero", s)
	}
	n, err := strconv.ParseUint(s, 10, 32)
	if err != nil || n < 1 || n > 65535 {
		return 0, fmt.Sprintf("port %s is out of range 1..65535", s)
	}
	return uint16(n), ""
}

func checkAddr(a netip.Addr, bracketed bool) string {
	switch {
	case a.Zone() != "":
		return "an IPv6 zone (%…) is not allowed"
	case a.Is4In6():
		return fmt.Sprintf("IPv4-mapped IPv6 address: write the IPv4 address %s", a.Unmap())
	case bracketed && a.Is4():
		return "brackets are only for IPv6 addresses"
	}
	return ""
}

// looksNumeric reports whether the last label is all digits, which would
// make a "host name" read as an IPv4 address in inet_aton forms ("1.2.3").
func looksNumeric(host string) bool {
	last := host[strings.LastIndexByte(host, '.')+1:]
	if last == "" {
		return false
	}
	for _, c := range []byte(last) {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// canonicalName validates an RFC 1123 host name and returns it lower-cased
// with one trailing dot stripped. Single-label names ("localhost",
// "intranet") are rejected: loopback is always allowed, and a single label
// is resolved through the resolver's search list, so it never names one
// host.
func canonicalName(s string) (string, string) {
	s = strings.TrimSuffix(s, ".")
	if s == "" {
		return "", "empty host name"
	}
	if len(s) > maxNameLen {
		return "", fmt.Sprintf("host name is %d characters long; the limit is %d", len(s), maxNameLen)
	}
	labels := strings.Split(s, ".")
	if len(labels) < 2 {
		return "", "a host name needs at least two labels (single-label names depend on the resolver's search list; loopback is always allowed)"
	}
	for i, l := range labels {
		if r := checkLabel(l, i); r != "" {
			return "", r
		}
	}
	if looksNumeric(s) {
		return "", "the last label of a host name cannot be all digits (it would read as an IPv4 address)"
	}
	return strings.ToLower(s), ""
}

func checkLabel(l string, i int) string {
	switch {
	case l == "":
		return fmt.Sprintf("empty label (label %d; two dots in a row?)", i+1)
	case len(l) > maxLabelLen:
		return fmt.Sprintf("label %d is %d characters long; the limit is %d", i+1, len(l), maxLabelLen)
	case l[0] == '-' || l[len(l)-1] == '-':
		return fmt.Sprintf("label %d starts or ends with a hyphen", i+1)
	}
	for _, c := range []byte(l) {
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '-':
		case c == '*':
			return "a wildcard is only allowed as the whole first label, as in \"*.example.com\""
		default:
			return fmt.Sprintf("character %q is not allowed in a host name (letters, digits and hyphens only)", c)
		}
	}
	return ""
}

// String returns the canonical form, which ParseDestination parses back to
// the same Destination: lower-case names, "*." for wildcards, IP literals
// without "/32" or "/128", brackets around IPv6 when a port follows.
func (d Destination) String() string {
	var host string
	switch d.Kind {
	case Host:
		host = d.Name
	case Wildcard:
		host = "*." + d.Name
	case Prefix:
		if d.Prefix.IsSingleIP() {
			host = d.Prefix.Addr().String()
		} else {
			host = d.Prefix.String()
		}
		if d.Port != 0 && d.Prefix.Addr().Is6() {
			host = "[" + host + "]"
		}
	default:
		return fmt.Sprintf("<invalid destination kind %d>", int(d.Kind))
	}
	if d.Port != 0 {
		return host + ":" + strconv.Itoa(int(d.Port))
	}
	return host
}

// MarshalText implements encoding.TextMarshaler with the canonical form.
func (d Destination) MarshalText() ([]byte, error) {
	if d.Kind < Host || d.Kind > Prefix {
		return nil, fmt.Errorf("policy: cannot marshal a destination of kind %d", int(d.Kind))
	}
	return []byte(d.String()), nil
}

// UnmarshalText implements encoding.TextUnmarshaler with ParseDestination.
func (d *Destination) UnmarshalText(b []byte) error {
	v, err := ParseDestination(string(b))
	if err != nil {
		return err
	}
	*d = v
	return nil
}

// matchCanonical reports whether the canonical name n is covered by d,
// ignoring the port; covers uses it to find allow entries a deny makes
// useless. Deciding queries is the firewall's job (firewall.Config.Match).
func (d Destination) matchCanonical(n string) bool {
	switch d.Kind {
	case Host:
		return n == d.Name
	case Wildcard:
		return len(n) > len(d.Name)+1 && strings.HasSuffix(n, d.Name) && n[len(n)-len(d.Name)-1] == '.'
	}
	return false
}

// covers reports whether every connection d allows is also allowed by c
// (so a deny c makes an allow d useless).
func (c Destination) covers(d Destination) bool {
	if c.Port != 0 && c.Port != d.Port {
		return false
	}
	switch c.Kind {
	case Host:
		return d.Kind == Host && d.Name == c.Name
	case Wildcard:
		switch d.Kind {
		case Host:
			return c.matchCanonical(d.Name)
		case Wildcard:
			return d.Name == c.Name || c.matchCanonical(d.Name)
		}
	case Prefix:
		return d.Kind == Prefix && c.Prefix.Addr().Is4() == d.Prefix.Addr().Is4() &&
			c.Prefix.Bits() <= d.Prefix.Bits() && c.Prefix.Contains(d.Prefix.Addr())
	}
	return false
}

// compare orders destinations canonically: kind, then name or prefix, then
// port.
func (d Destination) compare(e Destination) int {
	if d.Kind != e.Kind {
		return int(d.Kind) - int(e.Kind)
	}
	if c := strings.Compare(d.Name, e.Name); c != 0 {
		return c
	}
	if c := d.Prefix.Addr().Compare(e.Prefix.Addr()); c != 0 {
		return c
	}
	if d.Prefix.Bits() != e.Prefix.Bits() {
		return d.Prefix.Bits() - e.Prefix.Bits()
	}
	return int(d.Port) - int(e.Port)
}

// Covers reports whether every connection d allows is also allowed by c: the
// same or a wider name (a wildcard covers its subdomains and narrower
// wildcards), the same or a wider prefix of the same family, and c's port is
// 0 (any) or d's. It is what "d lies within c" means for a baseline.
func (c Destination) Covers(d Destination) bool { return c.covers(d) }
