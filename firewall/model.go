package firewall

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/devbox-dev/devbox/internal/layout"
)

// This file decides what the compiled fence does with one connection, from
// the same data the kernel is given: the rule lines Rules compiles, the
// static set members staticEntries computes, and the members the DNS filter
// writes for each answer (answerMembers). Decide interprets those rules the
// way netfilter runs them — nat OUTPUT, then filter OUTPUT, with the owner,
// set, mark and port matches — and the name gate's decision (gateVerdict)
// for what the nat table redirects to it. TestModelAgreesWithKernel checks
// it against the real rules in a network namespace; internal/baseline
// decides containment with it.

// IP protocol numbers, as the sets store them (the same on every system).
const (
	protoTCP = 6
	protoUDP = 17
)

// entry is one set member: a prefix, and for the port sets a protocol and port.
type entry struct {
	prefix netip.Prefix
	proto  uint8 // protoTCP / protoUDP, 0 for hash:net
	port   uint16
}

func (e entry) String() string {
	if e.proto == 0 {
		return e.prefix.String()
	}
	proto := "tcp"
	if e.proto == protoUDP {
		proto = "udp"
	}
	return fmt.Sprintf("%s,%s:%d", e.prefix, proto, e.port)
}

// portEntries expands a prefix with a port into its TCP and UDP members.
func portEntries(p netip.Prefix, port uint16) []entry {
	return []entry{{p, protoTCP, port}, {p, protoUDP, port}}
}

// staticEntries sorts the Config's prefixes into the sets they belong to.
func staticEntries(cfg Config) map[string][]entry {
	out := map[string][]entry{}
	put := func(kindAny, kindPort string, ds []Destination) {
		for _, d := range ds {
			if !d.Prefix.IsValid() {
				continue
			}
			p := d.Prefix.Masked()
			f := familyOf(p.Addr())
			if d.Port == 0 {
				out[SetName(kindAny, f)] = append(out[SetName(kindAny, f)], entry{prefix: p})
			} else {
				out[SetName(kindPort, f)] = append(out[SetName(kindPort, f)], portEntries(p, d.Port)...)
			}
		}
	}
	put(SetAllow, SetAllowPort, cfg.Allow)
	put(SetDeny, SetDenyPort, cfg.Deny)
	return out
}

// member is one set member the DNS filter writes.
type member struct {
	set string
	e   entry
}

// answerMembers is what the DNS filter writes for address a of an answer
// to a name with verdict v, in the order it writes them: protection first
// (no moment has a protected address allowed but not protected), then the
// deny ports (if writing them fails nothing of a is allowed yet), then the
// allows.
func answerMembers(a netip.Addr, v Verdict) []member {
	a = a.Unmap()
	fam := familyOf(a)
	p := netip.PrefixFrom(a, a.BitLen())
	var ms []member
	if v.Protected {
		ms = append(ms, member{SetName(SetProtect, fam), entry{prefix: p}})
	}
	for _, port := range v.DenyPorts {
		for _, e := range portEntries(p, port) {
			ms = append(ms, member{SetName(SetDenyPort, fam), e})
		}
	}
	if v.AnyPort {
		ms = append(ms, member{SetName(SetNamed, fam), entry{prefix: p}})
	}
	for _, port := range v.Ports {
		for _, e := range portEntries(p, port) {
			ms = append(ms, member{SetName(SetNamedPort, fam), e})
		}
	}
	return ms
}

// Answers is what upstream DNS says: each name's addresses. The model
// passes them through the DNS filter (Match, AddressVerdict), as the
// daemon does, to fill the sets and the gate's bindings.
type Answers map[string][]netip.Addr

// Packet is the first packet of one outbound connection (TCP) or flow (UDP).
type Packet struct {
	// UID is the sending socket's owner.
	UID   int
	Proto string // "tcp" or "udp"
	Dst   netip.AddrPort
	// Name is the TLS SNI or HTTP Host the client sends first ("" none):
	// what the name gate reads.
	Name string
}

func (p Packet) String() string {
	s := fmt.Sprintf("uid %d %s %s", p.UID, p.Proto, p.Dst)
	if p.Name != "" {
		s += " name " + p.Name
	}
	return s
}

// Decision is what the fence does with a Packet.
type Decision struct {
	// Out is true when the packet leaves for its destination (through the
	// name gate's splice when Gate says so).
	Out bool
	// Gate is true when the nat table sent the connection to the name gate.
	Gate bool
	// Reason names where it was stopped: a chain ("DEVBOX-PROTECT",
	// "DEVBOX-DENIED", "DEVBOX-BLOCKED", "DEVBOX-UDP-GATED"), a gate
	// reason ("gate:sni-mismatch"), or "dns" for port 53, which goes to
	// the DNS filter and never out as such.
	Reason string
}

// Model is a compiled fence and what its DNS filter learnt: build it once
// with NewModel, then Decide any number of packets.
type Model struct {
	cfg     Config
	chains  map[string]map[string][]compiledRule // table → chain → rules
	members map[string]map[entry]bool            // set name → members
	bound   map[netip.Addr][]string              // address → names whose answers carried it
	// refusedIn is scratch space for Decide: a Model is not safe for
	// concurrent use.
	refusedIn string
}

