package firewall

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/devbox-dev/devbox/internal/golden"
)

// TestRulesGolden compiles every testdata/rules-*.json Config and compares
// the iptables-restore text with testdata/rules-*.golden.
func TestRulesGolden(t *testing.T) {
	golden.ForEach(t, "testdata/rules-*.json", func(t *testing.T, in, name string) {
		cfg, err := LoadConfig(in)
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		for _, rs := range Rules(cfg) {
			b.WriteString("# " + rs.Family.String() + "\n" + rs.String())
		}
		golden.Check(t, filepath.Join("testdata", name+".golden"), []byte(b.String()))
	})
}

func TestRestoreSkipsPresentJumps(t *testing.T) {
	for _, rs := range Rules(Config{}) {
		all := rs.Restore(func(Jump) bool { return true })
		if strings.Contains(all, "-I ") {
			t.Errorf("%v: jumps re-inserted although present:\n%s", rs.Family, all)
		}
		none := rs.Restore(nil)
		if n := strings.Count(none, "-I "); n != len(rs.Jumps) {
			t.Errorf("%v: %d jumps inserted, want %d", rs.Family, n, len(rs.Jumps))
		}
		// Never flush a chain that is not ours.
		for _, line := range strings.Split(none, "\n") {
			if strings.HasPrefix(line, "-F ") && !strings.HasPrefix(line, "-F DEVBOX-") {
				t.Errorf("%v: flushes a foreign chain: %q", rs.Family, line)
			}
		}
	}
}

func TestMatch(t *testing.T) {
	cfg := Config{
		Allow: []Destination{
			{Name: "api.example.test"},
			{Name: "example.test", Wildcard: true},
			{Name: "git.example.test", Port: 22},
			{Name: "only443.test", Port: 443},
			{Name: "only443.test", Port: 8443},
		},
		Deny: []Destination{
			{Name: "evil.example.test"}, {Name: "bad.test", Wildcard: true},
			{Name: "no443.example.test", Port: 443},
			{Name: "example.test", Wildcard: true, Port: 25},
			{Name: "only443.test", Port: 8443},
			{Name: "unlisted.test", Port: 443},
		},
	}
	tests := []struct {
		name      string
		allowed   bool
		reason    string
		anyPort   bool
		ports     []uint16
		denyPorts []uint16
	}{
		{"api.example.test", true, "", true, nil, []uint16{25}},
		{"API.Example.Test.", true, "", true, nil, []uint16{25}},
		{"x.y.example.test", true, "", true, nil, []uint16{25}},
		{"example.test", false, "not-allowed", false, nil, nil}, // wildcard is subdomains only
		{"evil.example.test", false, "denied", false, nil, nil},
		{"a.bad.test", false, "denied", false, nil, nil},
		{"git.example.test", true, "", true, nil, []uint16{25}}, // also matched by the wildcard
		// A deny entry with a port keeps the name resolvable and closes that port.
		{"no443.example.test", true, "", true, nil, []uint16{443, 25}},
		{"only443.test", true, "", false, []uint16{443, 8443}, []uint16{8443}},
		{"unlisted.test", false, "not-allowed", false, nil, nil},
		{"other.test", false, "not-allowed", false, nil, nil},
		{"api.example.test\x00.evil", false, "invalid-name", false, nil, nil},
		{"", false, "invalid-name", false, nil, nil},
	}
	for _, tt := range tests {
		v := cfg.Match(tt.name)
		if v.Allowed != tt.allowed || v.Reason != tt.reason || v.AnyPort != tt.anyPort || !slices.Equal(v.Ports, tt.ports) || !slices.Equal(v.DenyPorts, tt.denyPorts) {
			t.Errorf("Match(%q) = %+v, want allowed=%v reason=%q anyPort=%v ports=%v denyPorts=%v", tt.name, v, tt.allowed, tt.reason, tt.anyPort, tt.ports, tt.denyPorts)
		}
	}
}

func TestAddressVerdict(t *testing.T) {
	cfg := Config{Deny: []Destination{{Prefix: mustPrefix("10.66.0.0/16")}}}
	tests := map[string]string{
		"93.184.216.34":    "",
		"2001:db8::1":      "",
		"127.0.0.1":        "loopback",
		"::1":              "loopback",
		"169.254.169.254":  "metadata",
		"169.254.1.1":      "link-local",
		"fe80::1":          "link-local",
		"fd00:ec2::254":    "metadata",
		"0.0.0.0":          "unspecified",
		"::":               "unspecified",
		"::ffff:127.0.0.1": "loopback",
		"10.66.3.4":        "denied",
		"224.0.0.1":        "multicast",
	}
	for addr, want := range tests {
		if got := cfg.AddressVerdict(mustAddr(addr)); got != want {
			t.Errorf("AddressVerdict(%s) = %q, want %q", addr, got, want)
		}
	}
}

