package firewall

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/devbox-dev/devbox/internal/layout"
)

// Chains and sets devbox owns. Nothing outside these names is ever flushed
// or reordered: Docker's embedded-DNS rules (nat OUTPUT → DOCKER_OUTPUT,
// DOCKER_POSTROUTING) keep working because only one jump per built-in chain
// is added, at the top.
const (
	ChainInput   = "DEVBOX-INPUT"
	ChainOutput  = "DEVBOX-OUTPUT"
	ChainDenied  = "DEVBOX-DENIED"
	ChainBlocked = "DEVBOX-BLOCKED"
	ChainReject  = "DEVBOX-REJECT"
	ChainDNS     = "DEVBOX-DNS"
	// ChainGate (nat) redirects TCP to name-derived addresses into the
	// name gate; ChainUDPGated (filter) logs and rejects UDP to them.
	ChainGate = "DEVBOX-GATE"
	// ChainProtect passes the credential gateway's connections to
	// protected addresses and refuses everyone else's.
	ChainProtect  = "DEVBOX-PROTECT"
	ChainUDPGated = "DEVBOX-UDP-GATED"

	// Log prefixes carried by NFLOG; the reader maps them to reasons.
	prefixDenied     = "devbox:denied"
	prefixNotAllowed = "devbox:not-allowed"
	prefixUDPGated   = "devbox:udp-gated"
)

func familyOf(a netip.Addr) Family {
	if a.Is4() {
		return IPv4
	}
	return IPv6
}

// Family is an IP family: the rules and sets exist once per family.
type Family int

const (
	IPv4 Family = 4
	IPv6 Family = 6
)

// Families lists both, in the order they are applied.
var Families = []Family{IPv4, IPv6}

func (f Family) String() string { return fmt.Sprintf("ipv%d", int(f)) }

// Set kinds. Their kernel names are SetName(kind, family). The allow sets
// come in two pairs: the policy's static prefixes, and the addresses the
// DNS filter learnt from an allowed name's answer (with timeouts). Only
// the second pair is behind the name gate.
const (
	SetAllow     = "allow"    // hash:net: static prefixes, any port
	SetAllowPort = "port"     // hash:net,port: static prefixes with a port
	SetNamed     = "name"     // hash:net, with timeouts: a name's addresses, any port
	SetNamedPort = "nameport" // hash:net,port, with timeouts
	SetDeny      = "deny"     // hash:net: never reachable
	SetDenyPort  = "denyport" // hash:net,port
	// SetProtect holds the addresses of protected names (Config.Protect):
	// only Config.ProtectUID may connect to them. Its entries never expire,
	// so an address is never allowed without being protected.
	SetProtect = "protect" // hash:net
)

// SetKinds lists every set kind.
var SetKinds = []string{SetAllow, SetAllowPort, SetNamed, SetNamedPort, SetDeny, SetDenyPort, SetProtect}

// SetName is the kernel name of one set ("devbox-allow4").
func SetName(kind string, f Family) string { return fmt.Sprintf("devbox-%s%d", kind, int(f)) }

func setType(kind string) string {
	if kind == SetAllowPort || kind == SetNamedPort || kind == SetDenyPort {
		return "hash:net,port"
	}
	return "hash:net"
}

// Jump is a rule in a built-in chain that sends packets into one of
// devbox's chains. Apply inserts it only when it is missing, so re-applying
// never duplicates it.
type Jump struct{ Table, Chain, Target string }

// Rule renders the jump in iptables syntax, without the -I/-A verb.
func (j Jump) Rule() []string { return []string{"-j", j.Target} }

// Ruleset is one family's compiled rules.
type Ruleset struct {
	Family Family
	Jumps  []Jump
	// tables maps table name → rule lines (iptables-restore syntax) in
	// devbox's own chains, in table order filter, nat.
	tables []table
}

type table struct {
	name   string
	policy []string // ":CHAIN POLICY" lines for built-in chains
	chains []string
	rules  []string
}

// Rules compiles cfg into the IPv4 and IPv6 rulesets. It is pure: the same
// Config always gives the same text.
func Rules(cfg Config) []Ruleset {
	cfg = cfg.WithDefaults()
	var out []Ruleset
	for _, f := range Families {
		out = append(out, rules(cfg, f))
	}
	return out
}

