package doctor

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCredentialRoutes(t *testing.T) {
	refused := errors.New("connection refused")
	for _, tc := range []struct {
		name   string
		routes []Route
		err    error
		direct error
		want   Level
	}{
		{"all good", []Route{{Route: "anthropic", Host: "api.anthropic.com", Secret: "anthropic", SecretSet: true}}, nil, refused, OK},
		{"secret missing", []Route{{Route: "git", Host: "github.com", Secret: "github"}}, nil, refused, Warn},
		{"upstream not checked", []Route{{Route: "git", Host: "github.com", Secret: "github", SecretSet: true, UpstreamSkipped: true}}, nil, refused, OK},
		{"upstream down", []Route{{Route: "git", Host: "github.com", Secret: "github", SecretSet: true, Upstream: "no such host"}}, nil, refused, Warn},
		{"direct access open", []Route{{Route: "anthropic", Host: "api.anthropic.com", Secret: "anthropic", SecretSet: true}}, nil, nil, Fail},
		{"gateway down", nil, errors.New("connection refused"), refused, Fail},
	} {
		c := &checker{sys: &fakeSys{euid: 1000}, o: Options{
			Routes:     func(context.Context) ([]Route, error) { return tc.routes, tc.err },
			DialDirect: func(context.Context, string) error { return tc.direct },
		}}
		c.credentials(context.Background())
		if len(c.out) != 1 || c.out[0].Level != tc.want {
			t.Errorf("%s: findings %+v, want one %s", tc.name, c.out, tc.want)
			continue
		}
		if tc.routes != nil && tc.routes[0].UpstreamSkipped && (!strings.Contains(c.out[0].Detail, "upstream not checked") || strings.Contains(c.out[0].Detail, "reachable")) {
			t.Errorf("%s: %q claims more than was checked", tc.name, c.out[0].Detail)
		}
		if tc.want != OK && c.out[0].Fix == "" {
			t.Errorf("%s: no fix", tc.name)
		}
	}
}

// TestClaudeLogin: who holds Claude Code's credential, read from the baked
// policy through a whole run: the gateway (info), the explicit in-container
// opt-out and a policy with neither (warnings that say what the agent can
// do with it, with a fix, shown by the login banner), no Claude Code
// (nothing).
func TestClaudeLogin(t *testing.T) {
	for _, tc := range []struct {
		name, policy string
		want         Level // "" = no finding
		detail       []string
	}{
		{"gateway", `{"agent":{"claudeCode":"2.1.332"},"credentials":{"anthropic":{"secret":"anthropic","host":"api.anthropic.com"}}}`,
			Info, []string{"through the credential gateway", `secret "anthropic"`, "never holds the credential"}},
		{"opt-out", `{"agent":{"claudeCode":"2.1.332","login":"in-container"}}`,
			Warn, []string{`agent.login "in-container"`, "the agent holds its own credential", "read it and use it from anywhere it can reach"}},
		{"neither", `{"agent":{"claudeCode":"2.1.332"}}`,
			Warn, []string{"no credentials.anthropic", "where the agent can read it and use it from anywhere it can reach"}},
		{"no Claude Code", `{"agent":{"claudeCode":"none"}}`, "", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root, files := world(t)
			files["/etc/devbox/policy.json"] = tc.policy
			for p, content := range files {
				full := filepath.Join(root, p)
				os.MkdirAll(filepath.Dir(full), 0o755)
				os.WriteFile(full, []byte(content), 0o644)
			}
			sys := &fakeSys{OS: OS{Prefix: root}, euid: 1000, paths: map[string]string{}, runs: map[string]fakeRun{}}
			rep := Run(context.Background(), sys, Options{StatusPath: "/run/devbox/status", PolicyPath: "/etc/devbox/policy.json", Workspace: ws, DNSUID: 998})
			var got []Finding
			for _, f := range rep.Findings {
				if f.Check == "claude login" {
					got = append(got, f)
				}
			}
			if tc.want == "" {
				if len(got) != 0 {
					t.Errorf("findings %+v, want none", got)
				}
				return
			}
			if len(got) != 1 || got[0].Level != tc.want {
				t.Fatalf("findings %+v, want one %s", got, tc.want)
			}
			for _, d := range tc.detail {
				if !strings.Contains(got[0].Detail, d) {
					t.Errorf("detail %q lacks %q", got[0].Detail, d)
				}
			}
			var problems bytes.Buffer
			rep.WriteProblems(&problems)
			if banner := strings.Contains(problems.String(), "[warn] claude login:"); banner != (tc.want == Warn) {
				t.Errorf("login banner shows the warning: %v, want %v:\n%s", banner, tc.want == Warn, problems.String())
			}
			if tc.want == Warn && !strings.Contains(got[0].Fix, "devbox login") {
				t.Errorf("fix %q does not say how to hand the credential to the gateway", got[0].Fix)
			}
			var text bytes.Buffer
			rep.WriteText(&text)
			for _, l := range strings.Split(text.String(), "\n") {
				if strings.Contains(l, "claude login") {
					t.Logf("%s: %s", tc.name, l)
				}
			}
		})
	}
}
