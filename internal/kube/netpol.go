package kube

import (
	"net/netip"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/devbox-dev/devbox/firewall"
	"github.com/devbox-dev/devbox/firewall/fwpolicy"
)

// portRange is an inclusive range of TCP/UDP ports.
type portRange struct{ lo, hi uint16 }

// ports is a set of ports as sorted, disjoint ranges; allPorts is every
// port (and, in a rule, every protocol: an entry without a port).
type ports []portRange

var allPorts = ports{{1, 65535}}

func (ps ports) all() bool { return len(ps) == 1 && ps[0] == portRange{1, 65535} }

// without is ps less port p.
func (ps ports) without(p uint16) ports {
	var out ports
	for _, r := range ps {
		switch {
		case p < r.lo || p > r.hi:
			out = append(out, r)
		default:
			if r.lo < p {
				out = append(out, portRange{r.lo, p - 1})
			}
			if p < r.hi {
				out = append(out, portRange{p + 1, r.hi})
			}
		}
	}
	return out
}

// region is one block of addresses (cidr less except) where the same ports
// are open.
type region struct {
	cidr   netip.Prefix
	except []netip.Prefix
	ports  ports
	// all: no port entry narrowed it, so every protocol is open too.
	all bool
}

// staticRegions are the address blocks the fence opens by prefix, exactly
// as the firewall's rules decide them (Config.MatchAddr): a deny entry
// without a port closes its prefix, a deny entry with a port closes that
// port, and the allow entries open the rest. Prefixes are nested or
// disjoint, so each allow entry becomes its prefix less the deny prefixes
// inside it, and each of those, recursively, with the ports left to it.
func staticRegions(cfg firewall.Config) []region {
	var denies []firewall.Destination
	for _, d := range cfg.Deny {
		if d.Prefix.IsValid() {
			denies = append(denies, firewall.Destination{Prefix: d.Prefix.Masked(), Port: d.Port})
		}
	}
	var out []region
	var walk func(p netip.Prefix, ps ports, narrowed bool)
	walk = func(p netip.Prefix, ps ports, narrowed bool) {
		var inner []netip.Prefix
		for _, d := range denies {
			switch {
			case d.Prefix.Addr().Is4() != p.Addr().Is4():
			case d.Prefix.Bits() <= p.Bits() && d.Prefix.Contains(p.Addr()):
				if d.Port == 0 {
					return
				}
				ps, narrowed = ps.without(d.Port), true
			case d.Prefix.Bits() > p.Bits() && p.Contains(d.Prefix.Addr()):
				inner = append(inner, d.Prefix)
			}
		}
		if len(ps) == 0 {
			return
		}
		// The outermost inner prefixes are cut out here and walked on
		// their own; the ones inside them are their business.
		var top []netip.Prefix
		for _, q := range inner {
			outer := false
			for _, r := range inner {
				if r.Bits() < q.Bits() && r.Contains(q.Addr()) {
					outer = true
				}
			}
			if !outer && !slices.Contains(top, q) {
				top = append(top, q)
			}
		}
		slices.SortFunc(top, func(a, b netip.Prefix) int { return a.Addr().Compare(b.Addr()) })
		out = append(out, region{cidr: p, except: top, ports: ps, all: !narrowed})
		for _, q := range top {
			walk(q, ps, narrowed)
		}
	}
	for _, a := range cfg.Allow {
		if !a.Prefix.IsValid() {
			continue
		}
		ps := allPorts
		if a.Port != 0 {
			ps = ports{{a.Port, a.Port}}
		}
		walk(a.Prefix.Masked(), ps, a.Port != 0)
	}
	return out
}

// namedPorts are the ports the policy's named allow entries open (allPorts
// when one has no port), nil when there are none.
func namedPorts(cfg firewall.Config) (ps ports, all bool) {
	var set []uint16
	for _, a := range cfg.Allow {
		switch {
		case a.Name == "":
		case a.Port == 0:
			return allPorts, true
		default:
			set = append(set, a.Port)
		}
	}
	slices.Sort(set)
	for _, p := range slices.Compact(set) {
		ps = append(ps, portRange{p, p})
	}
	return ps, false
}

