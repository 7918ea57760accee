//go:build linux

package firewall

import (
	"bufio"
	"crypto/tls"
	"net"
	"testing"
)

// clientHello returns the first flight of a crypto/tls client asking for
// name (post-quantum key share included, as today's clients send).
func clientHello(tb testing.TB, name string) []byte {
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
	l, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	b.ReportAllocs()
	for b.Loop() {
		c, err := net.DialTCP("tcp", nil, l.Addr().(*net.TCPAddr))
		if err != nil {
			b.Fatal(err)
		}
		s, err := l.AcceptTCP()
		if err != nil {
			b.Fatal(err)
		}
		c.Write(first)
		kind, name, _ := sniff(&sniffConn{TCPConn: s})
		if kind != wantKind || name != wantName {
			b.Fatalf("sniff = %q %q, want %q %q", kind, name, wantKind, wantName)
		}
		c.Close()
		s.Close()
	}
}

func BenchmarkSniffTLS(b *testing.B) {
	benchmarkSniff(b, clientHello(b, "good.test"), streamTLS, "good.test")
}

func BenchmarkSniffHTTP(b *testing.B) {
	benchmarkSniff(b, []byte("GET / HTTP/1.1\r\nHost: good.test\r\nUser-Agent: curl/8\r\nAccept: */*\r\n\r\n"), streamHTTP, "good.test")
}
