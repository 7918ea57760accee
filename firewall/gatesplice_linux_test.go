//go:build linux

package firewall

import (
	"bytes"
	"crypto/rand"
	"io"
	"net"
	"net/netip"
	"testing"

	"golang.org/x/sys/unix"
)

// tcpPair returns both ends of one loopback TCP connection.
func tcpPair(t *testing.T) (*net.TCPConn, *net.TCPConn) {
	t.Helper()
	l := listenLoopback(t)
	defer l.Close()
	c, s := connect(t, l)
	t.Cleanup(func() { c.Close(); s.Close() })
	return c, s
}

// listenLoopback listens on a free TCP port of 127.0.0.1.
func listenLoopback(tb testing.TB) *net.TCPListener {
	tb.Helper()
	l, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		tb.Fatal(err)
	}
	return l
}

// connect dials l and returns the client's and the server's end; the
// caller closes both.
func connect(tb testing.TB, l *net.TCPListener) (*net.TCPConn, *net.TCPConn) {
	tb.Helper()
	c, err := net.DialTCP("tcp", nil, l.Addr().(*net.TCPAddr))
	if err != nil {
		tb.Fatal(err)
	}
	s, err := l.AcceptTCP()
	if err != nil {
		tb.Fatal(err)
	}
	return c, s
}

// asGateConn makes c the gate's own socket (a gateConn on a duplicate of
// its descriptor; c itself is closed).
func asGateConn(tb testing.TB, c *net.TCPConn) *gateConn {
	tb.Helper()
	f, err := c.File()
	c.Close()
	if err != nil {
		tb.Fatal(err)
	}
	remote, _ := netip.ParseAddrPort(c.RemoteAddr().String())
	gc, err := gateConnOf(f, remote)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { gc.Close() })
	return gc
}

// startSplice runs a gate's splice between two loopback connections. It
// returns the client's end, the server's end, the gate and a channel
// closed when the splice returns.
func startSplice(t *testing.T) (client, server *net.TCPConn, g *gate, spliced chan struct{}) {
	t.Helper()
	client, gateIn := tcpPair(t)
	gateOut, server := tcpPair(t)
	g = &gate{pipes: newPipePool(4)}
	spliced = make(chan struct{})
	in, out := asGateConn(t, gateIn), asGateConn(t, gateOut)
	go func() { g.splice(in, out); close(spliced) }()
	return client, server, g, spliced
}

// TestGateSplice runs the gate's data path between a client and a server
// pair: both directions carry their bytes intact and in order, a client's
// half-close reaches the server while the answer still flows, and the
// pipes go back to the pool empty.
func TestGateSplice(t *testing.T) {
	client, server, g, spliced := startSplice(t)

	up := make([]byte, 3<<20+17)
	down := make([]byte, 9<<20+5)
	rand.Read(up)
	rand.Read(down)
	go func() {
		client.Write(up)
		client.CloseWrite()
	}()
	got := make(chan []byte)
	go func() {
		b, _ := io.ReadAll(server) // ends at the client's half-close
		server.Write(down)
		server.CloseWrite()
		got <- b
	}()
	gotDown, err := io.ReadAll(client)
	if err != nil {
		t.Fatal(err)
	}
	if gotUp := <-got; !bytes.Equal(gotUp, up) {
		t.Errorf("server got %d bytes, not the %d the client sent", len(gotUp), len(up))
	}
	if !bytes.Equal(gotDown, down) {
		t.Errorf("client got %d bytes, not the %d the server sent", len(gotDown), len(down))
	}
	<-spliced
	if n := len(g.pipes.free); n == 0 || n > 2 {
		t.Errorf("%d pipes back in the pool, want 1 or 2", n)
	}
}

// TestGateSpliceReset: a reset on one side ends both.
func TestGateSpliceReset(t *testing.T) {
	client, server, _, spliced := startSplice(t)
	client.Write([]byte("hello"))
	buf := make([]byte, 5)
	if _, err := io.ReadFull(server, buf); err != nil || string(buf) != "hello" {
		t.Fatalf("server read %q, %v", buf, err)
	}
	server.SetLinger(0)
	server.Close()
	<-spliced
	if _, err := client.Read(buf); err == nil {
		t.Error("client still open after the server's reset")
	}
}

// The gate sets TCP_NODELAY once, on its listener, and counts on Linux
// copying it into every accepted socket: a relayed handshake must not wait
// behind Nagle's algorithm.
func TestGateListenerNoDelay(t *testing.T) {
	l, err := newGateListener(listenLoopback(t))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if want := netip.MustParseAddr("127.0.0.1"); l.addr.Addr() != want || l.addr.Port() == 0 {
		t.Fatalf("listener address %v, want 127.0.0.1 and its port", l.addr)
	}
	c, err := net.Dial("tcp", l.addr.String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var nfd int
	l.rc.Control(func(fd uintptr) {
		nfd, _, err = unix.Accept4(int(fd), unix.SOCK_CLOEXEC)
	})
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(nfd)
	v, err := unix.GetsockoptInt(nfd, unix.IPPROTO_TCP, unix.TCP_NODELAY)
	if err != nil || v == 0 {
		t.Fatalf("accepted socket TCP_NODELAY = %d (%v), want it set", v, err)
	}
}
