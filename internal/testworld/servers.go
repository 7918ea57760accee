// Package testworld is the network the firewall tests talk to: an
// authoritative DNS server for names under .test with a programmable zone
// and a record of every query, and TCP/UDP servers that record every
// connection. On Linux, New builds it in network namespaces (a client whose
// only route leads to a world namespace running the servers); cmd/worldd
// runs the same servers in a container.
package testworld

import (
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"

	"github.com/miekg/dns"
)

// Query is one DNS query the world's server received.
type Query struct {
	Name string // lower case, no trailing dot
	Type string // "A", "TXT", …
	Net  string // "udp" or "tcp"
	From netip.AddrPort
}

// DNSServer answers for the .test zone from records the test sets.
type DNSServer struct {
	mu      sync.Mutex
	records map[string][]dns.RR // key: name + "/" + type
	queries []Query
	down    bool
	servers []*dns.Server
	// OnQuery, when set before serving, is called for every query.
	OnQuery func(Query)
}

// NewDNSServer returns a server with an empty zone.
func NewDNSServer() *DNSServer { return &DNSServer{records: map[string][]dns.RR{}} }

func key(name string, t uint16) string {
	return strings.ToLower(dns.Fqdn(name)) + "/" + dns.TypeToString[t]
}

// Set replaces the records of (name, type) with rrs given in zone-file
// syntax after the type, e.g. Set("a.test", dns.TypeA, 60, "10.77.0.2").
func (s *DNSServer) Set(name string, t uint16, ttl uint32, values ...string) {
	var rrs []dns.RR
	for _, v := range values {
		rr, err := dns.NewRR(fmt.Sprintf("%s %d IN %s %s", dns.Fqdn(name), ttl, dns.TypeToString[t], v))
		if err != nil {
			panic(fmt.Sprintf("testworld: bad record %s %s: %v", name, v, err))
		}
		rrs = append(rrs, rr)
	}
	s.mu.Lock()
	s.records[key(name, t)] = rrs
	s.mu.Unlock()
}

// SetDown makes the server drop every query (still recording it), as an
// unreachable upstream would.
func (s *DNSServer) SetDown(down bool) {
	s.mu.Lock()
	s.down = down
	s.mu.Unlock()
}

// Queries returns every query received so far.
func (s *DNSServer) Queries() []Query {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Query(nil), s.queries...)
}

// QueriesFor returns the queries for name (any type).
func (s *DNSServer) QueriesFor(name string) []Query {
	var out []Query
	name = strings.ToLower(strings.TrimSuffix(name, "."))
	for _, q := range s.Queries() {
		if q.Name == name {
			out = append(out, q)
		}
	}
	return out
}

// ServeDNS implements dns.Handler.
func (s *DNSServer) ServeDNS(w dns.ResponseWriter, r *dns.Msg) {
	if len(r.Question) != 1 {
		return
	}
	q := r.Question[0]
	from, _ := netip.ParseAddrPort(w.RemoteAddr().String())
	network := "udp"
	if _, ok := w.RemoteAddr().(*net.TCPAddr); ok {
		network = "tcp"
	}
	rec := Query{Name: strings.ToLower(strings.TrimSuffix(q.Name, ".")), Type: dns.TypeToString[q.Qtype], Net: network, From: netip.AddrPortFrom(from.Addr().Unmap(), from.Port())}
	if s.OnQuery != nil {
		s.OnQuery(rec)
	}
	s.mu.Lock()
	s.queries = append(s.queries, rec)
	down := s.down
	m := new(dns.Msg)
	m.SetReply(r)
	m.Authoritative = true
	name := strings.ToLower(q.Name)
	switch {
	case !dns.IsSubDomain("test.", name):
		m.Rcode = dns.RcodeRefused
	default:
		// Follow CNAMEs inside the zone, as an authoritative server does.
		for i := 0; i < 8; i++ {
			if c := s.records[key(name, dns.TypeCNAME)]; len(c) > 0 && q.Qtype != dns.TypeCNAME {
				m.Answer = append(m.Answer, c...)
				name = strings.ToLower(c[0].(*dns.CNAME).Target)
				continue
			}
			m.Answer = append(m.Answer, s.records[key(name, q.Qtype)]...)
			if len(m.Answer) == 0 && !s.hasName(name) {
				m.Answer = s.wildcard(name, q.Qtype)
			}
			break
		}
		if len(m.Answer) == 0 && !s.hasName(name) {
			m.Rcode = dns.RcodeNameError
		}
	}
	s.mu.Unlock()
	if down {
		return
	}
	w.WriteMsg(m)
}

