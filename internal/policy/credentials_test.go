package policy

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
)

const credentialsPolicy = `{
  "network": { "presets": ["anthropic", "github"], "allow": ["api.example.test:443"] },
  "credentials": {
    "anthropic": { "secret": "anthropic" },
    "git":  [ { "host": "GitHub.com", "secret": "github", "repos": ["acme/app.git", "acme/lib"], "push": true } ],
    "http": [ { "host": "api.example.test", "header": "Authorization", "value": "Bearer ${secret}", "secret": "example" } ],
  },
}`

func TestCredentials(t *testing.T) {
	p, err := Parse("p", []byte(credentialsPolicy))
	if err != nil {
		t.Fatal(err)
	}
	want := Credentials{
		Anthropic: &AnthropicCredential{Secret: "anthropic", Host: DefaultAnthropicHost},
		Git:       []GitCredential{{Host: "github.com", Secret: "github", Repos: []string{"acme/app", "acme/lib"}, Push: true}},
		HTTP:      []HTTPCredential{{Host: "api.example.test", Header: "Authorization", Value: "Bearer ${secret}", Secret: "example"}},
	}
	if !reflect.DeepEqual(p.Credentials, want) {
		t.Errorf("credentials = %+v\nwant %+v", p.Credentials, want)
	}
	if got := p.Credentials.Hosts(); !slices.Equal(got, []string{"api.anthropic.com", "github.com", "api.example.test"}) {
		t.Errorf("Hosts() = %v", got)
	}
	if got := p.Credentials.Secrets(); !slices.Equal(got, []string{"anthropic", "github", "example"}) {
		t.Errorf("Secrets() = %v", got)
	}
	// The normalized form parses back to the same credentials.
	norm, err := p.Normalize()
	if err != nil {
		t.Fatal(err)
	}
	q, err := Parse("n", norm)
	if err != nil {
		t.Fatalf("normalized policy does not parse: %v\n%s", err, norm)
	}
	if !reflect.DeepEqual(q.Credentials, want) {
		t.Errorf("after Normalize: %+v", q.Credentials)
	}
	// A policy without the section has no credentials key at all, so the
	// normalized files of existing policies do not change.
	empty, _ := Parse("e", []byte(`{}`))
	norm, _ = empty.Normalize()
	if strings.Contains(string(norm), `"credentials"`) || !empty.Credentials.IsZero() {
		t.Errorf("an empty policy normalizes with credentials:\n%s", norm)
	}
}