func TestConfigJSONRoundTrip(t *testing.T) {
	in := Config{
		Allow: []Destination{{Name: "a.test", Port: 443}, {Prefix: mustPrefix("10.0.0.0/8")}, {Name: "w.test", Wildcard: true}},
		Deny:  []Destination{{Prefix: mustPrefix("fd00::/8")}},
		Log:   true,
	}
	raw, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "c.json")
	os.WriteFile(p, raw, 0o644)
	out, err := LoadConfig(p)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := json.Marshal(out); string(got) != string(raw) {
		t.Errorf("round trip changed the config:\n%s\n%s", raw, got)
	}
}

func TestValidate(t *testing.T) {
	bad := []Config{
		{Allow: []Destination{{}}},
		{Allow: []Destination{{Name: "a.test", Prefix: mustPrefix("10.0.0.0/8")}}},
		{Allow: []Destination{{Name: "A.test"}}},
		{Allow: []Destination{{Name: "a\x00.test"}}},
		{Deny: []Destination{{Name: "-"}, {Name: "..x"}}},
		{MinTTL: 10, MaxTTL: 5},
	}
	for i, c := range bad {
		if err := c.Validate(); err == nil {
			t.Errorf("config %d validated: %+v", i, c)
		}
	}
	if err := (Config{Allow: []Destination{{Name: "ok-name_1.test"}}}).Validate(); err != nil {
		t.Errorf("good config refused: %v", err)
	}
}

// TestDockerDNSForwardsExempt checks that dockerd's forwards (uid 0, port
// 53, not to a local address) skip the redirect and are accepted before the
// unmarked-DNS block, in both families — and only when the upstream is
// Docker's embedded DNS.
func TestDockerDNSForwardsExempt(t *testing.T) {
	tests := []struct {
		name     string
		upstream []string
		exempt   bool
	}{
		{"resolv.conf not read by Rules", nil, false},
		{"another resolver", []string{"10.77.0.1:53"}, false},
		{"Docker's embedded DNS", []string{"127.0.0.11:53"}, true},
		{"embedded DNS among others", []string{"10.77.0.1:53", "127.0.0.11:53"}, true},
		{"IPv4-mapped embedded DNS", []string{"[::ffff:127.0.0.11]:53"}, true},
		{"127.0.0.11 on another port", []string{"127.0.0.11:5353"}, false},
		{"another loopback resolver", []string{"127.0.0.53:53"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var cfg Config
			for _, u := range tt.upstream {
				cfg.Upstream = append(cfg.Upstream, netip.MustParseAddrPort(u))
			}
			for _, rs := range Rules(cfg) {
				lines := strings.Split(rs.String(), "\n")
				for _, p := range []string{"udp", "tcp"} {
					match := fmt.Sprintf("-p %s -m %s --dport 53 -m addrtype ! --dst-type LOCAL -m owner --uid-owner 0", p, p)
					accept := indexOf(lines, "-A "+ChainOutput+" "+match+" -j ACCEPT")
					ret := indexOf(lines, "-A "+ChainDNS+" "+match+" -j RETURN")
					if !tt.exempt {
						if accept >= 0 || ret >= 0 || strings.Contains(rs.String(), "owner") {
							t.Errorf("%v: exemption present without Docker's DNS upstream:\n%s", rs.Family, rs)
						}
						continue
					}
					block := indexOf(lines, fmt.Sprintf("-A %s -p %s -m %s --dport 53 -m mark ! --mark 0x%x -j %s", ChainOutput, p, p, DefaultMark, ChainBlocked))
					redirect := indexOf(lines, fmt.Sprintf("-A %s -p %s -m %s --dport 53 -j REDIRECT --to-ports %d", ChainDNS, p, p, DefaultDNSPort))
					if accept < 0 || block < 0 || accept > block {
						t.Errorf("%v %s: accept at %d, unmarked-DNS block at %d: want the accept first", rs.Family, p, accept, block)
					}
					if ret < 0 || redirect < 0 || ret > redirect {
						t.Errorf("%v %s: return at %d, redirect at %d: want the return first", rs.Family, p, ret, redirect)
					}
				}
				// Never keyed on any uid but root's.
				if n := strings.Count(rs.String(), "--uid-owner"); tt.exempt && n != strings.Count(rs.String(), "--uid-owner 0 ") {
					t.Errorf("%v: a uid other than 0 in the rules:\n%s", rs.Family, rs)
				}
			}
		})
	}
}

