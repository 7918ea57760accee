//go:build linux

package escape

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/devbox-dev/devbox/internal/testworld"
)

func TestRunCounts(t *testing.T) {
	checks := []Check{
		{Name: "a", Target: "t1", Kind: MustFail, Run: func(context.Context) error { return errors.New("refused") }},
		{Name: "b", Target: "t2", Kind: MustFail, Run: func(context.Context) error { return nil }},
		{Name: "c", Target: "t3", Kind: MustFail, Run: func(context.Context) error { return escaped("got in") }},
		{Name: "d", Target: "t4", Kind: MustWork, Run: func(context.Context) error { return nil }},
		{Name: "e", Target: "t5", Kind: MustWork, Run: func(context.Context) error { return errors.New("timeout") }},
		{Name: "f", Target: "t6", Kind: MustFail, Run: func(context.Context) error { return invalid("no daemon") }},
		{Name: "g", Target: "t7", Kind: MustWork, Run: func(context.Context) error { return &escapedError{"200 OK"} }},
	}
	rep := Run(context.Background(), checks, time.Second)
	want := []Outcome{Blocked, Escaped, Escaped, Works, Broken, Invalid, Works}
	for i, r := range rep.Results {
		if r.Outcome != want[i] {
			t.Errorf("%s: outcome %s, want %s", r.Check, r.Outcome, want[i])
		}
	}
	if rep.Attempts != 4 || rep.Escapes != 2 || rep.Allowed != 3 || rep.Broken != 1 || rep.Invalid != 1 || rep.OK() {
		t.Errorf("report counts = %+v", rep)
	}
	var b bytes.Buffer
	if err := rep.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != len(checks)+2 {
		t.Fatalf("table has %d lines:\n%s", len(lines), b.String())
	}
	if !strings.HasPrefix(lines[0], "CHECK") || !strings.Contains(lines[3], "ESCAPED") || !strings.Contains(lines[3], "got in") {
		t.Errorf("table:\n%s", b.String())
	}
	if got := lines[len(lines)-1]; got != "4 attempts, 2 escapes; 3 allowed checks, 1 broken; 1 checks could not be made" {
		t.Errorf("summary = %q", got)
	}
	if ok := Run(context.Background(), checks[:1], time.Second); !ok.OK() || ok.Summary() != "1 attempts, 0 escapes; 0 allowed checks, 0 broken" {
		t.Errorf("clean run: %+v %q", ok, ok.Summary())
	}
}

func TestConnectTCP(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var world testworld.Recorder
	world.ServeTCP(l)
	defer world.Close()
	closed, _ := net.Listen("tcp", "127.0.0.1:0")
	closedAddr := closed.Addr().String()
	closed.Close()
	for _, tc := range []struct {
		addr string
		want Outcome
	}{{l.Addr().String(), Escaped}, {closedAddr, Blocked}} {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		got, detail := classify(MustFail, connectTCP(ctx, tc.addr))
		cancel()
		if got != tc.want {
			t.Errorf("%s: %s (%s), want %s", tc.addr, got, detail, tc.want)
		}
	}
}

// dnsServer answers A and TXT for names under open.test and REFUSES the
// rest, on loopback, over UDP and TCP.
func dnsServer(t *testing.T) (addr string, seen func() []string) {
	t.Helper()
	var names = make(chan string, 100)
	h := dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(r)
		q := r.Question[0]
		names <- q.Name
		if !strings.HasSuffix(q.Name, "open.test.") {
			m.Rcode = dns.RcodeRefused
		} else if q.Qtype == dns.TypeTXT {
			m.Answer = append(m.Answer, &dns.TXT{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeTXT, Class: dns.ClassINET, Ttl: 5}, Txt: []string{"data"}})
		} else {
			m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 5}, A: net.IPv4(127, 0, 0, 1)})
		}
		w.WriteMsg(m)
	})
	pc, l := testworld.ListenDNS(t)
	us := &dns.Server{PacketConn: pc, Handler: h}
	ts := &dns.Server{Listener: l, Handler: h}
	go us.ActivateAndServe()
	go ts.ActivateAndServe()
	t.Cleanup(func() { us.Shutdown(); ts.Shutdown() })
	return pc.LocalAddr().String(), func() []string {
		var out []string
		for {
			select {
			case n := <-names:
				out = append(out, n)
			default:
				return out
			}
		}
	}
}

