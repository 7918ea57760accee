package baseline

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/devbox-dev/devbox/internal/golden"
	"github.com/devbox-dev/devbox/internal/policy"
)

func load(t *testing.T, name string) *policy.Explanation {
	t.Helper()
	ex, err := policy.ExplainFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return ex
}

func TestNarrowingRepoPasses(t *testing.T) {
	base := load(t, "baseline.jsonc").Policy
	if err := Check(base, "baseline.jsonc", load(t, "narrow.jsonc")); err != nil {
		t.Fatalf("a narrowing repository was refused:\n%v", err)
	}
	// The baseline itself is within itself.
	if err := Check(base, "baseline.jsonc", load(t, "baseline.jsonc")); err != nil {
		t.Fatalf("the baseline is not within itself:\n%v", err)
	}
}

// TestHostileRepo checks every widening in hostile.jsonc is reported, each
// at its file:line:col with the baseline entry it exceeds (golden).
func TestHostileRepo(t *testing.T) {
	base := load(t, "baseline.jsonc").Policy
	err := Check(base, "baseline.jsonc", load(t, "hostile.jsonc"))
	var vs *Violations
	if !errors.As(err, &vs) {
		t.Fatalf("Check = %v, want *Violations", err)
	}
	golden.Check(t, filepath.Join("testdata", "hostile.golden"), []byte(err.Error()+"\n"))
}

