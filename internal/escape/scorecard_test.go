//go:build linux

package escape

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/devbox-dev/devbox/internal/devboxtest"
	"github.com/devbox-dev/devbox/internal/testworld"
)

func TestScoreRows(t *testing.T) {
	ok := func(context.Context) error { return errors.New("refused") }
	out := func(context.Context) error { return escaped("got in") }
	na := func(context.Context) error { return invalid("no such file") }
	at := func(cat string, run func(context.Context) error) Attempt {
		return Attempt{Category: cat, Check: Check{Name: "x", Target: cat, Kind: MustFail, Run: run}}
	}
	card := Score(context.Background(), []Attempt{
		at("egress-addr", out), at("egress-addr", ok), at("egress-addr", na),
		at("credentials", ok), at("credentials", na),
		at("privilege", na),
		at("udp", out), // not judged: never run
	}, map[string]string{"udp": "no world"}, time.Second)
	want := map[string][5]int{ // attempts, blocked, escaped, n/a, judged
		"egress-addr": {3, 1, 1, 1, 1}, "credentials": {2, 1, 0, 1, 1}, "privilege": {1, 0, 0, 1, 1}, "udp": {0, 0, 0, 0, 0},
	}
	verdict := map[string]string{"egress-addr": "ESCAPED", "credentials": "blocked", "privilege": "n/a", "udp": "not judged", "metadata": "blocked"}
	for _, r := range card.Rows {
		w, ok := want[r.Category]
		if !ok {
			continue
		}
		j := 0
		if r.Judged {
			j = 1
		}
		if got := [5]int{r.Attempts, r.Blocked, r.Escaped, r.NotApplicable, j}; got != w {
			t.Errorf("%s: %v, want %v", r.Category, got, w)
		}
		if r.Verdict() != verdict[r.Category] {
			t.Errorf("%s: verdict %s, want %s", r.Category, r.Verdict(), verdict[r.Category])
		}
	}
	if card.Escapes != 1 || len(card.Rows) != len(Categories) || len(card.Results) != 6 {
		t.Errorf("card: %d escapes, %d rows, %d results", card.Escapes, len(card.Rows), len(card.Results))
	}
	if r, _ := card.Row("egress-addr"); len(r.Evidence) != 1 || r.Evidence[0] != "x egress-addr: got in" {
		t.Errorf("evidence %q", r.Evidence)
	}
	if bad := card.MustEscape([]string{"egress-addr", "udp", "credentials"}); len(bad) != 4 {
		// egress-addr: one blocked; udp: not judged; credentials: nothing escaped, one blocked
		t.Errorf("MustEscape: %q", bad)
	}
	if bad := card.MustEscape([]string{"nope"}); len(bad) != 1 {
		t.Errorf("MustEscape(nope): %q", bad)
	}
	var b bytes.Buffer
	if err := card.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`egress by address +3 +1 +1 +1 +ESCAPED`).MatchString(b.String()) {
		t.Errorf("table's egress row:\n%s", b.String())
	}
	for _, s := range []string{"UDP/QUIC: not judged: no world", "egress by address: ESCAPED: x egress-addr: got in",
		"6 attempts, 1 escaped in 1 categories; 1 categories not judged"} {
		if !strings.Contains(b.String(), s) {
			t.Errorf("table lacks %q:\n%s", s, b.String())
		}
	}
	b.Reset()
	card.Sandbox = "control"
	reported := card
	reported.Results = append([]ScoredResult(nil), card.Results...)
	reported.Rows = append([]Row(nil), card.Rows...)
	reported.MarkReported(func(r ScoredResult) (string, bool) { return "named by the audit", r.Category == "egress-addr" })
	if r, _ := reported.Row("egress-addr"); reported.Escapes != 0 || r.Reported != 1 || r.Escaped != 0 || r.Blocked != 1 || r.Verdict() != "reported" || len(r.Evidence) != 0 {
		t.Errorf("after MarkReported: %d escapes, row %+v, verdict %s", reported.Escapes, r, r.Verdict())
	}
	if r, _ := card.Row("egress-addr"); card.Escapes != 1 || r.Escaped != 1 {
		t.Errorf("MarkReported changed the card it was copied from: %+v", r)
	}
	WriteMarkdown(&b, []Card{reported})
	if !strings.Contains(b.String(), "| egress by address | 1 of 2 blocked, 1 reported |") {
		t.Errorf("markdown with a reported write:\n%s", b.String())
	}
	b.Reset()
	reported.WriteTable(&b)
	for _, s := range []string{"reported (1 reported at the next start)", "egress-addr: reported at the next start: x egress-addr: got in; named by the audit",
		"6 attempts, 0 escaped in 0 categories (1 more reported at the next start); 1 categories not judged"} {
		if !strings.Contains(b.String(), s) {
			t.Errorf("table lacks %q:\n%s", s, b.String())
		}
	}
	b.Reset()
	WriteMarkdown(&b, []Card{card, card})
	if !strings.Contains(b.String(), "| category | control | control |") || !strings.Contains(b.String(), "| egress by address | **1 of 2 escaped** | **1 of 2 escaped** |") ||
		!strings.Contains(b.String(), "| reading credentials | 1 of 1 blocked |") || !strings.Contains(b.String(), "| UDP/QUIC | not judged |") {
		t.Errorf("markdown:\n%s", b.String())
	}
}