func rules(cfg Config, f Family) Ruleset {
	mark := fmt.Sprintf("0x%x", cfg.Mark)
	reject, nd := "icmp-admin-prohibited", []string(nil)
	if f == IPv6 {
		reject = "icmp6-adm-prohibited"
		// Neighbour discovery is IPv6's ARP: without it no IPv6 packet, not
		// even an allowed one, finds the next hop.
		for _, t := range []string{"router-solicitation", "router-advertisement", "neighbour-solicitation", "neighbour-advertisement"} {
			nd = append(nd, "-p ipv6-icmp -m icmp6 --icmpv6-type "+t+" -j ACCEPT")
		}
		// MLDv2 reports the kernel sends when an interface comes up: link
		// scope, they cannot leave the link.
		nd = append(nd, "-d ff02::/16 -p ipv6-icmp -m icmp6 --icmpv6-type 143 -j ACCEPT")
	}
	set := func(kind string) string { return SetName(kind, f) }

	filter := table{
		name:   "filter",
		policy: []string{":INPUT DROP [0:0]", ":FORWARD DROP [0:0]", ":OUTPUT DROP [0:0]"},
		chains: []string{ChainInput, ChainOutput, ChainDenied, ChainBlocked, ChainUDPGated, ChainReject},
	}
	add := func(chain string, specs ...string) {
		for _, s := range specs {
			filter.rules = append(filter.rules, "-A "+chain+" "+s)
		}
	}
	add(ChainInput, "-i lo -j ACCEPT", "-m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT")
	add(ChainInput, nd...)
	add(ChainInput, "-j DROP")

	// dockerd's forwards, when the filter's upstream is Docker's embedded
	// DNS: accepted before the unmarked-DNS block below (see dockerForwards).
	dockerDNS := dockerForwards(cfg, f)
	for _, d := range dockerDNS {
		add(ChainOutput, d+" -j ACCEPT")
	}
	// DNS that was not redirected and is not the filter's own: a packet
	// that reuses the 5-tuple of one of the filter's upstream flows matches
	// that flow's conntrack entry, skips the nat table and would pass as
	// ESTABLISHED. It is stopped here, before any accept.
	for _, d := range dnsPorts(cfg, f) {
		add(ChainOutput, d+" -m mark ! --mark "+mark+" -j "+ChainBlocked)
	}
	if f == IPv4 {
		// Docker's embedded resolver listens on 127.0.0.11 at a random
		// port behind its own DNAT; reaching that port directly would be an
		// unfiltered DNS path out. Only the filter's marked queries may.
		add(ChainOutput, "-d 127.0.0.11/32 -m mark ! --mark "+mark+" -j "+ChainBlocked)
	}
	// The OUTPUT hooks see the interface chosen before the nat table's
	// REDIRECT rerouted a DNS packet to loopback, so "-o lo" alone misses
	// it: loopback destinations are accepted by address too.
	loopback := "127.0.0.0/8"
	if f == IPv6 {
		loopback = "::1/128"
	}
	add(ChainOutput, "-o lo -j ACCEPT", "-d "+loopback+" -j ACCEPT", "-m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT")
	add(ChainOutput, nd...)
	// Only the DNS filter can set this mark (SO_MARK needs CAP_NET_ADMIN):
	// its upstream queries are the one way out on port 53.
	for _, d := range dnsPorts(cfg, f) {
		add(ChainOutput, d+" -m mark --mark "+mark+" -j ACCEPT")
	}
	if len(cfg.Protect) > 0 {
		// Protected hosts (the credential gateway's): only the gateway's
		// uid may connect, so no identity but the user's is used there.
		// Checked before any allow; the owner match compares the socket's
		// kernel uid, which the agent cannot change. Behind the name gate
		// the gateway's connections are spliced by the gate, so its uid
		// passes too; the nat table never sends anyone else's connection
		// to a protected address into the gate (see ChainGate below).
		filter.chains = append(filter.chains, ChainProtect)
		add(ChainOutput, fmt.Sprintf("-m set --match-set %s dst -j %s", set(SetProtect), ChainProtect))
		add(ChainProtect, fmt.Sprintf("-m owner --uid-owner %d -j RETURN", cfg.ProtectUID))
		if cfg.Gate {
			add(ChainProtect, fmt.Sprintf("-m owner --uid-owner %d -j RETURN", layout.GateUID))
		}
		add(ChainProtect, "-j "+ChainDenied)
	}
	add(ChainOutput,
		// Deny wins: it is checked before any allow set.
		"-m set --match-set "+set(SetDeny)+" dst -j "+ChainDenied,
		"-p tcp -m set --match-set "+set(SetDenyPort)+" dst,dst -j "+ChainDenied,
		"-p udp -m set --match-set "+set(SetDenyPort)+" dst,dst -j "+ChainDenied,
		// Allowed destinations are TCP and UDP only: no ICMP tunnel.
		"-p tcp -m set --match-set "+set(SetAllow)+" dst -j ACCEPT",
		"-p udp -m set --match-set "+set(SetAllow)+" dst -j ACCEPT",
		"-p tcp -m set --match-set "+set(SetAllowPort)+" dst,dst -j ACCEPT",
		"-p udp -m set --match-set "+set(SetAllowPort)+" dst,dst -j ACCEPT",
	)
	named := []string{"-m set --match-set " + set(SetNamed) + " dst", "-m set --match-set " + set(SetNamedPort) + " dst,dst"}
	for _, m := range named {
		if !cfg.Gate {
			add(ChainOutput, "-p tcp "+m+" -j ACCEPT", "-p udp "+m+" -j ACCEPT")
			continue
		}
		// Behind the gate, TCP to a name's address reaches this chain
		// unredirected only from the gate itself (the nat table sent
		// everyone else's to the gate's port on loopback, accepted above).
		add(ChainOutput, fmt.Sprintf("-p tcp %s -m owner --uid-owner %d -j ACCEPT", m, layout.GateUID))
		if cfg.QUIC {
			add(ChainOutput, "-p udp "+m+" -j ACCEPT")
		} else {
			// QUIC would carry its name where the gate cannot see it:
			// closed, so clients fall back to TCP.
			add(ChainOutput, "-p udp "+m+" -j "+ChainUDPGated)
		}
	}
	add(ChainOutput, "-j "+ChainBlocked)
	for _, c := range []struct{ chain, prefix string }{{ChainDenied, prefixDenied}, {ChainBlocked, prefixNotAllowed}, {ChainUDPGated, prefixUDPGated}} {
		if cfg.Log {
			// Rate-limited so a busy loop of blocked connects cannot flood
			// the log reader.
			add(c.chain, fmt.Sprintf("-m limit --limit 20/sec --limit-burst 50 -j NFLOG --nflog-prefix %s --nflog-group %d", c.prefix, cfg.LogGroup))
		}
		add(c.chain, "-j "+ChainReject)
	}
	// Fast failure: a reset or an ICMP error, not a silent timeout.
	add(ChainReject, "-p tcp -j REJECT --reject-with tcp-reset", "-j REJECT --reject-with "+reject)

	nat := table{name: "nat", chains: []string{ChainDNS, ChainGate}}
	nat.rules = []string{
		// The filter's own queries skip the redirect, so they reach the real
		// upstream, Docker's 127.0.0.11 (DNATed by Docker's own rules after
		// this chain) included.
		"-A " + ChainDNS + " -m mark --mark " + mark + " -j RETURN",
	}
	for _, d := range dockerDNS {
		nat.rules = append(nat.rules, "-A "+ChainDNS+" "+d+" -j RETURN")
	}
	nat.rules = append(nat.rules,
		fmt.Sprintf("-A %s -p udp -m udp --dport 53 -j REDIRECT --to-ports %d", ChainDNS, cfg.DNSPort),
		fmt.Sprintf("-A %s -p tcp -m tcp --dport 53 -j REDIRECT --to-ports %d", ChainDNS, cfg.DNSPort),
	)
	// The gate's chain exists (empty) even with the gate off, so that an
	// apply that turns the gate off also removes its redirects.
	if cfg.Gate {
		g := func(spec string) { nat.rules = append(nat.rules, "-A "+ChainGate+" "+spec) }
		g(fmt.Sprintf("-m owner --uid-owner %d -j RETURN", layout.GateUID))
		if len(cfg.Protect) > 0 {
			// Only the credential gateway's connections to a protected
			// address go through the gate (and its name checks); anyone
			// else's stays on the direct path, where DEVBOX-PROTECT
			// refuses it.
			g(fmt.Sprintf("-m set --match-set %s dst -m owner ! --uid-owner %d -j RETURN", set(SetProtect), cfg.ProtectUID))
		}
		// The filter's marked queries, and DNS (DEVBOX-DNS has it).
		g("-m mark --mark " + mark + " -j RETURN")
		g("-p tcp -m tcp --dport 53 -j RETURN")
		// Denied destinations stay on the direct path, where the filter
		// table rejects and logs them; static entries keep theirs too: an
		// address the policy allows outright needs no name.
		g("-m set --match-set " + set(SetDeny) + " dst -j RETURN")
		g("-p tcp -m set --match-set " + set(SetDenyPort) + " dst,dst -j RETURN")
		g("-p tcp -m set --match-set " + set(SetAllow) + " dst -j RETURN")
		g("-p tcp -m set --match-set " + set(SetAllowPort) + " dst,dst -j RETURN")
		for _, m := range named {
			g(fmt.Sprintf("-p tcp %s -j REDIRECT --to-ports %d", m, cfg.GatePort))
		}
	}
	return Ruleset{
		Family: f,
		Jumps: []Jump{
			{"filter", "INPUT", ChainInput},
			{"filter", "OUTPUT", ChainOutput},
			{"nat", "OUTPUT", ChainDNS},
			{"nat", "OUTPUT", ChainGate},
		},
		tables: []table{filter, nat},
	}
}

