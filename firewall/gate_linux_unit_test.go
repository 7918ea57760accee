//go:build linux

package firewall

import (
	"net"
	"net/netip"
	"os"
	"testing"
)

// TestSocketUID: the owner of a connection, found through netlink socket
// diagnostics, is this process's uid (both families when there is ::1).
func TestSocketUID(t *testing.T) {
	c, s := tcpPair(t)
	from := netip.MustParseAddrPort(c.LocalAddr().String())
	to := netip.MustParseAddrPort(s.LocalAddr().String())
	uid, ok := socketUID(from, to)
	if !ok || uid != os.Getuid() {
		t.Errorf("socketUID(%s, %s) = %d %v, want %d", from, to, uid, ok, os.Getuid())
	}
	if _, ok := socketUID(to, from); !ok {
		t.Errorf("the accepted end %s → %s not found", to, from)
	}
	if _, ok := socketUID(from, netip.AddrPortFrom(to.Addr(), to.Port()+1)); ok {
		t.Errorf("found a socket that does not exist")
	}
	l, err := net.Listen("tcp", "[::1]:0")
	if err != nil {
		t.Logf("no IPv6 loopback: %v", err)
		return
	}
	defer l.Close()
	c6, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c6.Close()
	from, to = netip.MustParseAddrPort(c6.LocalAddr().String()), netip.MustParseAddrPort(c6.RemoteAddr().String())
	if uid, ok := socketUID(from, to); !ok || uid != os.Getuid() {
		t.Errorf("socketUID(%s, %s) = %d %v, want %d", from, to, uid, ok, os.Getuid())
	}
}

func BenchmarkSocketUID(b *testing.B) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	from := netip.MustParseAddrPort(c.LocalAddr().String())
	to := netip.MustParseAddrPort(c.RemoteAddr().String())
	for b.Loop() {
		if _, ok := socketUID(from, to); !ok {
			b.Fatal("not found")
		}
	}
}