// wildcard answers name from the closest "*.PARENT" record of type t, as
// an authoritative server does (RFC 4592, without the finer points): the
// scorecard's tunnelling queries, each a new name, get an answer that
// proves they arrived.
func (s *DNSServer) wildcard(name string, t uint16) []dns.RR {
	for labels := dns.SplitDomainName(name); len(labels) > 1; labels = labels[1:] {
		rrs := s.records[key("*."+strings.Join(labels[1:], "."), t)]
		if len(rrs) == 0 {
			continue
		}
		var out []dns.RR
		for _, rr := range rrs {
			c := dns.Copy(rr)
			c.Header().Name = name
			out = append(out, c)
		}
		return out
	}
	return nil
}

func (s *DNSServer) hasName(name string) bool {
	for k := range s.records {
		if strings.HasPrefix(k, name+"/") {
			return true
		}
	}
	return false
}

// Serve answers on a packet conn and a listener until Close.
func (s *DNSServer) Serve(pc net.PacketConn, l net.Listener) {
	s.mu.Lock()
	for _, srv := range []*dns.Server{{PacketConn: pc, Handler: s}, {Listener: l, Handler: s}} {
		if srv.PacketConn == nil && srv.Listener == nil {
			continue
		}
		s.servers = append(s.servers, srv)
		go srv.ActivateAndServe()
	}
	s.mu.Unlock()
}

// Close stops every server started by Serve.
func (s *DNSServer) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, srv := range s.servers {
		srv.Shutdown()
	}
}

// Conn is one connection or datagram a world server saw.
type Conn struct {
	Proto  string // "tcp" or "udp"
	Local  netip.AddrPort
	Remote netip.AddrPort
}

// Recorder records what the TCP and UDP servers saw.
type Recorder struct {
	// OnConn, when set before serving, is called for every connection or
	// datagram.
	OnConn func(Conn)
	// OnSite, when set before serving, is called for every ClientHello
	// and request a site recorder (ServeSites) reads.
	OnSite func(Site)

	mu      sync.Mutex
	conns   []Conn
	sites   []Site
	closers []func() error
}

// Conns returns what was seen so far.
func (r *Recorder) Conns() []Conn {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Conn(nil), r.conns...)
}

// Seen counts connections/datagrams to local address a (any port if port is 0).
func (r *Recorder) Seen(a netip.Addr, port uint16) int { return countTo(r.Conns(), a, port) }

// countTo counts the conns to local address a (any port if port is 0).
func countTo(conns []Conn, a netip.Addr, port uint16) int {
	n := 0
	for _, c := range conns {
		if c.Local.Addr() == a && (port == 0 || c.Local.Port() == port) {
			n++
		}
	}
	return n
}

func (r *Recorder) record(proto string, local, remote net.Addr) {
	l, _ := netip.ParseAddrPort(local.String())
	rm, _ := netip.ParseAddrPort(remote.String())
	c := Conn{proto, netip.AddrPortFrom(l.Addr().Unmap(), l.Port()), netip.AddrPortFrom(rm.Addr().Unmap(), rm.Port())}
	if r.OnConn != nil {
		r.OnConn(c)
	}
	r.mu.Lock()
	r.conns = append(r.conns, c)
	r.mu.Unlock()
}

// ServeTCP accepts on l: it records each connection, answers a minimal
// HTTP response naming the address it was reached on, and closes.
func (r *Recorder) ServeTCP(l net.Listener) {
	r.accept(l, func(c net.Conn) {
		body := "hello from " + c.LocalAddr().String() + "\n"
		fmt.Fprintf(c, "HTTP/1.0 200 OK\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	})
}

// accept records each connection on l and serves it with serve, which
// the connection's closing follows; Close stops it.
func (r *Recorder) accept(l net.Listener, serve func(net.Conn)) {
	r.mu.Lock()
	r.closers = append(r.closers, l.Close)
	r.mu.Unlock()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			r.record("tcp", c.LocalAddr(), c.RemoteAddr())
			go func() {
				defer c.Close()
				serve(c)
			}()
		}
	}()
}

// ServeUDP records each datagram on pc and echoes it back.
func (r *Recorder) ServeUDP(pc net.PacketConn) {
	r.mu.Lock()
	r.closers = append(r.closers, pc.Close)
	r.mu.Unlock()
	go func() {
		buf := make([]byte, 2048)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			r.record("udp", pc.LocalAddr(), from)
			pc.WriteTo(buf[:n], from)
		}
	}()
}

// Close stops the servers.
func (r *Recorder) Close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range r.closers {
		c()
	}
}

// ListenDNS opens a UDP socket and a TCP listener on one free loopback
// port, as a DNS server on loopback needs (a client retries over TCP on
// the same port); they are closed when tb ends.
func ListenDNS(tb testing.TB) (net.PacketConn, net.Listener) {
	tb.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	l, err := net.Listen("tcp", pc.LocalAddr().String())
	if err != nil {
		pc.Close()
		tb.Fatal(err)
	}
	tb.Cleanup(func() { pc.Close(); l.Close() })
	return pc, l
}