// DockerDNS is Docker's embedded DNS server, the nameserver of every
// container on a user-defined network.
var DockerDNS = netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, 11}), 53)

// dockerForwards matches the queries Docker's embedded DNS forwards to its
// external servers, when (and only when) the filter's upstream includes
// DockerDNS. dockerd answers 127.0.0.11 from a socket it opens inside the
// container's namespace, so its forwards leave from here, unmarked: without
// an exemption the nat redirect hands them back to the filter, which asks
// 127.0.0.11 again — a loop in which no allowed name resolves.
//
// The exemption is as narrow as the packets: UDP/TCP to port 53, not to a
// local address (the embedded resolver queries host-loopback servers from
// the host's namespace, never from here), from a socket owned by uid 0 —
// dockerd's credentials. Root in the container gains nothing by it: the
// only root process there is the entrypoint, which holds CAP_NET_ADMIN and
// could rewrite every rule anyway. The agent's user is never uid 0: it is
// non-root with no_new_privs, no sudo and no setuid binaries, and the root
// of a user namespace it makes is still its own uid to the owner match
// (which compares kernel uids in the namespace's owning user namespace).
// Nothing is keyed on the remote user's uid, which updateRemoteUserUID may
// remap.
func dockerForwards(cfg Config, f Family) []string {
	docker := false
	for _, u := range cfg.Upstream {
		if netip.AddrPortFrom(u.Addr().Unmap(), u.Port()) == DockerDNS {
			docker = true
		}
	}
	if !docker {
		return nil
	}
	// "Not local" rather than "! -d 127.0.0.0/8": a negated address is
	// what `iptables -L` cannot print as a prefix, and status reads the
	// counters from there. LOCAL covers loopback and the container's own
	// addresses, none of which is an external server.
	var out []string
	for _, p := range []string{"udp", "tcp"} {
		out = append(out, fmt.Sprintf("-p %s -m %s --dport 53 -m addrtype ! --dst-type LOCAL -m owner --uid-owner 0", p, p))
	}
	return out
}