func TestDNSQuery(t *testing.T) {
	addr, seen := dnsServer(t)
	for _, tc := range []struct {
		proto, name string
		qtype       uint16
		want        Outcome
	}{
		{"udp", tunnelName("n1", 1, "open.test"), dns.TypeTXT, Escaped},
		{"tcp", tunnelName("n1", 2, "open.test"), dns.TypeA, Escaped},
		{"udp", tunnelName("n1", 3, "shut.test"), dns.TypeTXT, Blocked},
		{"tcp", tunnelName("n1", 4, "shut.test"), dns.TypeA, Blocked},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		got, detail := classify(MustFail, dnsQuery(ctx, tc.proto, addr, tc.name, tc.qtype))
		cancel()
		if got != tc.want {
			t.Errorf("%s %s: %s (%s), want %s", tc.proto, tc.name, got, detail, tc.want)
		}
	}
	// Every query carried the nonce: that is what the world's log is
	// searched for.
	names := seen()
	if len(names) != 4 {
		t.Fatalf("server saw %d queries: %q", len(names), names)
	}
	for _, n := range names {
		if !strings.HasPrefix(n, "n1-") || len(n) < 63*2 {
			t.Errorf("query name %q lacks the nonce or the long labels", n)
		}
	}
}

func TestUDPEcho(t *testing.T) {
	echo, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var world testworld.Recorder
	world.ServeUDP(echo)
	defer world.Close()
	silent, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	for _, tc := range []struct {
		addr string
		want Outcome
	}{{echo.LocalAddr().String(), Escaped}, {silent.LocalAddr().String(), Blocked}} {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		got, detail := classify(MustFail, udpEcho(ctx, tc.addr, "n"))
		cancel()
		if got != tc.want {
			t.Errorf("%s: %s (%s), want %s", tc.addr, got, detail, tc.want)
		}
	}
}

