// Package examples_test validates the example policies under examples/:
// every *.jsonc or *.hujson file here must validate, and each known example
// must mean what its comments say, as the firewall enforces it (names are
// decided by firewall.Config.Match, which the DNS filter runs).
package examples_test

import (
	"path/filepath"
	"slices"
	"testing"

	"github.com/devbox-dev/devbox/firewall/fwpolicy"
	"github.com/devbox-dev/devbox/internal/policy"
)

// expectations hold one check per example file, on top of validation.
var expectations = map[string]func(t *testing.T, p *policy.Policy){
	"node.jsonc": func(t *testing.T, p *policy.Policy) {
		n := fwpolicy.Config(p)
		for _, name := range []string{"api.anthropic.com", "claude.ai", "registry.npmjs.org", "github.com"} {
			if !n.Match(name).Allowed {
				t.Errorf("%s not allowed", name)
			}
		}
		if n.Match("sentry.io").Allowed || n.Match("pypi.org").Allowed {
			t.Error("sentry.io (denied) or pypi.org (no preset) allowed")
		}
		if !p.Sandbox.Enabled || !slices.Contains(p.Sandbox.AllowWrite, "~/.npm") {
			t.Errorf("sandbox = %+v", p.Sandbox)
		}
	},
	"python.jsonc": func(t *testing.T, p *policy.Policy) {
		n := fwpolicy.Config(p)
		if !n.Match("pypi.org").Allowed || !n.Match("files.pythonhosted.org").Allowed {
			t.Error("PyPI not allowed")
		}
		if v := n.Match("pypi.internal.example.test"); v.AnyPort || !slices.Equal(v.Ports, []uint16{443}) || !v.AllowsPort(443) {
			t.Errorf("private index ports = %v, %v; want [443]", v.Ports, v.AnyPort)
		}
		if p.Image.User.Name != policy.DefaultUserName || p.Image.Base != policy.DefaultBase {
			t.Errorf("defaults not applied: %+v", p.Image)
		}
		// The user site's .pth files run at every python start.
		if !p.Sandbox.Enabled || len(p.Sandbox.AllowWrite) != 0 {
			t.Errorf("sandbox = %+v, want enabled and nothing writable beyond the workspace and the caches", p.Sandbox)
		}
	},
	"locked-down.jsonc": func(t *testing.T, p *policy.Policy) {
		if !p.Network.NoNetwork() || fwpolicy.Config(p).Match("api.anthropic.com").Allowed {
			t.Errorf("locked-down allows network: %v", p.Network.Allow)
		}
		if p.Agent.ClaudeCode != policy.ClaudeCodeNone {
			t.Errorf("claudeCode = %q", p.Agent.ClaudeCode)
		}
	},
	"team.jsonc": func(t *testing.T, p *policy.Policy) {
		if p.Image.Tag != "registry.example.test:5000/team/devbox:2026.11" {
			t.Errorf("tag = %q", p.Image.Tag)
		}
		n := fwpolicy.Config(p)
		if !n.Match("proxy.golang.org").Allowed || !n.Match("a.artifacts.example.test").Allowed {
			t.Error("go preset or artifacts not allowed")
		}
		if n.Match("keys.artifacts.example.test").Allowed || n.Match("statsig.anthropic.com").Allowed {
			t.Error("a denied name is allowed")
		}
		if u := p.Network.DNS.Upstream; len(u) != 2 || u[0].String() != "10.20.0.53:53" {
			t.Errorf("upstream = %v", u)
		}
	},
}

func TestExamplesValidate(t *testing.T) {
	var files []string
	for _, pattern := range []string{"*.jsonc", "*.hujson"} {
		m, err := filepath.Glob(pattern)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	if len(files) < len(expectations) {
		t.Fatalf("found %d example policies, want at least %d", len(files), len(expectations))
	}
	for _, f := range files {
		t.Run(f, func(t *testing.T) {
			p, err := policy.Load(f)
			if err != nil {
				t.Fatalf("example does not validate:\n%v", err)
			}
			if _, err := p.Normalize(); err != nil {
				t.Fatalf("Normalize: %v", err)
			}
			check, ok := expectations[f]
			if !ok {
				t.Fatalf("no expectation for %s: add one to expectations in examples_test.go", f)
			}
			check(t, p)
		})
	}
	for name := range expectations {
		if !slices.Contains(files, name) {
			t.Errorf("example %s is missing", name)
		}
	}
}