// dnsPorts matches the filter's upstream traffic: port 53 anywhere, and
// each configured upstream of family f on another port.
func dnsPorts(cfg Config, f Family) []string {
	out := []string{"-p udp -m udp --dport 53", "-p tcp -m tcp --dport 53"}
	for _, u := range cfg.Upstream {
		a := u.Addr().Unmap()
		if u.Port() == 53 || familyOf(a) != f {
			continue
		}
		for _, p := range []string{"udp", "tcp"} {
			out = append(out, fmt.Sprintf("-d %s -p %s -m %s --dport %d", netip.PrefixFrom(a, a.BitLen()), p, p, u.Port()))
		}
	}
	return out
}

// Restore renders the ruleset as iptables-restore input for
// `iptables-restore --noflush`: built-in chain policies set to DROP, devbox's
// chains declared and flushed, the missing jumps inserted at the top, and the
// rules. Each table is one atomic commit. present reports whether a jump is
// already in place (nil: none is).
func (r Ruleset) Restore(present func(Jump) bool) string {
	var b strings.Builder
	for _, t := range r.tables {
		fmt.Fprintf(&b, "*%s\n", t.name)
		for _, p := range t.policy {
			b.WriteString(p + "\n")
		}
		for _, c := range t.chains {
			fmt.Fprintf(&b, ":%s - [0:0]\n", c)
		}
		for _, c := range t.chains {
			fmt.Fprintf(&b, "-F %s\n", c)
		}
		for _, j := range r.Jumps {
			if j.Table == t.name && (present == nil || !present(j)) {
				fmt.Fprintf(&b, "-I %s 1 %s\n", j.Chain, strings.Join(j.Rule(), " "))
			}
		}
		for _, l := range t.rules {
			b.WriteString(l + "\n")
		}
		b.WriteString("COMMIT\n")
	}
	return b.String()
}

// String renders the ruleset for a fresh namespace (every jump inserted).
func (r Ruleset) String() string { return r.Restore(nil) }
