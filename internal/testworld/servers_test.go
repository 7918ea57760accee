package testworld

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"net"
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
