package kube

import (
	"fmt"
	"net/netip"
	"path/filepath"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"

	"github.com/devbox-dev/devbox/firewall"
	"github.com/devbox-dev/devbox/firewall/fwpolicy"
	"github.com/devbox-dev/devbox/internal/layout"
)

// npAllows decides a connection the way a CNI enforces a NetworkPolicy's
// egress: allowed when any rule has an ipBlock peer holding dst (outside
// its excepts) and a port entry for it (no ports: every port and protocol).
func npAllows(t *testing.T, np *networkingv1.NetworkPolicy, proto string, dst netip.AddrPort) bool {
	t.Helper()
	for _, r := range np.Spec.Egress {
		inPeer := false
		for _, peer := range r.To {
			if peer.IPBlock == nil {
				continue
			}
			if netip.MustParsePrefix(peer.IPBlock.CIDR).Contains(dst.Addr()) {
				out := false
				for _, e := range peer.IPBlock.Except {
					if netip.MustParsePrefix(e).Contains(dst.Addr()) {
						out = true
					}
				}
				inPeer = inPeer || !out
			}
		}
		if !inPeer {
			continue
		}
		if len(r.Ports) == 0 {
			return true
		}
		for _, p := range r.Ports {
			lo, hi := p.Port.IntVal, p.Port.IntVal
			if p.EndPort != nil {
				hi = *p.EndPort
			}
			if string(*p.Protocol) == map[string]string{"tcp": string(corev1.ProtocolTCP), "udp": string(corev1.ProtocolUDP)}[proto] && int32(dst.Port()) >= lo && int32(dst.Port()) <= hi {
				return true
			}
		}
	}
	return false
}

// probeAddrs are the edges and middles of every prefix in cfg, plus
// addresses no entry names.
func probeAddrs(cfg firewall.Config) []netip.Addr {
	out := []netip.Addr{
		netip.MustParseAddr("198.51.100.77"), netip.MustParseAddr("169.254.169.254"), netip.MustParseAddr("10.0.0.1"),
		netip.MustParseAddr("3fff::1"), netip.MustParseAddr("fe80::1"),
	}
	for _, d := range slices.Concat(cfg.Allow, cfg.Deny) {
		if !d.Prefix.IsValid() {
			continue
		}
		p := d.Prefix.Masked()
		first := p.Addr()
		out = append(out, first, first.Prev())
		// Last address and the one after it.
		last := first
		bytes := last.AsSlice()
		for i := p.Bits(); i < len(bytes)*8; i++ {
			bytes[i/8] |= 1 << (7 - i%8)
		}
		last, _ = netip.AddrFromSlice(bytes)
		out = append(out, last, last.Next())
		// The middle.
		mid := first.AsSlice()
		if p.Bits() < len(mid)*8 {
			mid[p.Bits()/8] |= 1 << (7 - p.Bits()%8)
			m, _ := netip.AddrFromSlice(mid)
			out = append(out, m)
		}
	}
	return slices.DeleteFunc(out, func(a netip.Addr) bool { return !a.IsValid() })
}

// TestNetworkPolicyAgreesWithFence checks, for each example policy and the
// test policy, the NetworkPolicy's verdict on probes against the fence's
// own model of its compiled rules (firewall.Model, what
// TestModelAgreesWithKernel checks against the kernel): what the fence
// lets out, the NetworkPolicy never blocks; and on a port no named entry
// opens (where the NetworkPolicy knows every allowed address) it allows
// exactly what the fence allows.
func TestNetworkPolicyAgreesWithFence(t *testing.T) {
	files, _ := filepath.Glob("../../examples/*.jsonc")
	files = append(files, "testdata/agent.jsonc")
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			o := testOptions(t, f)
			cfg := fwpolicy.Config(o.Policy)
			np, err := NetworkPolicy(o)
			if err != nil {
				t.Fatal(err)
			}
			// Each named entry resolves to an address of its own.
			answers := firewall.Answers{}
			named := map[netip.Addr]string{}
			for i, a := range cfg.Allow {
				if a.Name == "" {
					continue
				}
				n := a.Name
				if a.Wildcard {
					n = "x." + n
				}
				for _, addr := range []netip.Addr{netip.AddrFrom4([4]byte{203, 0, 113, byte(i + 1)}), netip.MustParseAddr(fmt.Sprintf("3fff:1::%x", i+1))} {
					answers[n] = append(answers[n], addr)
					named[addr] = n
				}
			}
			m, err := firewall.NewModel(cfg, answers)
			if err != nil {
				t.Fatal(err)
			}
			namedPs, _ := namedPorts(cfg)
			portSet := []uint16{1, 22, 80, 443, 8443, 65535}
			for _, d := range slices.Concat(cfg.Allow, cfg.Deny) {
				if d.Port != 0 {
					portSet = append(portSet, d.Port, d.Port-1, d.Port+1)
				}
			}
			addrs := probeAddrs(cfg)
			for a := range named {
				addrs = append(addrs, a)
			}
			checked, exact := 0, 0
			for _, a := range addrs {
				for _, port := range portSet {
					if port == 53 || port == 0 {
						continue
					}
					for _, proto := range []string{"tcp", "udp"} {
						dst := netip.AddrPortFrom(a, port)
						np := npAllows(t, np, proto, dst)
						for _, uid := range []int{1000, layout.GatewayUID} {
							d := m.Decide(firewall.Packet{UID: uid, Proto: proto, Dst: dst, Name: named[a]})
							checked++
							if d.Out && !np {
								t.Errorf("uid %d %s %s: the fence lets it out, the NetworkPolicy blocks it", uid, proto, dst)
							}
							inNamed := false
							for _, r := range namedPs {
								inNamed = inNamed || (port >= r.lo && port <= r.hi)
							}
							if !inNamed && uid == 1000 {
								exact++
								if np && !d.Out {
									t.Errorf("%s %s: the NetworkPolicy allows it, the fence does not (%s)", proto, dst, d.Reason)
								}
							}
						}
					}
				}
			}
			t.Logf("%d probes, %d on ports no named entry opens (exact)", checked, exact)
			if exact == 0 {
				t.Error("no probe checked exactly")
			}
		})
	}
}