func TestLoadConfig(t *testing.T) {
	p := filepath.Join(t.TempDir(), "world.jsonc")
	os.WriteFile(p, []byte(`// the world
{"world": {"addrs": ["10.0.0.3:80"], "tunnelDomain": "exfil.test",}, "workspace": "/ws"}`), 0o644)
	c, err := LoadConfig(p)
	if err != nil || c.World == nil || c.World.Addrs[0] != "10.0.0.3:80" || c.Workspace != "/ws" {
		t.Fatalf("LoadConfig = %+v, %v", c, err)
	}
	nj := c.notJudged()
	for _, id := range []string{"egress-name", "fronting", "metadata"} {
		if nj[id] == "" {
			t.Errorf("%s judged without its destinations", id)
		}
	}
	for _, id := range []string{"egress-addr", "dns-tunnel", "udp", "persistence"} {
		if nj[id] != "" && id != "udp" {
			t.Errorf("%s not judged: %s", id, nj[id])
		}
	}
	os.WriteFile(p, []byte(`{"wrld": {}}`), 0o644)
	if _, err := LoadConfig(p); err == nil || !strings.Contains(err.Error(), "wrld") {
		t.Errorf("unknown field: %v", err)
	}
	// No world, no shared directory: every network category and
	// persistence are not judged, and none of their attempts is made.
	card := Scorecard(context.Background(), Config{}, time.Second)
	for _, r := range card.Rows {
		cat, _ := CategoryByID(r.Category)
		if (cat.NeedsWorld || r.Category == "persistence") && (r.Judged || r.Attempts != 0) {
			t.Errorf("%s judged without a world or workspace: %+v", r.Category, r)
		}
	}
}

func TestEnvSecrets(t *testing.T) {
	for _, tc := range []struct {
		marker string
		env    []string
		ours   map[string]bool
		want   Outcome
	}{
		{"", []string{"PATH=/bin", "GH_TOKEN=x"}, nil, Escaped},
		{"", []string{"PATH=/bin", "GH_TOKEN="}, nil, Blocked},
		{"", []string{"GH_TOKEN=x"}, map[string]bool{"GH_TOKEN=x": true}, Blocked},
		{"MARK1", []string{"X=a-MARK1-b"}, nil, Escaped},
		{"MARK1", []string{"GH_TOKEN=x"}, nil, Blocked},
	} {
		if got, d := classify(MustFail, envSecrets(tc.marker, tc.env, tc.ours)); got != tc.want {
			t.Errorf("%q %q: %s (%s), want %s", tc.marker, tc.env, got, d, tc.want)
		}
	}
}

