//go:build linux

package review_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/devbox-dev/devbox/firewall"
	"github.com/devbox-dev/devbox/firewall/fwpolicy"
	"github.com/devbox-dev/devbox/internal/devboxtest"
	"github.com/devbox-dev/devbox/internal/golden"
	"github.com/devbox-dev/devbox/internal/policy"
	"github.com/devbox-dev/devbox/internal/testworld"
)

const worldPolicy = `// The repository's policy: start tight.
{
  "network": {
    "allow": [
      "allowed.test:80", // the one service we know about
    ],
    "dns": {"upstream": ["%s"]},
    "log": {"blocked": true, "file": "%s"},
  },
}
`

// TestReviewWorld runs the loop on a netns world with the real CLI: a
// fenced client makes blocked attempts, `devbox policy review` reports them
// (golden, times masked) and proposes exactly them, --apply writes a file
// that validates and keeps its comments, and after the fence is applied
// again the same attempts pass and nothing else does.
func TestReviewWorld(t *testing.T) {
	devboxtest.RequireRoot(t)
	for _, b := range []string{"ip", "iptables-restore", "bash", "timeout"} {
		devboxtest.RequireBinary(t, b)
	}
	bin := devboxtest.BuildDevbox(t)
	dir := devboxtest.SharedTempDir(t, "devbox-review-")
	w := testworld.New(t)
	for i, n := range []string{"allowed.test", "blocked.test", "other.test"} {
		w.DNS.Set(n, dns.TypeA, 60, testworld.HostsV4[i+1].String())
	}
	logFile := filepath.Join(dir, "firewall.jsonl")
	polFile := filepath.Join(dir, "devbox.policy.jsonc")
	if err := os.WriteFile(polFile, []byte(fmt.Sprintf(worldPolicy, testworld.DNSAddr, logFile)), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := firewall.Config{StateDir: dir}
	apply := func() {
		t.Helper()
		p, err := policy.Load(polFile)
		if err != nil {
			t.Fatal(err)
		}
		c := fwpolicy.Config(p)
		c.StateDir = dir
		cfg = c
		raw, _ := json.Marshal(c)
		cf := filepath.Join(dir, "config.json")
		if err := os.WriteFile(cf, raw, 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := w.Command(context.Background(), bin, "firewall", "apply", "--config", cf).CombinedOutput()
		if err != nil {
			t.Fatalf("firewall apply: %v\n%s", err, out)
		}
	}
	t.Cleanup(func() { firewall.StopDNS(cfg) })
	addrOf := map[string]netip.Addr{}
	for i, n := range []string{"allowed.test", "blocked.test", "other.test"} {
		addrOf[n] = testworld.HostsV4[i+1]
	}
	// connects reports whether a connection to host:port reached the
	// world's server (its recorder saw it): with the name gate on, the
	// client's own connect succeeds locally even when the gate then
	// refuses, so only the far end tells. The request names its Host, as
	// the gate needs.
	connects := func(host string, port int) bool {
		t.Helper()
		addr, ok := addrOf[host]
		if !ok {
			addr = netip.MustParseAddr(host)
		}
		before := w.Rec.Seen(addr, uint16(port))
		script := fmt.Sprintf(`exec 3<>/dev/tcp/%s/%d && printf 'GET / HTTP/1.1\r\nHost: %s\r\n\r\n' >&3 && sleep 0.3`, host, port, host)
		w.Command(context.Background(), "timeout", "3", "bash", "-c", script).Run()
		for range 10 {
			if w.Rec.Seen(addr, uint16(port)) > before {
				return true
			}
			time.Sleep(50 * time.Millisecond)
		}
		return false
	}
	type attempt struct {
		host string
		port int
	}
	// What the agent needs: a name it never resolved (so only the DNS
	// query shows, on 443) and a second port of an allowed name. The raw
	// address is never proposed.
	attempts := []attempt{{"blocked.test", 443}, {"allowed.test", 8080}}
	never := []attempt{{testworld.HostsV4[3].String(), 443}, {"blocked.test", 80}, {"other.test", 443}}

	apply()
	if !connects("allowed.test", 80) {
		t.Fatal("the allowed service does not connect")
	}
	for _, a := range append(append([]attempt{}, attempts...), never[0]) {
		if connects(a.host, a.port) {
			t.Fatalf("%s:%d connects before the review", a.host, a.port)
		}
	}
	// The packet log arrives through NFLOG and the counters every 2 s.
	deadline := time.Now().Add(10 * time.Second)
	for {
		evs, _ := firewall.ReadLog(logFile)
		h, _ := firewall.ReadHits(dir)
		packets := 0
		for _, e := range evs {
			if e.Proto == "tcp" {
				packets++
			}
		}
		if packets >= 2 && len(h.Entries) == 1 && h.Entries[0].Hits > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("log and hit counters incomplete after 10 s: %d events, %d tcp; hits %+v", len(evs), packets, h)
		}
		time.Sleep(200 * time.Millisecond)
	}

	review := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(bin, append([]string{"policy", "review", "--no-image-baseline", "--log", logFile, "--state-dir", dir, "--since", "1h"}, append(args, polFile)...)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("policy review %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	out := review()
	t.Logf("policy review on the world run:\n%s", out)
	masked := regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ`).ReplaceAllString(out, "TIME")
	masked = strings.ReplaceAll(masked, dir, "DIR")
	masked = regexp.MustCompile(`\d+ logged events`).ReplaceAllString(masked, "N logged events")
	masked = regexp.MustCompile(`\d+×`).ReplaceAllStringFunc(masked, func(s string) string { return "N×" })
	golden.Check(t, filepath.Join("testdata", "world.golden"), []byte(masked))

	review("--apply")
	raw, err := os.ReadFile(polFile)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := policy.Load(polFile); err != nil {
		t.Fatalf("the applied policy does not validate: %v\n%s", err, raw)
	}
	for _, c := range []string{"// The repository's policy: start tight.", "// the one service we know about", "// review: "} {
		if !strings.Contains(string(raw), c) {
			t.Errorf("the applied policy lacks %q:\n%s", c, raw)
		}
	}

	apply()
	for _, a := range attempts {
		if !connects(a.host, a.port) {
			t.Errorf("%s:%d still blocked after the reviewed change", a.host, a.port)
		}
	}
	for _, a := range never {
		if connects(a.host, a.port) {
			t.Errorf("%s:%d connects after the reviewed change; only the attempts should", a.host, a.port)
		}
	}
	if !connects("allowed.test", 80) {
		t.Error("the allowed service no longer connects")
	}
}