func TestFiles(t *testing.T) {
	dir := t.TempDir()
	existing := filepath.Join(dir, "config")
	os.WriteFile(existing, []byte("keep"), 0o644)
	os.Mkdir(filepath.Join(dir, "hooks"), 0o755)
	for _, tc := range []struct {
		name string
		err  error
		want Outcome
	}{
		{"write existing", writeFile(existing), Escaped},
		{"create new", writeFile(filepath.Join(dir, "hooks", "pre-commit")), Escaped},
		{"create in missing dir", writeFile(filepath.Join(dir, "nodir", "x")), Blocked},
		{"read", readFile(existing), Escaped},
		{"list", readFile(dir), Escaped},
		{"read missing", readFile(filepath.Join(dir, "nope")), Invalid},
		{"rename", renameAway(filepath.Join(dir, "hooks")), Escaped},
		{"rename missing", renameAway(filepath.Join(dir, "nope")), Invalid},
	} {
		if got, detail := classify(MustFail, tc.err); got != tc.want {
			t.Errorf("%s: %s (%s), want %s", tc.name, got, detail, tc.want)
		}
	}
	// The probes must leave what they touched as it was.
	if b, _ := os.ReadFile(existing); string(b) != "keep" {
		t.Errorf("existing file changed to %q", b)
	}
	if _, err := os.Stat(filepath.Join(dir, "hooks", "pre-commit")); !os.IsNotExist(err) {
		t.Errorf("probe file left behind: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "hooks")); err != nil {
		t.Errorf("renamed directory not put back: %v", err)
	}
}

func TestChecksList(t *testing.T) {
	cs := Checks(Targets{
		AllowedURLs: []string{"http://allowed.test:8080/"}, DeniedNames: []string{"denied.test:80"},
		Resolvers: []string{"10.0.0.2:53"}, TunnelDomain: "exfil.test", Nonce: "zz",
		Workspace: "/ws", ReadDenied: []string{"/root/secret"}, DNSFilterAddrs: []string{"127.0.0.1:53535"},
	})
	var names []string
	counts := map[Kind]int{}
	for _, c := range cs {
		names = append(names, c.Name+" "+c.Target)
		counts[c.Kind]++
		if c.Name == "DNS tunnelling" || c.Name == "DNS to another resolver" {
			if !strings.Contains(c.Target, "zz-") {
				t.Errorf("%s %s: no nonce in the query name", c.Name, c.Target)
			}
		}
	}
	all := strings.Join(names, "\n")
	for _, want := range []string{
		"connect to a non-allowed name denied.test:80",
		"DNS to another resolver 10.0.0.2:53 tcp/TXT",
		"DNS tunnelling container resolver udp/TXT",
		"change the firewall iptables -F", "change the firewall ipset flush", "change the firewall nft flush ruleset",
		"kill the DNS filter uid 998", "replace the DNS filter 127.0.0.1:53535",
		"sudo sudo -n id -u", "su su -c 'id -u' root",
		"write a file the host runs /ws/.git/hooks/pre-commit", "write a file the host runs /ws/.devcontainer/devcontainer.json",
		"read another user's file /root/secret", "reach an allowed URL http://allowed.test:8080/",
	} {
		if !strings.Contains(all, want) {
			t.Errorf("no check %q in:\n%s", want, all)
		}
	}
	if strings.Contains(all, "metadata") {
		t.Errorf("metadata check present without a target")
	}
	if counts[MustWork] != 1 || counts[MustFail] < 30 {
		t.Errorf("counts = %v", counts)
	}
}

func TestNotAsRoot(t *testing.T) {
	ran := false
	err := notAsRoot(func(context.Context) error { ran = true; return errors.New("denied") })(context.Background())
	if os.Geteuid() == 0 {
		if ran || !errors.As(err, new(*InvalidError)) {
			t.Errorf("as root: ran=%v err=%v", ran, err)
		}
		return
	}
	if !ran || err.Error() != "denied" {
		t.Errorf("as a user: ran=%v err=%v", ran, err)
	}
}

// TestGatedName: against a server that answers (no gate in the way) the
// SNI and Host checks see an escape; against one that sends a TLS alert,
// or resets, they see a block. Loopback servers stand for the world, and
// "localhost" for the allowed name.
func TestGatedName(t *testing.T) {
	serve := func(answer func(net.Conn)) string {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				go func() { answer(c); c.Close() }()
			}
		}()
		_, port, _ := net.SplitHostPort(l.Addr().String())
		return net.JoinHostPort("localhost", port)
	}
	plain := serve(func(c net.Conn) { c.Write([]byte("HTTP/1.0 200 OK\r\n\r\nhello\n")) })
	gate := serve(func(c net.Conn) {
		c.Read(make([]byte, 4096))
		c.Write([]byte{0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 49}) // the gate's access_denied
	})
	reset := serve(func(c net.Conn) {
		c.Read(make([]byte, 4096))
		c.(*net.TCPConn).SetLinger(0)
	})
	for _, tc := range []struct {
		what string
		run  func(context.Context) error
		want Outcome
	}{
		{"sni, plain server", func(ctx context.Context) error { return sniMismatch(ctx, plain, "evil.test") }, Escaped},
		{"host, plain server", func(ctx context.Context) error { return hostMismatch(ctx, plain, "evil.test") }, Escaped},
		{"sni, gate alert", func(ctx context.Context) error { return sniMismatch(ctx, gate, "evil.test") }, Blocked},
		{"no sni, gate alert", func(ctx context.Context) error { return sniMismatch(ctx, gate, "") }, Blocked},
		{"host, reset", func(ctx context.Context) error { return hostMismatch(ctx, reset, "evil.test") }, Blocked},
		{"sni, reset", func(ctx context.Context) error { return sniMismatch(ctx, reset, "evil.test") }, Blocked},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		got, detail := classify(MustFail, tc.run(ctx))
		cancel()
		if got != tc.want {
			t.Errorf("%s: %s (%s), want %s", tc.what, got, detail, tc.want)
		}
	}
	cs := Checks(Targets{GatedNames: []string{"allowed.test:443"}, GatedUDP: []string{"allowed.test:443"}, TunnelDomain: "exfil.test", Nonce: "zz"})
	n := 0
	for _, c := range cs {
		if strings.HasPrefix(c.Name, "allowed name's address") || c.Name == "UDP to an allowed name (QUIC)" {
			n++
			if c.Kind != MustFail {
				t.Errorf("%s is not an escape attempt", c.Name)
			}
		}
	}
	if n != 4+len(gateSites) {
		t.Errorf("%d gate checks, want %d", n, 4+len(gateSites))
	}
}
