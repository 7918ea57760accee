package firewall

import (
	"net"
	"net/netip"
	"strconv"
	"strings"
)

// gateAddr is where the gate answers health queries.
func gateAddr(cfg Config) string {
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(int(cfg.WithDefaults().GatePort)))
}

// Reasons the name gate refuses a connection, as logged.
const (
	// GateNoSNI: a TLS ClientHello without a server name.
	GateNoSNI = "no-sni"
	// GateECH: an Encrypted Client Hello whose outer name would be refused.
	GateECH = "ech"
	// GateNotAllowed: the requested name is not allowed on that port.
	GateNotAllowed = "not-allowed"
	// GateSNIMismatch: the SNI is allowed, but the filter never returned
	// the destination for a name of the same allow entry.
	GateSNIMismatch = "sni-mismatch"
	// GateHostMismatch: the same for an HTTP Host (or no Host at all).
	GateHostMismatch = "host-mismatch"
	// GateNoName: the first bytes are neither a TLS ClientHello nor an
	// HTTP/1.x request (or none came before the deadline).
	GateNoName = "no-name"
)

// Kinds of stream the gate recognizes.
const (
	streamTLS  = "tls"
	streamHTTP = "http"
)

// gateVerdict decides one connection: kind and name are what the first
// bytes said (the SNI or Host), ech whether the ClientHello carried the
// encrypted_client_hello extension, port the original destination's port
// and bound the names whose answers carried the original destination. It
// returns "" to pass, else the refusal reason.
//
// A name passes when an allow entry matches it on that port (deny entries
// still win) and the same entry matches one of the bound names: an allowed
// name cannot be sent to an address that only another allowed name (or
// none) resolved to.
func (c Config) gateVerdict(kind, name string, ech bool, port uint16, bound []string) string {
	mismatch := GateSNIMismatch
	switch kind {
	case streamTLS:
		if name == "" {
			if ech {
				return GateECH
			}
			return GateNoSNI
		}
	case streamHTTP:
		mismatch = GateHostMismatch
		if name == "" {
			return GateHostMismatch
		}
	default:
		return GateNoName
	}
	fail := func(reason string) string {
		if ech {
			return GateECH
		}
		return reason
	}
	v := c.Match(name)
	if !v.Allowed || (!v.AnyPort && !hasPort(v.Ports, port)) || hasPort(v.DenyPorts, port) {
		return fail(GateNotAllowed)
	}
	name = strings.ToLower(name)
	for _, d := range c.Allow {
		if !d.matchesName(name) || (d.Port != 0 && d.Port != port) {
			continue
		}
		for _, b := range bound {
			if d.matchesName(b) {
				return ""
			}
		}
	}
	return fail(mismatch)
}

// staticAllows reports whether a static allow entry covers a on port:
// such an address keeps the direct path, outside the gate.
func (c Config) staticAllows(a netip.Addr, port uint16) bool {
	for _, d := range c.Allow {
		if d.Prefix.IsValid() && d.Prefix.Contains(a) && (d.Port == 0 || d.Port == port) {
			return true
		}
	}
	return false
}

func hasPort(ps []uint16, p uint16) bool {
	for _, q := range ps {
		if q == p {
			return true
		}
	}
	return false
}

// hostName returns the name of an HTTP Host header value: the port and a
// trailing dot dropped, lower case; "" for an IP literal or nothing.
func hostName(host string) string {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if net.ParseIP(strings.Trim(host, "[]")) != nil {
		return ""
	}
	return host
}

// GateHealth is the gate's answer to a health query.
type GateHealth struct {
	PID int `json:"pid"`
	// Accepted counts connections redirected to the gate; Passed those it
	// spliced to their destination; Refused those it refused (by reason in
	// Reasons); Active those open now; DialErrors those whose destination
	// did not answer.
	Accepted   int64            `json:"accepted"`
	Passed     int64            `json:"passed"`
	Refused    int64            `json:"refused"`
	Active     int64            `json:"active"`
	DialErrors int64            `json:"dialErrors"`
	Reasons    map[string]int64 `json:"reasons,omitempty"`
}

// GateStatus is the gate's state in Status.
type GateStatus struct {
	Enabled bool        `json:"enabled"`
	PID     int         `json:"pid,omitempty"`
	Running bool        `json:"running"`
	Health  *GateHealth `json:"health,omitempty"`
	Error   string      `json:"error,omitempty"`
}
