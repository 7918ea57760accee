package kube

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/devbox-dev/devbox/firewall"
	"github.com/devbox-dev/devbox/firewall/fwpolicy"
)

// CiliumNetworkPolicy mirrors the part of Cilium's cilium.io/v2
// CiliumNetworkPolicy devbox writes (github.com/cilium/cilium
// pkg/policy/api: Rule, EgressRule, FQDNSelector, PortRule). Cilium's own
// module is not imported for a handful of fields; strict decoding into
// these types checks what devbox writes, not what Cilium accepts.
type CiliumNetworkPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              CiliumRule `json:"spec"`
}

// CiliumRule selects the pod and lists its egress.
type CiliumRule struct {
	EndpointSelector metav1.LabelSelector `json:"endpointSelector"`
	Egress           []CiliumEgressRule   `json:"egress"`
}

// CiliumEgressRule is one allowed destination set with its ports.
type CiliumEgressRule struct {
	ToEndpoints []metav1.LabelSelector `json:"toEndpoints,omitempty"`
	ToCIDRSet   []CiliumCIDRRule       `json:"toCIDRSet,omitempty"`
	ToFQDNs     []CiliumFQDN           `json:"toFQDNs,omitempty"`
	ToPorts     []CiliumPortRule       `json:"toPorts,omitempty"`
}

// CiliumCIDRRule is a prefix less some of its sub-prefixes.
type CiliumCIDRRule struct {
	CIDR   string   `json:"cidr"`
	Except []string `json:"except,omitempty"`
}

// CiliumFQDN is an exact name or a pattern; "**." matches any number of
// labels (devbox's "*.domain"), "*" alone one label.
type CiliumFQDN struct {
	MatchName    string `json:"matchName,omitempty"`
	MatchPattern string `json:"matchPattern,omitempty"`
}

// CiliumPortRule lists ports and, for DNS, the names Cilium's DNS proxy
// lets through (which is also how it learns the toFQDNs addresses).
type CiliumPortRule struct {
	Ports []CiliumPort   `json:"ports"`
	Rules *CiliumL7Rules `json:"rules,omitempty"`
}

// CiliumPort is a port (string, as Cilium has it) or a range up to EndPort.
type CiliumPort struct {
	Port     string `json:"port"`
	EndPort  int32  `json:"endPort,omitempty"`
	Protocol string `json:"protocol"`
}

// CiliumL7Rules holds the DNS rules of a port rule.
type CiliumL7Rules struct {
	DNS []CiliumFQDN `json:"dns,omitempty"`
}

// fqdn is a named entry as Cilium matches it.
func fqdn(d firewall.Destination) CiliumFQDN {
	if d.Wildcard {
		return CiliumFQDN{MatchPattern: "**." + d.Name}
	}
	return CiliumFQDN{MatchName: d.Name}
}

// NewCiliumNetworkPolicy is the second layer where Cilium is the CNI:
// DNS to the cluster's resolver (or the policy's upstreams) for the
// allowed names only, toFQDNs for the named entries by port, and the
// static prefixes as the NetworkPolicy has them. Deny entries by name have
// no Cilium form (toFQDNs only allows); a denied name under an allowed
// wildcard is refused by the DNS filter in the pod, not here.
func NewCiliumNetworkPolicy(o Options) (*CiliumNetworkPolicy, error) {
	o = o.withDefaults()
	if err := o.check(false); err != nil {
		return nil, err
	}
	cfg := fwpolicy.Config(o.Policy)
	// Names by the ports they open, in the policy's order.
	var byPort []struct {
		port  uint16
		names []CiliumFQDN
	}
	var dnsNames []CiliumFQDN
	for _, a := range cfg.Allow {
		// A name the policy also denies (the firewall's matcher says so) is
		// left out: toFQDNs can only allow.
		if a.Name == "" || !a.Wildcard && !cfg.Match(a.Name).Allowed {
			continue
		}
		f := fqdn(a)
		dnsNames = append(dnsNames, f)
		i := 0
		for i < len(byPort) && byPort[i].port != a.Port {
			i++
		}
		if i == len(byPort) {
			byPort = append(byPort, struct {
				port  uint16
				names []CiliumFQDN
			}{port: a.Port})
		}
		byPort[i].names = append(byPort[i].names, f)
	}
	dnsPorts := []CiliumPort{{Port: "53", Protocol: "UDP"}, {Port: "53", Protocol: "TCP"}}
	dnsRule := CiliumEgressRule{ToPorts: []CiliumPortRule{{Ports: dnsPorts, Rules: &CiliumL7Rules{DNS: dnsNames}}}}
	if len(dnsNames) == 0 {
		// No name is allowed: the filter forwards nothing, and neither does
		// Cilium's proxy (an empty DNS list would allow every name).
		dnsRule.ToPorts[0].Rules = &CiliumL7Rules{DNS: []CiliumFQDN{{MatchName: "fence-check.devbox.invalid"}}}
	}
	if len(cfg.Upstream) == 0 {
		dnsRule.ToEndpoints = []metav1.LabelSelector{{MatchLabels: map[string]string{"k8s:io.kubernetes.pod.namespace": "kube-system", "k8s:k8s-app": "kube-dns"}}}
	} else {
		for _, u := range cfg.Upstream {
			a := u.Addr().Unmap()
			dnsRule.ToCIDRSet = append(dnsRule.ToCIDRSet, CiliumCIDRRule{CIDR: netipHost(a)})
		}
	}
	egress := []CiliumEgressRule{dnsRule}
	for _, g := range byPort {
		r := CiliumEgressRule{ToFQDNs: g.names}
		if g.port != 0 {
			r.ToPorts = []CiliumPortRule{{Ports: []CiliumPort{{Port: portString(g.port), Protocol: "TCP"}, {Port: portString(g.port), Protocol: "UDP"}}}}
		}
		egress = append(egress, r)
	}
	for _, reg := range staticRegions(cfg) {
		c := CiliumCIDRRule{CIDR: reg.cidr.String()}
		for _, e := range reg.except {
			c.Except = append(c.Except, e.String())
		}
		r := CiliumEgressRule{ToCIDRSet: []CiliumCIDRRule{c}}
		if !reg.all {
			var ps []CiliumPort
			for _, pr := range reg.ports {
				for _, proto := range []string{"TCP", "UDP"} {
					p := CiliumPort{Port: portString(pr.lo), Protocol: proto}
					if pr.hi > pr.lo {
						p.EndPort = int32(pr.hi)
					}
					ps = append(ps, p)
				}
			}
			r.ToPorts = []CiliumPortRule{{Ports: ps}}
		}
		egress = append(egress, r)
	}
	return &CiliumNetworkPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: "cilium.io/v2", Kind: "CiliumNetworkPolicy"},
		ObjectMeta: o.meta(o.Name),
		Spec: CiliumRule{
			EndpointSelector: metav1.LabelSelector{MatchLabels: map[string]string{LabelName: o.Name}},
			Egress:           egress,
		},
	}, nil
}