func indexOf(lines []string, want string) int {
	for i, l := range lines {
		if l == want {
			return i
		}
	}
	return -1
}

// TestEffectiveUpstream: the policy's upstream wins; else resolv.conf's
// nameservers (port 53); an unreadable file gives none (no exemption).
func TestEffectiveUpstream(t *testing.T) {
	dir := t.TempDir()
	docker := filepath.Join(dir, "docker")
	os.WriteFile(docker, []byte("nameserver 127.0.0.11\noptions ndots:0\n"), 0o644)
	two := filepath.Join(dir, "two")
	os.WriteFile(two, []byte("# c\nnameserver 10.0.0.1\nnameserver fe80::1%eth0\nsearch x.test\n"), 0o644)
	tests := []struct {
		name string
		cfg  Config
		want string
	}{
		{"policy upstream", Config{Upstream: []netip.AddrPort{netip.MustParseAddrPort("10.9.9.9:5353")}, ResolvConf: docker}, "[10.9.9.9:5353]"},
		{"docker resolv.conf", Config{ResolvConf: docker}, "[127.0.0.11:53]"},
		{"two nameservers", Config{ResolvConf: two}, "[10.0.0.1:53 [fe80::1]:53]"},
		{"unreadable", Config{ResolvConf: filepath.Join(dir, "none")}, "[]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := fmt.Sprint(EffectiveUpstream(tt.cfg).Upstream); got != tt.want {
				t.Errorf("EffectiveUpstream = %s, want %s", got, tt.want)
			}
		})
	}
	// The exemption follows: compiled for Docker's resolver only.
	for _, tt := range []struct {
		resolv string
		want   bool
	}{{docker, true}, {two, false}} {
		text := Rules(EffectiveUpstream(Config{ResolvConf: tt.resolv}))[0].String()
		if got := strings.Contains(text, "--uid-owner 0"); got != tt.want {
			t.Errorf("%s: exemption compiled = %v, want %v", tt.resolv, got, tt.want)
		}
	}
}

// TestRulesProtect: with protected hosts, their set is checked before any
// allow, and only the gateway's uid passes it.
func TestRulesProtect(t *testing.T) {
	for _, rs := range Rules(Config{Allow: []Destination{{Name: "api.anthropic.test", Port: 443}}, Protect: []string{"api.anthropic.test"}}) {
		text := rs.Restore(nil)
		rule := fmt.Sprintf("-A DEVBOX-OUTPUT -m set --match-set %s dst -j DEVBOX-PROTECT", SetName(SetProtect, rs.Family))
		i := strings.Index(text, rule)
		j := strings.Index(text, "--match-set "+SetName(SetAllow, rs.Family))
		if i < 0 || j < 0 || i > j {
			t.Errorf("%v: protect rule missing or after the allow sets:\n%s", rs.Family, text)
		}
		for _, r := range []string{"-A DEVBOX-PROTECT -m owner --uid-owner 996 -j RETURN", "-A DEVBOX-PROTECT -j DEVBOX-DENIED"} {
			if !strings.Contains(text, r+"\n") {
				t.Errorf("%v: no %q", rs.Family, r)
			}
		}
		if strings.Contains(text, "--uid-owner 997") {
			t.Errorf("%v: the gate's uid passes without the gate", rs.Family)
		}
	}
	// Behind the gate: the gateway's connections are spliced by the gate
	// (uid 997 passes DEVBOX-PROTECT), and nobody else's connection to a
	// protected address is redirected to the gate.
	for _, rs := range Rules(Config{Allow: []Destination{{Name: "api.anthropic.test", Port: 443}}, Protect: []string{"api.anthropic.test"}, Gate: true, GatePort: 1}) {
		text := rs.Restore(nil)
		for _, r := range []string{
			"-A DEVBOX-PROTECT -m owner --uid-owner 997 -j RETURN",
			fmt.Sprintf("-A DEVBOX-GATE -m set --match-set %s dst -m owner ! --uid-owner 996 -j RETURN", SetName(SetProtect, rs.Family)),
		} {
			if !strings.Contains(text, r+"\n") {
				t.Errorf("%v: no %q:\n%s", rs.Family, r, text)
			}
		}
		if i, j := strings.Index(text, "! --uid-owner 996 -j RETURN"), strings.Index(text, "-j REDIRECT --to-ports 1"); i < 0 || j < 0 || i > j {
			t.Errorf("%v: the protect exemption must come before the gate's redirects", rs.Family)
		}
	}
	for _, rs := range Rules(Config{}) {
		if strings.Contains(rs.Restore(nil), "protect") {
			t.Errorf("%v: protect rule without protected hosts", rs.Family)
		}
	}
}
