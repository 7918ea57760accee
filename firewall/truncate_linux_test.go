package firewall

import (
	"net"
	"testing"

	"github.com/miekg/dns"
)

// TestTruncateUDP: one rule for every UDP answer: 512 bytes, or the EDNS0
// size the query advertised, never less than 512.
func TestTruncateUDP(t *testing.T) {
	answer := func() *dns.Msg {
		m := new(dns.Msg)
		m.SetQuestion("big.test.", dns.TypeA)
		for i := range 100 {
			m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: "big.test.", Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 60}, A: net.IPv4(10, 0, byte(i/256), byte(i))})
		}
		return m
	}
	if n := answer().Len(); n <= 1232 {
		t.Fatalf("test answer is only %d bytes", n)
	}
	for _, tc := range []struct {
		edns    uint16 // 0: no EDNS0
		max     int
		wantTC  bool
		wantAll bool
	}{
		{0, 512, true, false},
		{100, 512, true, false}, // below the minimum: 512 all the same
		{1232, 1232, true, false},
		{65000, 65000, false, true},
	} {
		q := new(dns.Msg)
		q.SetQuestion("big.test.", dns.TypeA)
		if tc.edns != 0 {
			q.SetEdns0(tc.edns, false)
		}
		m := answer()
		truncateUDP(m, q)
		b, err := m.Pack()
		if err != nil {
			t.Fatal(err)
		}
		if len(b) > tc.max || m.Truncated != tc.wantTC || (len(m.Answer) == 100) != tc.wantAll {
			t.Errorf("edns %d: %d bytes, TC %v, %d answers; want at most %d bytes, TC %v", tc.edns, len(b), m.Truncated, len(m.Answer), tc.max, tc.wantTC)
		}
		if tc.max == 512 && len(b) < 400 {
			t.Errorf("edns %d: cut to %d bytes, below what 512 holds", tc.edns, len(b))
		}
	}
}
