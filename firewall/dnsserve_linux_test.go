//go:build linux

package firewall

import (
	"maps"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// TestServeUDP runs the filter's UDP path on loopback without root (no
// sets: the names asked here have no addresses to insert) against an
// upstream that first sends a stale answer with another id: the filter
// must skip it, forward the client's query bytes unchanged, refuse names
// the policy does not allow without asking upstream, and ignore packets
// that are not queries.
func TestServeUDP(t *testing.T) {
	up, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close()
	seen := make(chan *dns.Msg, 16)
	go func() {
		buf := make([]byte, 4096)
		for {
			n, from, err := up.ReadFromUDPAddrPort(buf)
			if err != nil {
				return
			}
			q := new(dns.Msg)
			if q.Unpack(buf[:n]) != nil {
				continue
			}
			seen <- q
			stale := new(dns.Msg)
			stale.SetReply(q)
			stale.Id = q.Id + 1
			stale.Answer = []dns.RR{&dns.TXT{Hdr: dns.RR_Header{Name: q.Question[0].Name, Rrtype: dns.TypeTXT, Class: dns.ClassINET, Ttl: 60}, Txt: []string{"stale"}}}
			m := new(dns.Msg)
			m.SetReply(q)
			m.Answer = []dns.RR{&dns.TXT{Hdr: dns.RR_Header{Name: q.Question[0].Name, Rrtype: dns.TypeTXT, Class: dns.ClassINET, Ttl: 60}, Txt: []string{"fresh"}}}
			for _, r := range []*dns.Msg{stale, m} {
				raw, _ := r.Pack()
				up.WriteToUDPAddrPort(raw, from)
			}
		}
	}()
	cfg := Config{
		Allow:    []Destination{{Name: "api.test"}, {Name: "test", Wildcard: true, Port: 443}, {Name: "unused.test"}},
		StateDir: t.TempDir(),
		Upstream: []netip.AddrPort{up.LocalAddr().(*net.UDPAddr).AddrPort()},
		NoCache:  true,
	}.WithDefaults()
	f := &filter{cfg: cfg, ups: cfg.Upstream, log: &eventLog{}, dialer: &net.Dialer{},
		errw:      testWriter{t},
		entryHits: make([]entryCounter, len(cfg.Allow)), started: time.Now()}
	pc, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- f.serveUDP(pc) }()
	defer func() {
		pc.Close()
		if err := <-done; err != nil {
			t.Errorf("serveUDP: %v", err)
		}
	}()

	client := &dns.Client{Timeout: 2 * time.Second}
	tests := []struct {
		name      string
		rcode     int
		txt       string
		upstream  bool
		withEDNS0 bool
	}{
		{"api.test.", dns.RcodeSuccess, "fresh", true, false},
		{"api.test.", dns.RcodeSuccess, "fresh", true, true},
		{"other.invalid.", dns.RcodeRefused, "", false, false},
	}
	for _, tt := range tests {
		q := new(dns.Msg)
		q.SetQuestion(tt.name, dns.TypeTXT)
		if tt.withEDNS0 {
			q.SetEdns0(1232, true)
		}
		r, _, err := client.Exchange(q, pc.LocalAddr().String())
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if r.Rcode != tt.rcode || r.Id != q.Id {
			t.Errorf("%s: rcode %s id %d, want %s id %d", tt.name, dns.RcodeToString[r.Rcode], r.Id, dns.RcodeToString[tt.rcode], q.Id)
		}
		if tt.txt != "" && (len(r.Answer) != 1 || r.Answer[0].(*dns.TXT).Txt[0] != tt.txt) {
			t.Errorf("%s: answer %v, want the %q one", tt.name, r.Answer, tt.txt)
		}
		select {
		case got := <-seen:
			if !tt.upstream {
				t.Errorf("%s reached the upstream", tt.name)
			}
			if got.Id != q.Id || (got.IsEdns0() != nil) != tt.withEDNS0 {
				t.Errorf("%s: upstream got id %d edns %v, want the client's query as sent", tt.name, got.Id, got.IsEdns0())
			}
		default:
			if tt.upstream {
				t.Errorf("%s was not forwarded", tt.name)
			}
		}
	}
	// A response sent at the filter gets no answer.
	resp := new(dns.Msg)
	resp.SetQuestion("api.test.", dns.TypeA)
	resp.Response = true
	c, err := net.DialUDP("udp", nil, pc.LocalAddr().(*net.UDPAddr))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	raw, _ := resp.Pack()
	c.Write(raw)
	c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if n, err := c.Read(make([]byte, 512)); err == nil {
		t.Errorf("a response packet got %d bytes back", n)
	}
	if got := f.queries.Load(); got != 3 {
		t.Errorf("queries = %d, want 3", got)
	}
	// Each allowed query counts for every allow entry that matches it;
	// refused ones count for none.
	if err := f.writeHits(); err != nil {
		t.Fatal(err)
	}
	h, err := ReadHits(cfg.StateDir)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, e := range h.Entries {
		got[e.Entry] = e.Hits
		if (e.Hits > 0) != !e.Last.IsZero() || e.First.After(e.Last) {
			t.Errorf("%s: %d hits, first %v, last %v", e.Entry, e.Hits, e.First, e.Last)
		}
	}
	if want := map[string]int64{"api.test": 2, "*.test:443": 2, "unused.test": 0}; !maps.Equal(got, want) {
		t.Errorf("hits = %v, want %v", got, want)
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) { w.t.Log(string(p)); return len(p), nil }
