//go:build linux

package firewall

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"net"
	"net/netip"
	"testing"
	"time"
)

// helloBytes returns the first flight of a crypto/tls client asking for
// name (post-quantum key share included, as today's clients send).
func helloBytes(tb testing.TB, name string) []byte {
	a, b := net.Pipe()
	go tls.Client(a, &tls.Config{ServerName: name}).Handshake()
	var hdr [5]byte
	if _, err := b.Read(hdr[:]); err != nil {
		tb.Fatal(err)
	}
	body := make([]byte, int(hdr[3])<<8|int(hdr[4]))
	if _, err := bufio.NewReader(b).Read(body); err != nil {
		tb.Fatal(err)
	}
	a.Close()
	b.Close()
	return append(hdr[:], body...)
}

func benchmarkSniff(b *testing.B, first []byte, wantKind, wantName string) {
	l := listenLoopback(b)
	defer l.Close()
	b.ReportAllocs()
	for b.Loop() {
		c, s := connect(b, l)
		c.Write(first)
		sf, err := s.File()
		s.Close()
		if err != nil {
			b.Fatal(err)
		}
		gs, err := gateConnOf(sf, netip.AddrPort{})
		if err != nil {
			b.Fatal(err)
		}
		sc := newSniffConn(gs)
		f := sniff(sc)
		sc.release()
		if f.kind != wantKind || f.name != wantName || f.refus != "" {
			b.Fatalf("sniff = %+v, want %q %q", f, wantKind, wantName)
		}
		c.Close()
		gs.Close()
	}
}

func BenchmarkSniffTLS(b *testing.B) {
	benchmarkSniff(b, helloBytes(b, "good.test"), streamTLS, "good.test")
}

func BenchmarkSniffHTTP(b *testing.B) {
	benchmarkSniff(b, []byte("GET / HTTP/1.1\r\nHost: good.test\r\nUser-Agent: curl/8\r\nAccept: */*\r\n\r\n"), streamHTTP, "good.test")
}

// BenchmarkReadFirstTLS reads a ClientHello alone (crypto/tls's, 1.8 KB
// with its post-quantum key share): the gate's loop does it between the
// client's first bytes and the SYN to the destination.
func BenchmarkReadFirstTLS(b *testing.B) {
	h := helloBytes(b, "good.test")
	b.ReportAllocs()
	for b.Loop() {
		if f, err := readFirst(h); err != nil || f.name != "good.test" {
			b.Fatalf("readFirst = %+v, %v", f, err)
		}
	}
}

// BenchmarkGateVerdict is the verdict on a name whose address the recent
// bindings know, the loop's other step before the SYN.
func BenchmarkGateVerdict(b *testing.B) {
	cfg := Config{Allow: []Destination{allowName("good.test"), allowName("api.test"), allowName("*.example.test")}}.WithDefaults()
	bound := []string{"good.test"}
	b.ReportAllocs()
	for b.Loop() {
		if r := cfg.gateVerdict(streamTLS, "good.test", false, 443, bound); r != "" {
			b.Fatal(r)
		}
	}
}

// TestSniff: the first bytes are recognized whether they come at once or
// in pieces, beyond the reused 4 KiB record, and every byte read is kept
// for the replay, in order.
func TestSniff(t *testing.T) {
	hello := helloBytes(t, "good.test")
	bigReq := []byte("GET / HTTP/1.1\r\nHost: good.test\r\nX-Pad: " + string(bytes.Repeat([]byte("a"), 9000)) + "\r\n\r\n")
	for _, tc := range []struct {
		name       string
		pieces     [][]byte
		kind, host string
	}{
		{"tls at once", [][]byte{hello}, streamTLS, "good.test"},
		{"tls in pieces", [][]byte{hello[:1], hello[1:7], hello[7:300], hello[300:]}, streamTLS, "good.test"},
		{"http at once", [][]byte{[]byte("GET / HTTP/1.1\r\nHost: good.test:80\r\n\r\n")}, streamHTTP, "good.test"},
		{"http in pieces", [][]byte{[]byte("GE"), []byte("T / HTTP/1.1\r\nHo"), []byte("st: good.test\r\n\r\n")}, streamHTTP, "good.test"},
		{"http beyond 4 KiB", [][]byte{bigReq[:5000], bigReq[5000:]}, streamHTTP, "good.test"},
		{"ssh banner", [][]byte{[]byte("SSH-2.0-OpenSSH_9.6\r\n")}, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, s := tcpPair(t)
			var sent []byte
			go func() {
				for _, p := range tc.pieces {
					c.Write(p)
					time.Sleep(5 * time.Millisecond)
				}
				c.CloseWrite()
			}()
			for _, p := range tc.pieces {
				sent = append(sent, p...)
			}
			gs := asGateConn(t, s)
			gs.SetReadDeadline(time.Now().Add(5 * time.Second))
			sc := newSniffConn(gs)
			f := sniff(sc)
			if f.kind != tc.kind || f.name != tc.host || (f.refus == "") != (tc.kind != "") {
				t.Errorf("sniff = %+v, want %q %q", f, tc.kind, tc.host)
			}
			if tc.kind != "" && !bytes.Equal(sc.buf, sent[:len(sc.buf)]) {
				t.Errorf("recorded bytes differ from those sent")
			}
			if tc.kind != "" && f.n != len(sent) {
				t.Errorf("read a %d-byte first message of %d bytes sent", f.n, len(sent))
			}
			if tc.kind == streamTLS && len(sc.buf) != len(sent) {
				t.Errorf("recorded %d bytes of the %d-byte ClientHello", len(sc.buf), len(sent))
			}
			sc.release()
		})
	}
}

// TestSniffBudget: past the gate's budget for held bytes a connection is
// refused (busy) before it reads; within it, a request past the
// per-connection cap is refused (too-large).
func TestSniffBudget(t *testing.T) {
	c, s := tcpPair(t)
	c.Write([]byte("GET / HTTP/1.1\r\nHost: good.test\r\n\r\n"))
	heldBytes.Add(maxHeldBytes)
	sc := newSniffConn(asGateConn(t, s))
	f := sniff(sc)
	sc.release()
	heldBytes.Add(-maxHeldBytes)
	if f.refus != GateBusy {
		t.Errorf("over budget: %+v, want busy", f)
	}
	c, s = tcpPair(t)
	go c.Write([]byte("GET / HTTP/1.1\r\nX: " + string(bytes.Repeat([]byte("a"), maxFirstBytes))))
	gs := asGateConn(t, s)
	gs.SetReadDeadline(time.Now().Add(5 * time.Second))
	sc = newSniffConn(gs)
	if f := sniff(sc); f.refus != GateTooLarge || len(sc.buf) != maxFirstBytes {
		t.Errorf("past the cap: %+v after %d bytes, want too-large after %d", f, len(sc.buf), maxFirstBytes)
	}
	sc.release()
	if n := heldBytes.Load(); n != 0 {
		t.Errorf("%d bytes still counted as held", n)
	}
}
