package devcontainer

import (
	"strings"
	"testing"

	"github.com/devbox-dev/devbox/internal/policy"
)

// TestInitSecureByDefault: the policy init writes sends Claude Code
// through the credential gateway (credentials.anthropic, secret
// "anthropic"), devcontainer.json mounts the secrets volume for it, and the
// opt-out its comment describes (remove the section, set agent.login)
// validates.
func TestInitSecureByDefault(t *testing.T) {
	root, _ := initFresh(t)
	raw := read(t, root, PolicyFile)
	p, err := policy.Parse(PolicyFile, raw)
	if err != nil {
		t.Fatal(err)
	}
	if a := p.Credentials.Anthropic; a == nil || a.Secret != "anthropic" || a.Host != policy.DefaultAnthropicHost || p.Agent.Login != "" {
		t.Errorf("the default policy's credentials.anthropic = %+v, agent.login %q: want the gateway with secret \"anthropic\"", a, p.Agent.Login)
	}
	if cfg := string(read(t, root, ConfigFile)); !strings.Contains(cfg, secretsMount) {
		t.Errorf("devcontainer.json does not mount the secrets volume:\n%s", cfg)
	}

	start := strings.Index(string(raw), `  "credentials": {`)
	end := strings.Index(string(raw), `  "sandbox": {`)
	if start < 0 || end < start {
		t.Fatalf("no credentials section before sandbox in:\n%s", raw)
	}
	optOut := strings.Replace(string(raw[:start])+string(raw[end:]), `"claudeCode": "2.1.332",`, `"claudeCode": "2.1.332", "login": "in-container",`, 1)
	q, err := policy.Parse(PolicyFile, []byte(optOut))
	if err != nil || q.Agent.Login != policy.LoginInContainer || q.Credentials.Anthropic != nil {
		t.Errorf("the opt-out the template describes: %v, agent %+v\n%s", err, q.Agent, optOut)
	}
}