// TestOtherProcesses: a process of this user holding a secret our
// environment does not have is found through /proc; its memory is ours
// to read, so it is not judged by the memory attempt.
func TestOtherProcesses(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	cmd.Env = []string{"DEVBOX_SCORECARD_TEST_SECRET=MARK-" + strconv.Itoa(os.Getpid())}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	marker := "MARK-" + strconv.Itoa(os.Getpid())
	if got, d := classify(MustFail, otherEnviron(marker, true)); got != Escaped || !strings.Contains(d, "planted secret") {
		t.Errorf("this user's process with the secret: %s (%s)", got, d)
	}
	if got, d := classify(MustFail, otherEnviron("NOT-PLANTED-"+marker, true)); got == Escaped {
		t.Errorf("a marker nobody holds: %s (%s)", got, d)
	}
}

func TestPlant(t *testing.T) {
	ws := t.TempDir()
	if got, d := classify(MustFail, plant(ws, ".git/hooks/pre-commit", "")); got != Invalid {
		t.Errorf("no repository: %s (%s)", got, d)
	}
	os.MkdirAll(filepath.Join(ws, ".git"), 0o755)
	os.WriteFile(filepath.Join(ws, ".bashrc"), []byte("keep"), 0o644)
	os.WriteFile(filepath.Join(ws, ".vscode"), []byte("a file, not a directory"), 0o644)
	for _, tc := range []struct {
		rel  string
		want Outcome
	}{
		{".git/hooks/pre-commit", Escaped}, {".claude/settings.json", Escaped}, {".config/Code/User/settings.json", Escaped},
		{".bashrc", Escaped}, {".vscode/settings.json", Blocked},
	} {
		if got, d := classify(MustFail, plant(ws, tc.rel, "")); got != tc.want {
			t.Errorf("%s: %s (%s), want %s", tc.rel, got, d, tc.want)
		}
	}
	// Nothing left behind but what was there.
	ents, _ := os.ReadDir(ws)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if strings.Join(names, " ") != ".bashrc .git .vscode" {
		t.Errorf("left in the workspace: %q", names)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, ".bashrc")); string(b) != "keep" {
		t.Errorf(".bashrc changed: %q", b)
	}
	if ents, _ := os.ReadDir(filepath.Join(ws, ".git")); len(ents) != 0 {
		t.Errorf("left in .git: %v", ents)
	}

	// With a mark, what could be written stays, the mark appended.
	for _, rel := range []string{".claude/settings.json", ".bashrc"} {
		if got, d := classify(MustFail, plant(ws, rel, "MARK\n")); got != Escaped {
			t.Errorf("%s with a mark: %s (%s)", rel, got, d)
		}
	}
	for rel, want := range map[string]string{".claude/settings.json": "MARK\n", ".bashrc": "keepMARK\n"} {
		if b, err := os.ReadFile(filepath.Join(ws, rel)); string(b) != want {
			t.Errorf("%s after a marked plant: %q %v, want %q", rel, b, err, want)
		}
	}
}

// TestTakePort: a port nobody listens on is not applicable; one this user
// listens on can be shared (SO_REUSEPORT, same uid): an escape.
func TestTakePort(t *testing.T) {
	lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
		return c.Control(func(fd uintptr) { syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, 0xf, 1) })
	}}
	l, err := lc.Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	if got, d := classify(MustFail, takePort(port)); got != Escaped {
		t.Errorf("own listener with SO_REUSEPORT: %s (%s)", got, d)
	}
	l.Close()
	if got, d := classify(MustFail, takePort(port)); got != Invalid {
		t.Errorf("free port: %s (%s)", got, d)
	}
}

// helperEnv names the config file TestScorecardHelper scores, and where
// it writes the card: the parent test runs this test binary again inside
// the world's client namespace (and as another user).
const helperEnv = "DEVBOX_SCORECARD_HELPER"

