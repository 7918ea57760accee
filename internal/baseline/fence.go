package baseline

import (
	"fmt"
	"net/netip"
	"slices"

	"github.com/devbox-dev/devbox/firewall"
	"github.com/devbox-dev/devbox/firewall/fwpolicy"
	"github.com/devbox-dev/devbox/internal/layout"
	"github.com/devbox-dev/devbox/internal/policy"
)

// FenceConfig is the fence a container applies for policy p under ceiling
// (the baseline, or the baked policy when the image has none): p's own
// firewall Config, plus the ceiling's credential hosts carried into the
// protect set whatever p says. The protect rule closes a protected host's
// addresses to every uid but the gateway's, on every port and whatever
// name or static entry reaches them, so a repository that drops a
// baseline route (or keeps the host on another port, through another name
// sharing its address, or through a static range) never opens the host to
// another identity. A carried host p does not allow at all is allowed on
// 443, the ceiling's own entry for it, so that the DNS filter resolves it
// (at start, and whenever asked) and puts its addresses into the protect
// set; the gateway, with no route there, never connects to it, and nobody
// else can.
func FenceConfig(ceiling, p *policy.Policy) firewall.Config {
	cfg := fwpolicy.Config(p)
	// Every name the ceiling's routes protect (hosts, their service's
	// siblings, protect entries) stays protected; the route hosts stay
	// answerable so their addresses get protected.
	for _, h := range ceiling.Credentials.ProtectList() {
		if !slices.Contains(cfg.Protect, h) {
			cfg.Protect = append(cfg.Protect, h)
		}
	}
	for _, h := range ceiling.Credentials.Hosts() {
		if !cfg.Match(h).Allowed && cfg.Match(h).Reason != "denied" {
			cfg.Allow = append(cfg.Allow, firewall.Destination{Name: h, Port: 443})
		}
	}
	if len(cfg.Protect) > 0 {
		cfg.ProtectUID = layout.GatewayUID
	}
	return cfg
}

// Probe uids: the agent's (any uid that is not one of devbox's system
// accounts decides the same) and the credential gateway's.
var probeUIDs = []int{1000, layout.GatewayUID}

// world is the DNS the compiled check assumes: every name the two fences
// know answers its own address, one address every name shares, and an
// address inside every range either policy names, so that a name reached
// through another name's address or a static range is probed too.
type world struct {
	answers firewall.Answers
	addrs   []netip.Addr
	ports   []uint16
	names   []string
}

func newWorld(cfgs ...firewall.Config) world {
	w := world{answers: firewall.Answers{}}
	names, ports := map[string]bool{}, map[uint16]bool{22: true, 80: true, 443: true, 8443: true}
	var prefixes []netip.Prefix
	for _, c := range cfgs {
		for _, d := range slices.Concat(c.Allow, c.Deny) {
			if d.Port != 0 && d.Port != 53 {
				ports[d.Port] = true
			}
			switch {
			case d.Prefix.IsValid():
				prefixes = append(prefixes, d.Prefix)
			case d.Wildcard:
				names["probe."+d.Name] = true
				names[d.Name] = true
			default:
				names[d.Name] = true
			}
		}
		for _, n := range c.Protect {
			names[n] = true
		}
	}
	for n := range names {
		w.names = append(w.names, n)
	}
	slices.Sort(w.names)
	shared := []netip.Addr{netip.MustParseAddr("198.19.255.254"), netip.MustParseAddr("2001:db8:ffff::fe")}
	var inRanges []netip.Addr
	for _, p := range prefixes {
		for _, a := range []netip.Addr{p.Masked().Addr(), p.Addr()} {
			if !slices.Contains(inRanges, a) {
				inRanges = append(inRanges, a)
			}
		}
	}
	for i, n := range w.names {
		own := []netip.Addr{netip.AddrFrom4([4]byte{198, 18, byte(i >> 8), byte(i)}), netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 14: byte(i >> 8), 15: byte(i)})}
		w.answers[n] = slices.Concat(own, shared, inRanges)
		w.addrs = append(w.addrs, own...)
	}
	w.addrs = slices.Concat(w.addrs, shared, inRanges, []netip.Addr{netip.MustParseAddr("203.0.113.9")})
	for p := range ports {
		w.ports = append(w.ports, p)
	}
	slices.Sort(w.ports)
	return w
}

// Widening is a packet the repository's compiled fence lets out and the
// baseline's does not.
type Widening struct {
	Packet   firewall.Packet
	Baseline firewall.Decision
}

func (w Widening) String() string {
	why := w.Baseline.Reason
	if why == "" {
		why = "refused"
	}
	return fmt.Sprintf("%s passes the repository's fence; the baseline's refuses it (%s)", w.Packet, why)
}

// Widens compiles both fences with the firewall's own code and looks for a
// packet (uid, protocol, address, port, and the SNI or Host it sends) that
// fence lets out and base refuses, in the world answers describes (nil: the
// check's own world, see newWorld). It returns the first one, or nil.
func Widens(base, fence firewall.Config, answers firewall.Answers) (*Widening, error) {
	w := newWorld(base, fence)
	if answers != nil {
		w = worldFrom(answers, w.ports)
	}
	bm, err := firewall.NewModel(base, w.answers)
	if err != nil {
		return nil, err
	}
	fm, err := firewall.NewModel(fence, w.answers)
	if err != nil {
		return nil, err
	}
	// The SNI or Host only matters to the gate, which checks it against
	// the names an address was resolved for: those, none, and one no
	// policy names cover every answer it can give.
	bound := map[netip.Addr][]string{}
	for n, as := range w.answers {
		for _, a := range as {
			bound[a.Unmap()] = append(bound[a.Unmap()], n)
		}
	}
	for _, a := range w.addrs {
		names := append([]string{"", "unlisted.invalid"}, bound[a.Unmap()]...)
		slices.Sort(names[2:])
		for _, port := range w.ports {
			for _, uid := range probeUIDs {
				for _, proto := range []string{"tcp", "udp"} {
					for _, n := range names {
						if proto == "udp" && n != "" {
							break // UDP never reaches the gate
						}
						p := firewall.Packet{UID: uid, Proto: proto, Dst: netip.AddrPortFrom(a, port), Name: n}
						if !fm.Decide(p).Out {
							continue
						}
						if d := bm.Decide(p); !d.Out {
							return &Widening{Packet: p, Baseline: d}, nil
						}
					}
				}
			}
		}
	}
	return nil, nil
}

// worldFrom is a given DNS world: its names and addresses, probed on ports.
func worldFrom(answers firewall.Answers, ports []uint16) world {
	w := world{answers: answers, ports: ports}
	for n, as := range answers {
		w.names = append(w.names, n)
		for _, a := range as {
			if !slices.Contains(w.addrs, a) {
				w.addrs = append(w.addrs, a)
			}
		}
	}
	slices.Sort(w.names)
	slices.SortFunc(w.addrs, func(a, b netip.Addr) int { return a.Compare(b) })
	return w
}

// carriedDenied lists the ceiling's credential hosts p denies by name: the
// DNS filter refuses them, so their addresses could not be protected.
func carriedDenied(ceiling, p *policy.Policy) []string {
	cfg := fwpolicy.Config(p)
	var out []string
	for _, h := range ceiling.Credentials.Hosts() {
		if cfg.Match(h).Reason == "denied" {
			out = append(out, h)
		}
	}
	return out
}