// neverNamed are the addresses the DNS filter never lets a name resolve to
// (Config.AddressVerdict): link-local, which holds the metadata services
// of most clouds, and Alibaba's. The named rule of the NetworkPolicy
// leaves them out, with the policy's denied prefixes.
var neverNamed = []netip.Prefix{
	netip.MustParsePrefix("169.254.0.0/16"),
	netip.MustParsePrefix("100.100.100.200/32"),
	netip.MustParsePrefix("fe80::/10"),
	netip.MustParsePrefix("fd00:ec2::254/128"),
}

// namedRegions stand for the named entries, which a NetworkPolicy cannot
// name: every address but the ones no name may resolve to and the
// policy's denied prefixes, on the named entries' ports. The fence inside
// the pod decides by name; this layer caps ports and keeps the pod off the
// denied ranges even if the fence were lifted.
func namedRegions(cfg firewall.Config) []region {
	ps, all := namedPorts(cfg)
	if len(ps) == 0 {
		return nil
	}
	var out []region
	for _, world := range []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0"), netip.MustParsePrefix("::/0")} {
		r := region{cidr: world, ports: ps, all: all}
		cut := slices.Clone(neverNamed)
		for _, d := range cfg.Deny {
			if d.Prefix.IsValid() && d.Port == 0 {
				cut = append(cut, d.Prefix.Masked())
			}
		}
		skip := false
		for _, c := range cut {
			if c.Addr().Is4() != world.Addr().Is4() {
				continue
			}
			if c.Bits() == 0 {
				skip = true // the whole family is denied
			}
			if !slices.Contains(r.except, c) {
				r.except = append(r.except, c)
			}
		}
		if !skip {
			out = append(out, r)
		}
	}
	return out
}

// dnsPeers are where the DNS filter forwards: the policy's upstream
// resolvers, else the cluster's DNS service (kube-dns / CoreDNS in
// kube-system, the label both carry).
func dnsPeers(cfg firewall.Config) []networkingv1.NetworkPolicyPeer {
	if len(cfg.Upstream) == 0 {
		return []networkingv1.NetworkPolicyPeer{{
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": "kube-system"}},
			PodSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"k8s-app": "kube-dns"}},
		}}
	}
	var out []networkingv1.NetworkPolicyPeer
	for _, u := range cfg.Upstream {
		a := u.Addr().Unmap()
		out = append(out, networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: netipHost(a)}})
	}
	return out
}

// NetworkPolicy is the second layer, enforced by the CNI outside the pod:
// egress to the DNS resolvers the filter forwards to, to the policy's
// static prefixes with their ports (exactly as the fence decides them),
// and, for the named entries, to any address but the denied and
// metadata ranges on the named entries' ports. No ingress.
func NetworkPolicy(o Options) (*networkingv1.NetworkPolicy, error) {
	o = o.withDefaults()
	if err := o.check(false); err != nil {
		return nil, err
	}
	cfg := fwpolicy.Config(o.Policy)
	udp, tcp := corev1.ProtocolUDP, corev1.ProtocolTCP
	dnsPort := intstr.FromInt32(53)
	egress := []networkingv1.NetworkPolicyEgressRule{{
		To:    dnsPeers(cfg),
		Ports: []networkingv1.NetworkPolicyPort{{Protocol: &udp, Port: &dnsPort}, {Protocol: &tcp, Port: &dnsPort}},
	}}
	for _, r := range append(staticRegions(cfg), namedRegions(cfg)...) {
		block := &networkingv1.IPBlock{CIDR: r.cidr.String()}
		for _, e := range r.except {
			block.Except = append(block.Except, e.String())
		}
		rule := networkingv1.NetworkPolicyEgressRule{To: []networkingv1.NetworkPolicyPeer{{IPBlock: block}}}
		if !r.all {
			for _, pr := range r.ports {
				for _, proto := range []corev1.Protocol{tcp, udp} {
					port := intstr.FromInt32(int32(pr.lo))
					np := networkingv1.NetworkPolicyPort{Protocol: &proto, Port: &port}
					if pr.hi > pr.lo {
						np.EndPort = ptr(int32(pr.hi))
					}
					rule.Ports = append(rule.Ports, np)
				}
			}
		}
		egress = append(egress, rule)
	}
	return &networkingv1.NetworkPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "NetworkPolicy"},
		ObjectMeta: o.meta(o.Name),
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{LabelName: o.Name}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress},
			Egress:      egress,
		},
	}, nil
}

// portString is a port for Cilium, which takes them as strings.
func portString(p uint16) string { return strconv.Itoa(int(p)) }