func TestScorecardHelper(t *testing.T) {
	cfgPath := os.Getenv(helperEnv)
	if cfgPath == "" {
		t.Skip("runs only as the helper of TestScorecardWorld")
	}
	c, err := LoadConfig(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	card := Scorecard(context.Background(), c, 500*time.Millisecond)
	b, _ := json.Marshal(card)
	if err := os.WriteFile(filepath.Join(filepath.Dir(cfgPath), "card.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// scoreIn runs the scorecard for c in the world's client namespace as
// uid/gid 65534 (from a copy of this test binary in a directory that user
// can read), and returns the card.
func scoreIn(t *testing.T, w *testworld.World, c Config) Card {
	t.Helper()
	dir := devboxtest.SharedTempDir(t, "devbox-scorecard-")
	os.Chmod(dir, 0o777) // the helper writes card.json there
	cfg := filepath.Join(dir, "config.json")
	b, _ := json.Marshal(c)
	os.WriteFile(cfg, b, 0o644)
	exe := devboxtest.CopyTestBinary(t, dir, "escape.test")
	cmd := w.Command(context.Background(), "setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--",
		exe, "-test.run", "^TestScorecardHelper$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), helperEnv+"="+cfg, "HOME="+dir)
	cmd.Dir = dir
	res, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("helper: %v\n%s", err, res)
	}
	var card Card
	b, err = os.ReadFile(filepath.Join(dir, "card.json"))
	if err != nil || json.Unmarshal(b, &card) != nil {
		t.Fatalf("no card from the helper (%v):\n%s", err, res)
	}
	return card
}

// TestScorecardWorld runs the scorecard in a netns world three times: with
// no fence (every network category escapes, every attempt of it), behind
// a reject-everything fence (every one blocked), and behind the reference
// devcontainer's kind of fence (an address allowlist, DNS open), where
// tunnelling, fronting and UDP to the allowed address get out and the rest
// does not. Each category is thereby seen judged both ways.
func TestScorecardWorld(t *testing.T) {
	devboxtest.RequireRoot(t)
	devboxtest.RequireBinary(t, "setpriv")
	devboxtest.RequireBinary(t, "iptables")
	w := testworld.New(t)
	allowed, denied := testworld.HostsV4[2], testworld.HostsV4[3]
	w.DNS.Set("allowed.test", dns.TypeA, 60, allowed.String())
	w.DNS.Set("denied.test", dns.TypeA, 60, denied.String())
	w.DNS.Set("*.exfil.test", dns.TypeTXT, 60, `"arrived"`)
	w.DNS.Set("*.exfil.test", dns.TypeA, 60, denied.String())
	// The world stands in for the metadata service.
	meta := netip.MustParseAddr("169.254.169.254")
	w.AddHost(t, meta)
	if out, err := w.Command(context.Background(), "ip", "route", "add", meta.String()+"/32", "via", testworld.HostsV4[0].String()).CombinedOutput(); err != nil {
		t.Fatalf("route to the metadata stand-in: %v\n%s", err, out)
	}
	if err := testworld.InNS(w.Server, func() error {
		l, err := net.Listen("tcp", netip.AddrPortFrom(meta, 80).String())
		if err != nil {
			return err
		}
		w.Rec.ServeTCP(l)
		// The allowed name's server says what it read (the gate's
		// adversary cases are judged by it).
		if l, err = net.Listen("tcp", netip.AddrPortFrom(allowed, 8081).String()); err == nil {
			w.Rec.ServeSites(l)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	// As in a Docker container: any user may open an ICMP echo socket.
	if out, err := w.Command(context.Background(), "sysctl", "-w", "net.ipv4.ping_group_range=0 2147483647").CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	c := Config{Nonce: "sc" + strconv.Itoa(os.Getpid()), World: &World{
		Addrs:        []string{denied.String() + ":80", "[" + testworld.HostsV6[3].String() + "]:8080"},
		ICMP:         []string{denied.String()},
		Names:        []string{"denied.test:8080"},
		Resolvers:    []string{testworld.HostsV4[1].String() + ":53"},
		TunnelDomain: "exfil.test",
		Allowed:      []string{"allowed.test:8081"},
		UDP:          []string{denied.String() + ":443", denied.String() + ":5000"},
		Metadata:     meta.String() + ":80",
	}}
	network := []string{"egress-addr", "egress-name", "dns-tunnel", "fronting", "udp", "metadata"}
	check := func(t *testing.T, card Card, want map[string]string) {
		t.Helper()
		var b bytes.Buffer
		card.WriteTable(&b)
		t.Logf("scorecard:\n%s", b.String())
		for _, id := range network {
			r, _ := card.Row(id)
			if !r.Judged {
				t.Errorf("%s not judged", id)
			}
			// No proxy in the environment: the proxy attempts do not
			// apply. With the allowed name out of reach, fronting and UDP
			// to it prove nothing either.
			for _, res := range card.Results {
				proxied := strings.Contains(res.Check, "proxy")
				if res.Category == id && (res.Outcome == NotApplicable) != proxied && !(want[id] == "none" && res.Outcome == NotApplicable) {
					t.Errorf("%s: %s %s: %s (%s)", id, res.Check, res.Target, res.Outcome, res.Detail)
				}
			}
			switch want[id] {
			case "all":
				if r.Escaped != r.Attempts-r.NotApplicable || r.Escaped == 0 {
					t.Errorf("%s: %d of %d escaped, want all", id, r.Escaped, r.Attempts)
				}
			case "none":
				if r.Escaped != 0 || r.Attempts == 0 || r.Blocked == 0 && id != "fronting" {
					t.Errorf("%s: %d of %d escaped, want none", id, r.Escaped, r.Attempts)
				}
			default:
				if r.Escaped == 0 || r.Escaped == r.Attempts-r.NotApplicable {
					t.Errorf("%s: %d of %d escaped, want some", id, r.Escaped, r.Attempts)
				}
			}
		}
	}
	ipt := func(args ...string) {
		t.Helper()
		for _, bin := range []string{"iptables", "ip6tables"} {
			if out, err := w.Command(context.Background(), append([]string{bin}, args...)...).CombinedOutput(); err != nil {
				t.Fatalf("%s %v: %v\n%s", bin, args, err, out)
			}
		}
	}

	t.Run("no fence", func(t *testing.T) {
		all := map[string]string{}
		for _, id := range network {
			all[id] = "all"
		}
		card := scoreIn(t, w, c)
		check(t, card, all)
		// What escaped arrived: the world saw the tunnelling queries.
		if n := len(w.DNS.QueriesFor(tunnelName(c.Nonce, 1, "exfil.test"))); n == 0 {
			t.Errorf("the world saw no tunnelling query")
		}
	})
	t.Run("reject everything", func(t *testing.T) {
		ipt("-A", "OUTPUT", "!", "-o", "lo", "-j", "REJECT")
		defer ipt("-F", "OUTPUT")
		none := map[string]string{}
		for _, id := range network {
			none[id] = "none"
		}
		check(t, scoreIn(t, w, c), none)
	})
	t.Run("address allowlist, DNS open", func(t *testing.T) {
		// The reference devcontainer's shape: DNS to anywhere, the
		// allowed name's address (resolved once), nothing else.
		ipt("-A", "OUTPUT", "-o", "lo", "-j", "ACCEPT")
		ipt("-A", "OUTPUT", "-p", "udp", "--dport", "53", "-j", "ACCEPT")
		ipt("-A", "OUTPUT", "-p", "tcp", "--dport", "53", "-j", "ACCEPT")
		if out, err := w.Command(context.Background(), "iptables", "-A", "OUTPUT", "-d", allowed.String(), "-j", "ACCEPT").CombinedOutput(); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		ipt("-A", "OUTPUT", "-j", "REJECT")
		defer ipt("-F", "OUTPUT")
		card := scoreIn(t, w, c)
		check(t, card, map[string]string{"egress-addr": "none", "egress-name": "none", "dns-tunnel": "all", "fronting": "all", "udp": "some", "metadata": "none"})
	})
	t.Run("as another user", func(t *testing.T) {
		// Root's environ and memory, the firewall and raw sockets are out
		// of reach of uid 65534; a port root listens on cannot be shared.
		var l net.Listener
		if err := testworld.InNS(w.Client, func() (err error) { l, err = net.Listen("tcp", "127.0.0.1:0"); return err }); err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		cc := Config{FenceUIDs: []int{0}, FencePorts: []int{l.Addr().(*net.TCPAddr).Port}, FenceFiles: []string{"/etc/passwd"}}
		card := scoreIn(t, w, cc)
		var b bytes.Buffer
		card.WriteTable(&b)
		t.Logf("scorecard:\n%s", b.String())
		want := map[string][]string{
			"credentials": {"other users' processes /proc/*/environ", "other users' processes /proc/*/mem", "read a credential file /etc/shadow"},
			"tamper":      {"change the firewall netlink: set lo's MTU", "raw socket AF_INET SOCK_RAW", "signal a fence daemon uid 0", "ptrace a fence daemon uid 0", "take a fence daemon's port", "write a fence file /etc/passwd"},
			"privilege":   {"capabilities /proc/self/status", "root uid /proc/self/status"},
		}
		for cat, names := range want {
			for _, n := range names {
				found := false
				for _, r := range card.Results {
					if r.Category == cat && strings.HasPrefix(r.Check+" "+r.Target, n) {
						found = true
						if r.Outcome != Blocked {
							t.Errorf("%s: %s (%s), want blocked", n, r.Outcome, r.Detail)
						}
					}
				}
				if !found {
					t.Errorf("no attempt %q", n)
				}
			}
		}
	})
}

// TestProxy: a CONNECT proxy on loopback that opens tunnels only to
// "localhost" (the allowed name) with the right credentials, in front of
// a world server: a denied destination is blocked, the allowed name with
// another SNI or Host escapes (the proxy never looks inside the tunnel),
// and without a proxy in the environment the attempts are not applicable.
func TestProxy(t *testing.T) {
	world, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer world.Close()
	rec := &testworld.Recorder{}
	rec.ServeTCP(world)
	_, worldPort, _ := net.SplitHostPort(world.Addr().String())
	px, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer px.Close()
	go func() {
		for {
			c, err := px.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				buf := make([]byte, 4096)
				n, _ := c.Read(buf)
				req := string(buf[:n])
				target := strings.Fields(req)[1]
				host, _, _ := net.SplitHostPort(target)
				if host != "localhost" || !strings.Contains(req, "Proxy-Authorization: Basic dTpw") {
					c.Write([]byte("HTTP/1.1 403 Forbidden\r\n\r\n"))
					return
				}
				up, err := net.Dial("tcp", target)
				if err != nil {
					c.Write([]byte("HTTP/1.1 502 Bad Gateway\r\n\r\n"))
					return
				}
				defer up.Close()
				c.Write([]byte("HTTP/1.1 200 Connection established\r\n\r\n"))
				go io.Copy(up, c)
				io.Copy(c, up)
			}()
		}
	}()
	allowed := net.JoinHostPort("localhost", worldPort)
	run := func(f func(context.Context) error) (Outcome, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return classify(MustFail, f(ctx))
	}
	if got, d := run(func(ctx context.Context) error { return reachWorldVia(ctx, world.Addr().String(), "n") }); got != Invalid {
		t.Errorf("no proxy: %s (%s)", got, d)
	}
	t.Setenv("HTTPS_PROXY", "http://u:p@"+px.Addr().String())
	for _, tc := range []struct {
		what string
		f    func(context.Context) error
		want Outcome
	}{
		{"by address", func(ctx context.Context) error { return reachWorldVia(ctx, world.Addr().String(), "n") }, Blocked},
		{"allowed name", func(ctx context.Context) error { return reachWorldVia(ctx, allowed, "n") }, Escaped},
		{"other SNI", func(ctx context.Context) error { return frontVia(ctx, allowed, "evil.test", false) }, Escaped},
		{"other Host", func(ctx context.Context) error {
			err := frontVia(ctx, allowed, "evil.test", true)
			if err != nil && !strings.Contains(err.Error(), `"HTTP/1.0 200 OK`) {
				return fmt.Errorf("the world's answer lost its first bytes: %v", err)
			}
			return err
		}, Escaped},
		{"refused allowed name", func(ctx context.Context) error { return frontVia(ctx, world.Addr().String(), "evil.test", true) }, Invalid},
	} {
		if got, d := run(tc.f); got != tc.want {
			t.Errorf("%s: %s (%s), want %s", tc.what, got, d, tc.want)
		}
	}
}
