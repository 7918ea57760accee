package testworld

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// The servers on loopback, no root needed.
func TestDNSServer(t *testing.T) {
	s := NewDNSServer()
	s.Set("api.test", dns.TypeA, 60, "10.0.0.2", "10.0.0.3")
	s.Set("alias.test", dns.TypeCNAME, 60, "api.test.")
	s.Set("txt.test", dns.TypeTXT, 60, `"hello"`)
	s.Set("*.exfil.test", dns.TypeTXT, 60, `"arrived"`)
	var seen []Query
	s.OnQuery = func(q Query) { seen = append(seen, q) }
	pc, l := ListenDNS(t)
	s.Serve(pc, l)
	defer s.Close()
	addr := pc.LocalAddr().String()
	tests := []struct {
		name, qtype, network string
		rcode                int
		answers              int
	}{
		{"api.test", "A", "udp", dns.RcodeSuccess, 2},
		{"API.test", "A", "tcp", dns.RcodeSuccess, 2},
		{"alias.test", "A", "udp", dns.RcodeSuccess, 3}, // CNAME + 2 A
		{"txt.test", "TXT", "udp", dns.RcodeSuccess, 1},
		{"api.test", "AAAA", "udp", dns.RcodeSuccess, 0},
		{"nope.test", "A", "udp", dns.RcodeNameError, 0},
		{"example.com", "A", "udp", dns.RcodeRefused, 0},
		{"n1-1.data.data.exfil.test", "TXT", "udp", dns.RcodeSuccess, 1}, // the wildcard
		{"n1-2.exfil.test", "TXT", "tcp", dns.RcodeSuccess, 1},
		{"n1-3.exfil.test", "A", "udp", dns.RcodeNameError, 0}, // no A wildcard
		{"exfil.test", "TXT", "udp", dns.RcodeNameError, 0},    // the wildcard is not the parent's
	}
	for _, tt := range tests {
		m := new(dns.Msg)
		m.SetQuestion(dns.Fqdn(tt.name), dns.StringToType[tt.qtype])
		r, _, err := (&dns.Client{Net: tt.network, Timeout: 2 * time.Second}).Exchange(m, addr)
		if err != nil {
			t.Fatalf("%s %s: %v", tt.name, tt.qtype, err)
		}
		if r.Rcode != tt.rcode || len(r.Answer) != tt.answers {
			t.Errorf("%s %s over %s: rcode %s, %d answers; want %s, %d", tt.name, tt.qtype, tt.network, dns.RcodeToString[r.Rcode], len(r.Answer), dns.RcodeToString[tt.rcode], tt.answers)
		}
		if len(r.Answer) > 0 && !strings.EqualFold(r.Answer[len(r.Answer)-1].Header().Name, dns.Fqdn(tt.name)) && tt.name != "alias.test" {
			t.Errorf("%s: answer names %s", tt.name, r.Answer[len(r.Answer)-1].Header().Name)
		}
	}
	if q := s.QueriesFor("api.test"); len(q) != 3 || q[1].Net != "tcp" {
		t.Errorf("QueriesFor(api.test) = %+v", q)
	}
	if len(seen) != len(tests) {
		t.Errorf("OnQuery saw %d queries, want %d", len(seen), len(tests))
	}
	s.SetDown(true)
	m := new(dns.Msg)
	m.SetQuestion("api.test.", dns.TypeA)
	if _, _, err := (&dns.Client{Timeout: 300 * time.Millisecond}).Exchange(m, addr); err == nil {
		t.Error("a down server answered")
	}
	if n := len(s.Queries()); n != len(tests)+1 {
		t.Errorf("a down server did not record the query: %d", n)
	}
}

