// Package resolvconf reads the nameservers of a resolv.conf(5) file, with
// miekg/dns's parser, for the firewall's DNS filter and the escape suite.
package resolvconf

import (
	"fmt"
	"net"
	"net/netip"

	"github.com/miekg/dns"
)

// Nameservers returns the nameserver addresses of the resolv.conf at path,
// in file order, each with the port the file's options give (53). Entries
// that are not IP literals are skipped: resolving them would need DNS. An
// IPv6 zone (fe80::1%eth0) is kept. A file without a usable nameserver is
// an error that names it.
func Nameservers(path string) ([]netip.AddrPort, error) {
	cc, err := dns.ClientConfigFromFile(path)
	if err != nil {
		return nil, err
	}
	port, err := net.LookupPort("udp", cc.Port)
	if err != nil {
		return nil, fmt.Errorf("%s: port %q: %w", path, cc.Port, err)
	}
	var out []netip.AddrPort
	for _, s := range cc.Servers {
		a, err := netip.ParseAddr(s)
		if err != nil {
			continue
		}
		out = append(out, netip.AddrPortFrom(a, uint16(port)))
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no nameserver in %s", path)
	}
	return out, nil
}
