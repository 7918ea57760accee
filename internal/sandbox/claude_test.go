package sandbox

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/devbox-dev/devbox/internal/golden"
	"github.com/devbox-dev/devbox/internal/policy"
)

func TestClaudeManagedSettingsGolden(t *testing.T) {
	golden.ForEach(t, "testdata/claude/*.hujson", func(t *testing.T, in, _ string) {
		p, err := policy.Load(in)
		if err != nil {
			t.Fatal(err)
		}
		got, err := ClaudeManagedSettings(p)
		if err != nil {
			t.Fatal(err)
		}
		var check struct {
			Env     map[string]string `json:"env"`
			Sandbox *struct {
				Enabled                  bool `json:"enabled"`
				AllowUnsandboxedCommands *bool
			} `json:"sandbox"`
			Permissions *json.RawMessage `json:"permissions"`
		}
		if err := json.Unmarshal(got, &check); err != nil {
			t.Fatalf("%v:\n%s", err, got)
		}
		if check.Env["DISABLE_AUTOUPDATER"] != "1" {
			t.Errorf("settings must keep the updater off (env DISABLE_AUTOUPDATER=1):\n%s", got)
		}
		if p.Credentials.Anthropic != nil && (check.Env["ANTHROPIC_BASE_URL"] != "http://127.0.0.1:53541" || check.Env["ANTHROPIC_AUTH_TOKEN"] != ClaudeGatewayPlaceholder) {
			t.Errorf("credentials.anthropic: settings must point Claude Code at the gateway with the placeholder:\n%s", got)
		}
		if p.Credentials.Anthropic == nil && check.Env["ANTHROPIC_BASE_URL"] != "" {
			t.Errorf("no credentials: settings must not set ANTHROPIC_BASE_URL:\n%s", got)
		}
		switch {
		case !p.Sandbox.Enabled && (check.Sandbox != nil || check.Permissions != nil):
			t.Errorf("sandbox.enabled is false: settings must not switch Claude Code's sandbox on (no Bash at all without the seccomp profile):\n%s", got)
		case p.Sandbox.Enabled && (check.Sandbox == nil || !check.Sandbox.Enabled || check.Sandbox.AllowUnsandboxedCommands == nil || *check.Sandbox.AllowUnsandboxedCommands):
			t.Errorf("settings must enable the sandbox and set allowUnsandboxedCommands false:\n%s", got)
		}
		golden.Check(t, strings.TrimSuffix(in, ".hujson")+".golden.json", got)
	})
}
