package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/devbox-dev/devbox/firewall"
	"github.com/devbox-dev/devbox/firewall/fwpolicy"
	"github.com/devbox-dev/devbox/internal/policy"
)

// TestFirewallRulesCommand checks that `devbox firewall rules` prints the
// compiled rulesets of the policy it is given, and names a bad policy file.
func TestFirewallRulesCommand(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.jsonc")
	os.WriteFile(good, []byte(`{
  // a comment, HuJSON style
  "network": {
    "allow": ["api.example.test:443", "*.cdn.example.test", "10.20.0.0/16"],
    "deny": ["bad.cdn.example.test"],
    "log": { "blocked": true },
  },
}`), 0o644)
	bad := filepath.Join(dir, "bad.jsonc")
	os.WriteFile(bad, []byte(`{"network": {"allow": ["*"]}}`), 0o644)

	tests := []struct {
		name    string
		args    []string
		want    []string
		wantErr string
	}{
		{"good policy", []string{"--policy", good}, []string{
			"# ipv4 (iptables-restore --noflush)", "# ipv6 (ip6tables-restore --noflush)",
			":OUTPUT DROP [0:0]", "-A DEVBOX-OUTPUT -p tcp -m set --match-set devbox-port4 dst,dst -j ACCEPT",
			"--nflog-prefix devbox:not-allowed", "-A DEVBOX-DNS -p udp -m udp --dport 53 -j REDIRECT --to-ports 53535",
		}, ""},
		{"bad policy", []string{"--policy", bad}, nil, bad},
		{"missing policy", []string{"--policy", filepath.Join(dir, "nope.jsonc")}, nil, "nope.jsonc"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			app := newApp()
			app.Writer, app.ErrWriter = &out, &out
			err := app.Run(append([]string{"devbox", "firewall", "rules"}, tt.args...))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one naming %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tt.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("output lacks %q:\n%s", w, out.String())
				}
			}
			p, err := policy.Load(good)
			if err != nil {
				t.Fatal(err)
			}
			var want strings.Builder
			for _, rs := range firewall.Rules(fwpolicy.Config(p)) {
				want.WriteString(rs.String())
			}
			got := out.String()
			for _, l := range strings.Split(got, "\n") {
				if strings.HasPrefix(l, "# ") {
					got = strings.Replace(got, l+"\n", "", 1)
				}
			}
			if got != want.String() {
				t.Errorf("rules command output differs from firewall.Rules:\n%s", got)
			}
		})
	}
}