// NewModel compiles cfg (Rules, staticEntries) and passes answers through
// the filter's decisions into the sets. It fails on a rule the model
// cannot read, so a rule added to Rules without a model is noticed.
func NewModel(cfg Config, answers Answers) (*Model, error) {
	cfg = cfg.WithDefaults()
	m := &Model{cfg: cfg, chains: map[string]map[string][]compiledRule{}, members: map[string]map[entry]bool{}, bound: map[netip.Addr][]string{}}
	for _, rs := range Rules(cfg) {
		for _, t := range rs.tables {
			if m.chains[t.name] == nil {
				m.chains[t.name] = map[string][]compiledRule{}
			}
			for _, line := range t.rules {
				r, err := parseRule(line)
				if err != nil {
					return nil, fmt.Errorf("firewall model: %s: %w", line, err)
				}
				r.family = rs.Family
				m.chains[t.name][r.chain] = append(m.chains[t.name][r.chain], r)
			}
		}
	}
	add := func(set string, e entry) {
		if m.members[set] == nil {
			m.members[set] = map[entry]bool{}
		}
		m.members[set][e] = true
	}
	for set, es := range staticEntries(cfg) {
		for _, e := range es {
			add(set, e)
		}
	}
	names := make([]string, 0, len(answers))
	for n := range answers {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		v := cfg.Match(n)
		if !v.Allowed {
			continue // refused: nothing written
		}
		for _, a := range answers[n] {
			if cfg.AddressVerdict(a) != "" {
				continue // dropped from the answer
			}
			a = a.Unmap()
			m.bound[a] = append(m.bound[a], strings.ToLower(strings.TrimSuffix(n, ".")))
			for _, mb := range answerMembers(a, v) {
				add(mb.set, mb.e)
			}
		}
	}
	return m, nil
}

// Decide runs p through the compiled rules: nat OUTPUT (devbox's gate and
// DNS chains come first there), then filter OUTPUT; a connection the nat
// table redirects to the gate is decided by the gate, whose own connection
// (as the gate's uid) then goes through the rules again.
func (m *Model) Decide(p Packet) Decision {
	p.Dst = netip.AddrPortFrom(p.Dst.Addr().Unmap(), p.Dst.Port())
	if p.Dst.Port() == 53 {
		return Decision{Reason: "dns"}
	}
	// The jumps are inserted at the top of nat OUTPUT one after the other,
	// so the last inserted (DEVBOX-GATE) runs first.
	redirect := uint16(0)
	for _, chain := range []string{ChainGate, ChainDNS} {
		v, port := m.run("nat", chain, p, 0)
		if v == verdictRedirect {
			redirect = port
			break
		}
	}
	if redirect == 0 {
		v, reason := m.filter(p)
		return Decision{Out: v == verdictAccept, Reason: reason}
	}
	// Redirected to loopback: the filter table accepts loopback, so the
	// local daemon on that port decides.
	if redirect != m.cfg.GatePort {
		return Decision{Reason: "dns"}
	}
	kind := streamHTTP
	if p.Name == "" {
		kind = streamTLS
	}
	if why := m.cfg.gateVerdict(kind, p.Name, false, p.Dst.Port(), m.bound[p.Dst.Addr()]); why != "" {
		return Decision{Gate: true, Reason: "gate:" + why}
	}
	spliced := p
	spliced.UID = layout.GateUID
	d := m.Decide(spliced)
	d.Gate = true
	return d
}

func (m *Model) filter(p Packet) (verdict, string) {
	v, _ := m.run("filter", ChainOutput, p, 0)
	if v == verdictAccept {
		return v, ""
	}
	return v, m.refusedIn
}

type verdict int

const (
	verdictNone verdict = iota // fell off the chain (or RETURN)
	verdictAccept
	verdictRefuse
	verdictRedirect
)

// run evaluates one chain; for a refusal it records in m.refusedIn the
// first of devbox's refusing chains the packet entered.
func (m *Model) run(table, chain string, p Packet, depth int) (verdict, uint16) {
	if depth == 0 {
		m.refusedIn = ""
	}
	if depth > 8 {
		panic("firewall model: chain loop at " + chain)
	}
	switch chain {
	case ChainProtect, ChainDenied, ChainBlocked, ChainUDPGated:
		if m.refusedIn == "" {
			m.refusedIn = chain
		}
	}
	for _, r := range m.chains[table][chain] {
		if familyOf(p.Dst.Addr()) != r.family || !m.matches(r, p) {
			continue
		}
		switch r.target {
		case "ACCEPT":
			return verdictAccept, 0
		case "DROP", "REJECT":
			return verdictRefuse, 0
		case "RETURN":
			return verdictNone, 0
		case "NFLOG":
			continue
		case "REDIRECT":
			return verdictRedirect, r.toPort
		default:
			if v, port := m.run(table, r.target, p, depth+1); v != verdictNone {
				return v, port
			}
		}
	}
	if depth == 0 && table == "filter" {
		return verdictRefuse, 0 // the built-in chain's policy: DROP
	}
	return verdictNone, 0
}