func TestCredentialsErrors(t *testing.T) {
	tests := []struct{ in, want string }{
		{`{"credentials": {"anthropic": {}}}`, `p:1:31: credentials.anthropic: missing key "secret"`},
		{`{"credentials": {"anthropic": {"secret": "../x"}}}`, `p:1:42: credentials.anthropic.secret: "../x": not a secret name`},
		{`{"credentials": {"anthropic": {"secret": "a", "key": "sk"}}}`, `p:1:47: credentials.anthropic.key: unknown key "key" in credentials.anthropic (known keys: secret, host, protect)`},
		{`{"credentials": {"anthropic": {"secret": "a", "host": "*.x.test"}}}`, `p:1:55: credentials.anthropic.host: "*.x.test": want one exact host name`},
		{`{"credentials": {"git": [{"host": "g.test", "secret": "s"}]}}`, `p:1:26: credentials.git[0]: missing key "repos"`},
		{`{"credentials": {"git": [{"host": "g.test:443", "secret": "s", "repos": ["a/b"]}]}}`, `p:1:35: credentials.git[0].host: "g.test:443": want one exact host name`},
		{`{"credentials": {"git": [{"host": "g.test", "secret": "s", "repos": ["a"]}]}}`, `p:1:70: credentials.git[0].repos[0]: "a": want "owner/name"`},
		{`{"credentials": {"git": [{"host": "g.test", "secret": "s", "repos": ["a/../b"]}]}}`, `p:1:70: credentials.git[0].repos[0]: "a/../b": each path segment`},
		{`{"credentials": {"git": [{"host": "g.test", "secret": "s", "repos": []}]}}`, `p:1:69: credentials.git[0].repos: list at least one repository`},
		{`{"credentials": {"git": [{"host": "g.test", "secret": "s", "repos": ["a/b"], "push": "yes"}]}}`, `p:1:86: credentials.git[0].push: want true or false, got a string`},
		{`{"credentials": {"git": [{"host": "g.test", "secret": "s", "repos": ["a/b"]}, {"host": "g.test", "secret": "t", "repos": ["a/c"]}]}}`, `p:1:88: credentials.git[1].host: "g.test" is already listed at credentials.git[0]`},
		{`{"credentials": {"http": [{"host": "h.test", "header": "Host", "value": "${secret}", "secret": "s"}]}}`, `p:1:56: credentials.http[0].header: "Host": the gateway sets this header itself`},
		{`{"credentials": {"http": [{"host": "h.test", "header": "X-Key", "value": "static", "secret": "s"}]}}`, `p:1:74: credentials.http[0].value: "static": must contain ${secret} exactly once`},
		{`{"credentials": {"http": [{"host": "h.test", "header": "X Key", "value": "${secret}", "secret": "s"}]}}`, `p:1:56: credentials.http[0].header: "X Key": not an HTTP header name`},
		{`{"credentials": {"anthropic": {"secret": "a", "protect": ["x.test:443"]}}}`, `p:1:59: credentials.anthropic.protect[0]: "x.test:443": want a host name or a wildcard`},
		{`{"credentials": {"git": [{"host": "g.test", "secret": "s", "repos": ["a/b"], "protect": ["10.0.0.1"]}]}}`, `p:1:90: credentials.git[0].protect[0]: "10.0.0.1": want a host name or a wildcard`},
		{`{"credentials": {"http": [{"host": "h.test", "header": "K", "value": "${secret}", "secret": "s", "protect": "api.h.test"}]}}`, `p:1:109: credentials.http[0].protect: want an array`},
	}
	tests = append(tests,
		struct{ in, want string }{`{"credentials": {"anthropic": {"secret": "a"}}}`, `p:1:31: credentials.anthropic.host: "api.anthropic.com" is not allowed on port 443 by network.allow`},
		struct{ in, want string }{`{"network": {"allow": ["*.x.test:8443"]}, "credentials": {"http": [{"host": "h.x.test", "header": "K", "value": "${secret}", "secret": "s"}]}}`, `p:1:77: credentials.http[0].host: "h.x.test" is not allowed on port 443`},
		struct{ in, want string }{`{"network": {"allow": ["*.x.test"], "deny": ["g.x.test"]}, "credentials": {"git": [{"host": "g.x.test", "secret": "s", "repos": ["a/b"]}]}}`, `p:1:93: credentials.git[0].host: "g.x.test" is not allowed on port 443 by network.allow (or is denied)`},
	)
	for _, tt := range tests {
		if !strings.Contains(tt.in, `"network"`) && !strings.Contains(tt.want, "not allowed") {
			// Allow every host the cases use, so each reports its one error.
			tt.in = strings.Replace(tt.in, `{"credentials"`, `{"network": {"allow": ["g.test", "h.test", "api.anthropic.com"]}, "credentials"`, 1)
			tt.want = shiftCol(tt.want, len(`"network": {"allow": ["g.test", "h.test", "api.anthropic.com"]}, `))
		}
		_, err := Parse("p", []byte(tt.in))
		var errs *Errors
		if !errors.As(err, &errs) {
			t.Errorf("%s: error %v, want *Errors", tt.in, err)
			continue
		}
		if len(errs.List) != 1 || !strings.HasPrefix(errs.List[0].Error(), tt.want) {
			t.Errorf("%s:\n got %v\nwant %s…", tt.in, err, tt.want)
		}
	}
}

// shiftCol moves the column of a "p:1:COL:" error prefix by n.
func shiftCol(want string, n int) string {
	var line, col int
	var rest string
	if k, _ := fmt.Sscanf(want, "p:%d:%d:", &line, &col); k != 2 {
		return want
	}
	_, rest, _ = strings.Cut(want[len("p:"):], ":")
	_, rest, _ = strings.Cut(rest, ":")
	return fmt.Sprintf("p:%d:%d:%s", line, col+n, rest)
}