func TestRecorder(t *testing.T) {
	var r Recorder
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r.ServeTCP(l)
	r.ServeUDP(pc)
	defer r.Close()
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(c).ReadString('\n')
	c.Close()
	if !strings.HasPrefix(line, "HTTP/1.0 200") {
		t.Errorf("tcp answer %q", line)
	}
	u, err := net.Dial("udp", pc.LocalAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	u.SetDeadline(time.Now().Add(2 * time.Second))
	u.Write([]byte("ping"))
	buf := make([]byte, 16)
	n, err := u.Read(buf)
	if err != nil || string(buf[:n]) != "ping" {
		t.Errorf("udp echo %q, %v", buf[:n], err)
	}
	lo := netip.MustParseAddr("127.0.0.1")
	tcpPort := uint16(l.Addr().(*net.TCPAddr).Port)
	if r.Seen(lo, tcpPort) != 1 || r.Seen(lo, 0) != 2 || r.Seen(netip.MustParseAddr("127.0.0.2"), 0) != 0 {
		t.Errorf("recorded %+v", r.Conns())
	}
}

// A certificate exported as PEM loads in another process and verifies
// against the CA for its names.
func TestCertificatePEM(t *testing.T) {
	ca, err := NewCA()
	if err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err := ca.CertificatePEM("api.anthropic.test", "git.test")
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"api.anthropic.test", "git.test"} {
		if _, err := leaf.Verify(x509.VerifyOptions{DNSName: name, Roots: ca.Pool()}); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := leaf.Verify(x509.VerifyOptions{DNSName: "other.test", Roots: ca.Pool()}); err == nil {
		t.Error("the certificate verifies for a name it was not issued for")
	}
}

// TestServeSites: the site recorder reads what a virtual-host server
// would, and says so in its answers: both ClientHellos of a Go client it
// sent a HelloRetryRequest, each request of a kept-alive connection until
// one asks to close, and ServeTCP's answer to a client that only reads.
func TestServeSites(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var r Recorder
	r.ServeSites(l)
	defer r.Close()
	addr := l.Addr().String()
	dial := func() net.Conn {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(5 * time.Second))
		return c
	}

	// TLS: Go's client answers the retry (P-256) with a second hello.
	tc := tls.Client(dial(), &tls.Config{ServerName: "a.test", InsecureSkipVerify: true})
	err = tc.Handshake()
	tc.Close()
	var rh tls.RecordHeaderError
	if !errors.As(err, &rh) || !strings.HasPrefix(string(rh.RecordHeader[:]), "hello") {
		t.Errorf("TLS: %v, want the recorder's clear-text answer after the second hello", err)
	}

	// HTTP: two requests kept alive, the second asking to close; a third
	// (pipelined after it) is never read.
	c := dial()
	io.WriteString(c, "GET /1 HTTP/1.1\r\nHost: a.test\r\n\r\n")
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	if !strings.Contains(string(body), `request="GET /1 HTTP/1.1" host=["a.test"]`) {
		t.Errorf("first answer %q", body)
	}
	io.WriteString(c, "GET /2 HTTP/1.1\r\nHost :b.test\r\nHost: a.test\r\nConnection: close\r\n\r\nGET /3 HTTP/1.1\r\nHost: c.test\r\n\r\n")
	rest, _ := io.ReadAll(br)
	c.Close()
	if !strings.Contains(string(rest), `host=["b.test" "a.test"]`) || strings.Contains(string(rest), "c.test") {
		t.Errorf("second answer %q", rest)
	}

	// A client that only reads.
	c = dial()
	got, _ := io.ReadAll(c)
	c.Close()
	if !strings.Contains(string(got), "hello from "+addr) {
		t.Errorf("banner %q", got)
	}

	var seen []string
	for _, s := range r.Sites() {
		seen = append(seen, fmt.Sprintf("%s %d %d %q", s.Proto, s.Hello, s.Request, s.Names))
	}
	want := []string{`tls 1 0 ["a.test"]`, `tls 2 0 ["a.test"]`, `http 0 1 ["GET /1 HTTP/1.1" "a.test"]`, `http 0 2 ["GET /2 HTTP/1.1" "b.test" "a.test"]`}
	if strings.Join(seen, "\n") != strings.Join(want, "\n") {
		t.Errorf("sites:\n%s\nwant:\n%s", strings.Join(seen, "\n"), strings.Join(want, "\n"))
	}
}