func (m *Model) matches(r compiledRule, p Packet) bool {
	if r.inLo || r.icmp6 || r.established || r.hasMark && !r.markNeg {
		// Input, ICMPv6, established flows and the DNS filter's marked
		// queries: never a new connection from an unmarked socket.
		return false
	}
	if r.proto != "" && r.proto != p.Proto {
		return false
	}
	a := p.Dst.Addr()
	if r.outLo && !a.IsLoopback() {
		return false
	}
	if r.dst.IsValid() && !r.dst.Contains(a) {
		return false
	}
	if r.dport != 0 && r.dport != p.Dst.Port() {
		return false
	}
	if r.notLocal && a.IsLoopback() {
		return false
	}
	if r.hasOwner && (p.UID == r.owner) == r.ownerNeg {
		return false
	}
	if r.set != "" && !m.inSet(r.set, r.setPort, p) {
		return false
	}
	return true
}

// inSet is the kernel's set lookup: hash:net matches any member prefix
// holding the address; hash:net,port also the protocol and port.
func (m *Model) inSet(set string, withPort bool, p Packet) bool {
	a := p.Dst.Addr()
	for e := range m.members[set] {
		if !e.prefix.Contains(a) {
			continue
		}
		if !withPort {
			return true
		}
		proto := uint8(protoTCP)
		if p.Proto == "udp" {
			proto = protoUDP
		}
		if e.proto == proto && e.port == p.Dst.Port() {
			return true
		}
	}
	return false
}

// compiledRule is one rule line Rules emits, read back.
type compiledRule struct {
	family        Family
	chain, target string
	proto         string
	set           string
	setPort       bool
	hasOwner      bool
	owner         int
	ownerNeg      bool
	hasMark       bool
	markNeg       bool
	dst           netip.Prefix
	outLo, inLo   bool
	established   bool
	dport         uint16
	notLocal      bool
	icmp6         bool
	toPort        uint16
}

// parseRule reads one "-A CHAIN …" line of the forms Rules writes; any
// other option is an error.
func parseRule(line string) (compiledRule, error) {
	var r compiledRule
	f := strings.Fields(line)
	neg := false
	next := func(i *int) (string, error) {
		*i++
		if *i >= len(f) {
			return "", fmt.Errorf("%s wants a value", f[*i-1])
		}
		return f[*i], nil
	}
	for i := 0; i < len(f); i++ {
		tok := f[i]
		var val string
		var err error
		switch tok {
		case "!":
			neg = true
			continue
		case "-A", "-p", "-j", "-d", "-o", "-i", "--match-set", "--uid-owner", "--mark", "--ctstate", "--dport",
			"--dst-type", "--to-ports", "--reject-with", "--nflog-prefix", "--nflog-group", "--limit", "--limit-burst", "--icmpv6-type", "-m":
			if val, err = next(&i); err != nil {
				return r, err
			}
		default:
			return r, fmt.Errorf("unknown option %q", tok)
		}
		switch tok {
		case "-A":
			r.chain = val
		case "-p":
			r.proto = val
			r.icmp6 = val == "ipv6-icmp"
		case "-j":
			r.target = val
		case "-d":
			if r.dst, err = netip.ParsePrefix(val); err != nil {
				return r, err
			}
		case "-o", "-i":
			if val != "lo" {
				return r, fmt.Errorf("interface %q", val)
			}
			r.outLo, r.inLo = tok == "-o", tok == "-i"
		case "--match-set":
			dir, err := next(&i)
			if err != nil {
				return r, err
			}
			r.set, r.setPort = val, dir == "dst,dst"
			if dir != "dst" && dir != "dst,dst" {
				return r, fmt.Errorf("set direction %q", dir)
			}
		case "--uid-owner":
			if r.owner, err = strconv.Atoi(val); err != nil {
				return r, err
			}
			r.hasOwner, r.ownerNeg = true, neg
		case "--mark":
			r.hasMark, r.markNeg = true, neg
		case "--ctstate":
			r.established = true
		case "--dport":
			if r.dport, err = parsePort(val); err != nil {
				return r, err
			}
		case "--dst-type":
			if val != "LOCAL" || !neg {
				return r, fmt.Errorf("addrtype %q", val)
			}
			r.notLocal = true
		case "--to-ports":
			if r.toPort, err = parsePort(val); err != nil {
				return r, err
			}
		case "-m":
			switch val {
			case "set", "owner", "mark", "conntrack", "tcp", "udp", "icmp6", "addrtype", "limit":
			default:
				return r, fmt.Errorf("match module %q", val)
			}
		}
		if neg && tok != "--uid-owner" && tok != "--mark" && tok != "--dst-type" {
			return r, fmt.Errorf("negated %s", tok)
		}
		neg = false
	}
	if r.chain == "" || r.target == "" {
		return r, fmt.Errorf("no chain or target")
	}
	return r, nil
}

// parsePort reads a port number of an iptables rule.
func parsePort(val string) (uint16, error) {
	n, err := strconv.ParseUint(val, 10, 16)
	return uint16(n), err
}