// TestCredentialsProtect: a route protects its service's sibling hosts
// (the preset for its host) and the policy's own protect entries; the
// firewall gets them all, explain lists them with where they come from.
func TestCredentialsProtect(t *testing.T) {
	p, err := Parse("p", []byte(`{
  "network": { "presets": ["anthropic", "github"], "allow": ["api.example.test:443", "git.corp.test:443"] },
  "credentials": {
    "anthropic": { "secret": "anthropic" },
    "git":  [ { "host": "github.com", "secret": "github", "repos": ["acme/app"], "protect": ["*.GitHub.dev", "github.blog"] },
              { "host": "git.corp.test", "secret": "corp", "repos": ["a/b"] } ],
    "http": [ { "host": "api.example.test", "header": "Authorization", "value": "Bearer ${secret}", "secret": "example", "protect": ["uploads.example.test"] } ],
  },
}`))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"api.anthropic.com", "console.anthropic.com", "claude.ai", "*.claude.ai", "claude.com", "*.claude.com",
		"github.com", "*.github.com", "*.githubusercontent.com", "ghcr.io", "*.github.dev", "github.blog",
		"git.corp.test", "api.example.test", "uploads.example.test",
	}
	if got := p.Credentials.ProtectList(); !slices.Equal(got, want) {
		t.Errorf("ProtectList() =\n %v\nwant\n %v", got, want)
	}
	for _, h := range p.Credentials.ProtectedHosts() {
		switch h.Host {
		case "*.github.com":
			if h.From != "credentials.git[0].host (service preset)" || !strings.Contains(h.Why, "api.github.com") {
				t.Errorf("%+v", h)
			}
		case "github.blog":
			if h.From != "credentials.git[0].protect" {
				t.Errorf("%+v", h)
			}
		}
	}
	// Every preset entry is a valid protect entry.
	for host, es := range servicePresets {
		for _, e := range es {
			if got, why := checkProtect(e.dest); why != "" || got != e.dest {
				t.Errorf("servicePresets[%s]: %q: %s (%q)", host, e.dest, why, got)
			}
		}
	}
	norm, err := p.Normalize()
	if err != nil {
		t.Fatal(err)
	}
	q, err := Parse("n", norm)
	if err != nil || !reflect.DeepEqual(q.Credentials, p.Credentials) {
		t.Errorf("normalized form: %v\n%s", err, norm)
	}
	ex, err := Explain("p", []byte(norm))
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	ex.WriteText(&b)
	for _, line := range []string{
		"  protected (only the gateway, uid 996, may connect; everyone else is refused):",
		"    *.githubusercontent.com                      from credentials.git[0].host (service preset)",
		"    uploads.example.test                         from credentials.http[0].protect",
	} {
		if !strings.Contains(b.String(), line+"\n") {
			t.Errorf("explain lacks %q:\n%s", line, b.String())
		}
	}
}

// TestAgentLogin is the explicit opt-out of the gateway for Claude Code:
// one value, never beside credentials.anthropic, kept by Normalize and
// absent from the normalized form when unset.
func TestAgentLogin(t *testing.T) {
	p, err := Parse("p", []byte(`{"network": {"presets": ["anthropic", "claude-login"]}, "agent": {"login": "in-container"}}`))
	if err != nil {
		t.Fatal(err)
	}
	if p.Agent.Login != LoginInContainer {
		t.Errorf("agent.login = %q", p.Agent.Login)
	}
	norm, _ := p.Normalize()
	if q, err := Parse("n", norm); err != nil || q.Agent.Login != LoginInContainer {
		t.Errorf("after Normalize: %v, %+v\n%s", err, q, norm)
	}
	empty, _ := Parse("e", []byte(`{}`))
	if norm, _ := empty.Normalize(); strings.Contains(string(norm), `"login"`) {
		t.Errorf("an empty policy normalizes with agent.login:\n%s", norm)
	}
	for _, tc := range []struct{ in, want string }{
		{`{"agent": {"login": "gateway"}}`, `p:1:21: agent.login: "gateway": the only value is "in-container"`},
		{`{"agent": {"login": "IN-CONTAINER"}}`, `p:1:21: agent.login: "IN-CONTAINER": the only value is "in-container"`},
		{`{"agent": {"login": "in-container"}, "network": {"presets": ["anthropic"]}, "credentials": {"anthropic": {"secret": "anthropic"}}}`,
			`p:1:21: agent.login: "in-container" and credentials.anthropic are both set`},
	} {
		_, err := Parse("p", []byte(tc.in))
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%s: err %v, want %q…", tc.in, err, tc.want)
		}
	}
}