// TestHostileCases changes one thing at a time in the narrowing repository,
// so each widening is shown to be refused by itself.
func TestHostileCases(t *testing.T) {
	base := load(t, "baseline.jsonc").Policy
	narrow, err := os.ReadFile(filepath.Join("testdata", "narrow.jsonc"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, old, new string
		// want is in the message; at is the key path reported.
		want, at, baseline string
	}{
		{"wider wildcard", `"*.build.dev.corp.test:443"`, `"*.corp.test:443"`, `"*.corp.test:443" is wider`, "network.allow[1]", `network.allow "*.dev.corp.test:443"`},
		{"port outside", `"api.dev.corp.test:443"`, `"api.dev.corp.test:8443"`, "port 8443", "network.allow[0]", `network.allow "*.dev.corp.test:443"`},
		{"any port", `"pkg.example.test:443"`, `"git.dev.corp.test"`, "every port", "network.allow[4]", `network.allow "git.dev.corp.test:22"`},
		{"wider CIDR", `"10.1.2.0/24:443"`, `"10.0.0.0/8:443"`, "10.0.0.0/8 is wider than 10.1.0.0/16", "network.allow[3]", `network.allow "10.1.0.0/16:443"`},
		{"unrelated host", `"pkg.example.test:443"`, `"evil.test:443"`, "not within any baseline allow", "network.allow[4]", ""},
		{"preset", `"deny": [`, `"presets": ["npm"], "deny": [`, "(from preset:npm)", "network.presets[0]", ""},
		{"dropped deny", `"secrets.dev.corp.test", `, ``, `deny "secrets.dev.corp.test" is missing`, "network.deny", `network.deny "secrets.dev.corp.test"`},
		{"narrower deny", `"10.1.99.0/24", `, `"10.1.99.0/25", `, `deny "10.1.99.0/24" is missing`, "network.deny", `network.deny "10.1.99.0/24"`},
		{"allowWrite outside", `"/opt/cache/go"`, `"/opt/cachex"`, `"/opt/cachex" is not within`, "sandbox.allowWrite[0]", `sandbox.allowWrite "/opt/cache", "~/.cache"`},
		{"denyWrite dropped", `"/opt/cache/locked", `, ``, `"/opt/cache/locked" is missing`, "sandbox.denyWrite", `sandbox.denyWrite "/opt/cache/locked"`},
		{"sandbox off", `"enabled": true`, `"enabled": false`, "cannot turn it off", "sandbox.enabled", "sandbox.enabled true"},
		{"claude code", `"claudeCode": "2.1.332"`, `"claudeCode": "2.1.300"`, "pins Claude Code 2.1.332", "agent.claudeCode", `agent.claudeCode "2.1.332"`},
		{"claude code none", `"claudeCode": "2.1.332"`, `"claudeCode": "none"`, "pins Claude Code 2.1.332", "agent.claudeCode", `agent.claudeCode "2.1.332"`},
		{"log off", `"network": {`, `"network": {"log": {"blocked": false},`, "cannot turn that off", "network.log.blocked", "network.log.blocked true"},
		{"upstream", `"network": {`, `"network": {"dns": {"upstream": ["192.0.2.53"]},`, `"192.0.2.53:53" is not one of`, "network.dns.upstream[0]", "network.dns.upstream (the container's resolv.conf)"},
		{"quic", `"network": {`, `"network": {"quic": true,`, "cannot turn it on", "network.quic", "network.quic false"},
		{"user", `"agent"`, `"image": {"user": {"name": "eve"}}, "agent"`, "cannot name another", "image.user", "image.user dev"},
		{"credential to another host", `"http": [`, `"http": [{"host": "pkg.example.test", "header": "X-Token", "value": "${secret}", "secret": "corp-git"}, `,
			"the baseline has no http route for this host", "credentials.http[0].host", `credentials.http "hooks.dev.corp.test"`},
		{"credential secret swapped", `"secret": "corp-api"`, `"secret": "corp-git"`, `"corp-git": the baseline's route for hooks.dev.corp.test has secret "corp-api"`, "credentials.http[0].secret", `credentials.http[0] "hooks.dev.corp.test"`},
		{"credential header value", `"value": "Bearer ${secret}"`, `"value": "${secret}"`, `has value "Bearer ${secret}"`, "credentials.http[0].value", `credentials.http[0] "hooks.dev.corp.test"`},
		{"git repo added", `"repos": ["team/app"]`, `"repos": ["team/app", "evil/exfil"]`, `"evil/exfil" is not one of the baseline route's repositories`, "credentials.git[0].repos[1]", `credentials.git[0] "code.dev.corp.test" repos`},
		{"git push", `"push": false`, `"push": true`, "cannot allow push", "credentials.git[0].push", `credentials.git[0] "code.dev.corp.test" push false`},
		{"git secret", `"secret": "corp-git"`, `"secret": "corp-api"`, `uses the secret "corp-git"`, "credentials.git[0].secret", `credentials.git[0] "code.dev.corp.test"`},
		{"anthropic added", `"credentials": {`, `"credentials": {"anthropic": {"secret": "corp-api", "host": "pkg.example.test"},`, "no anthropic route", "credentials.anthropic", "credentials (no anthropic route)"},
		{"protect dropped", `"protect": ["api.code.dev.corp.test"]`, `"protect": []`, `"api.code.dev.corp.test" is protected by the baseline's route`, "credentials.git[0].protect", `credentials.git[0] "code.dev.corp.test" protect`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := string(narrow)
			if !strings.Contains(src, tc.old) {
				t.Fatalf("narrow.jsonc has no %s", tc.old)
			}
			src = strings.Replace(src, tc.old, tc.new, 1)
			ex, err := policy.Explain("repo.jsonc", []byte(src))
			if err != nil {
				t.Fatal(err)
			}
			err = Check(base, "baseline.jsonc", ex)
			var vs *Violations
			if !errors.As(err, &vs) {
				t.Fatalf("Check accepted the repository; want a violation %q", tc.want)
			}
			if len(vs.List) != 1 {
				t.Fatalf("want one violation, got:\n%v", err)
			}
			v := vs.List[0]
			if !strings.Contains(v.At.Msg, tc.want) || v.At.Path != tc.at || v.Baseline != tc.baseline {
				t.Errorf("got %s at %s, baseline %q; want %q at %s, baseline %q", v.At.Msg, v.At.Path, v.Baseline, tc.want, tc.at, tc.baseline)
			}
			if v.At.File != "repo.jsonc" || v.At.Line < 2 {
				t.Errorf("no file:line:col: %v", v)
			}
		})
	}
}

func TestExplainLayered(t *testing.T) {
	base := load(t, "baseline.jsonc").Policy
	var b strings.Builder
	for _, repo := range []string{"narrow.jsonc", "hostile.jsonc"} {
		if err := Explain(base, "baseline.jsonc", load(t, repo)).WriteText(&b); err != nil {
			t.Fatal(err)
		}
		b.WriteString("\n")
	}
	golden.Check(t, filepath.Join("testdata", "explain.golden"), []byte(b.String()))
}
