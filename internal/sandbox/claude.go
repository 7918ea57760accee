package sandbox

import (
	"encoding/json"
	"path"
	"strings"

	"github.com/devbox-dev/devbox/internal/layout"
	"github.com/devbox-dev/devbox/internal/policy"
)

// ClaudeManagedSettingsPath is where Claude Code reads managed settings on
// Linux; settings there win over user and project settings and cannot be
// changed by the agent's user (the file is root's).
const ClaudeManagedSettingsPath = "/etc/claude-code/managed-settings.json"

// ClaudeEnv is the environment every devbox image gives Claude Code through
// its managed settings: the agent never updates itself past the pinned
// version. The image config sets the same variables for shells that skip
// settings.
var ClaudeEnv = map[string]string{"DISABLE_AUTOUPDATER": "1"}

// ClaudeGatewayPlaceholder is the credential Claude Code holds when the
// policy has credentials.anthropic: a value that means nothing anywhere.
// The credential gateway drops it and sends the user's secret instead.
const ClaudeGatewayPlaceholder = "devbox-credential-gateway-placeholder"

// claudeEnv is ClaudeEnv plus, with credentials.anthropic, the gateway as
// Claude Code's API endpoint. ANTHROPIC_AUTH_TOKEN rather than
// ANTHROPIC_API_KEY: Claude Code asks before it uses a custom API key, and
// sends a token as a plain bearer header without asking.
func claudeEnv(p *policy.Policy) map[string]string {
	env := map[string]string{}
	for k, v := range ClaudeEnv {
		env[k] = v
	}
	if p.Credentials.Anthropic != nil {
		env["ANTHROPIC_BASE_URL"] = "http://" + layout.GatewayAddr
		env["ANTHROPIC_AUTH_TOKEN"] = ClaudeGatewayPlaceholder
	}
	return env
}

// ClaudeManagedSettings returns the whole of Claude Code's managed settings
// file for p; it is the one generator of that file (the image build and the
// Dev Container Feature both write its output). It always carries ClaudeEnv,
// and with credentials.anthropic the credential gateway's URL and a
// placeholder token.
// When p.Sandbox.Enabled it also turns Claude Code's built-in Bash sandbox
// on, impossible to turn off or bypass from inside, with the policy's network
// allow list and the same read and write lists as `devbox run`, plus the
// same lists as permission rules. The sandbox part is left out when the
// policy's sandbox is off: failIfUnavailable would then leave the agent with
// no Bash at all in a container started without devbox's seccomp profile.
// It is pure.
func ClaudeManagedSettings(p *policy.Policy) ([]byte, error) {
	if !p.Sandbox.Enabled {
		b, err := json.MarshalIndent(struct {
			Env map[string]string `json:"env"`
		}{claudeEnv(p)}, "", "  ")
		if err != nil {
			return nil, err
		}
		return append(b, '\n'), nil
	}
	domains := []string{}
	for _, d := range p.Network.Allow {
		switch d.Kind {
		case policy.Host:
			domains = appendNew(domains, d.Name)
		case policy.Wildcard:
			domains = appendNew(domains, "*."+d.Name)
		}
		// IP and CIDR entries have no form in allowedDomains; the
		// container firewall still allows them.
	}
	denyRead := []string{}
	readRules := []string{}
	for _, e := range p.Sandbox.DenyRead {
		cp := claudePath(e)
		denyRead = appendNew(denyRead, cp)
		readRules = appendNew(readRules, "Read("+cp+")")
		if !strings.HasSuffix(cp, "/**") {
			// The entry may be a directory: deny what is inside it too.
			readRules = appendNew(readRules, "Read("+strings.TrimSuffix(cp, "/")+"/**)")
		}
	}
	allowWrite := []string{}
	for _, e := range p.Sandbox.AllowWrite {
		allowWrite = appendNew(allowWrite, claudePath(e))
	}
	denyWrite := []string{}
	for _, n := range MandatoryHomeDenyWrite {
		denyWrite = appendNew(denyWrite, "~/"+n)
	}
	for _, n := range MandatoryWorkspaceDenyWrite {
		denyWrite = appendNew(denyWrite, n)
	}
	for _, e := range p.Sandbox.DenyWrite {
		denyWrite = appendNew(denyWrite, claudePath(e))
	}
	editRules := []string{}
	for _, w := range denyWrite {
		editRules = append(editRules, "Edit("+w+")")
	}

	type network struct {
		AllowedDomains []string `json:"allowedDomains"`
		// Only the managed list counts: the agent cannot widen it with
		// project settings.
		AllowManagedDomainsOnly bool `json:"allowManagedDomainsOnly"`
	}
	type filesystem struct {
		DenyRead   []string `json:"denyRead"`
		AllowWrite []string `json:"allowWrite"`
		DenyWrite  []string `json:"denyWrite"`
	}
	type sandbox struct {
		Enabled bool `json:"enabled"`
		// Refuse to run Bash at all when the sandbox cannot start, rather
		// than run it unconfined.
		FailIfUnavailable bool `json:"failIfUnavailable"`
		// No dangerouslyDisableSandbox escape hatch.
		AllowUnsandboxedCommands bool `json:"allowUnsandboxedCommands"`
		// Inside a container bwrap cannot mount a new /proc (Docker masks
		// /proc paths); this mode drops it. docs/sandbox.md says what that
		// weakens.
		EnableWeakerNestedSandbox bool       `json:"enableWeakerNestedSandbox"`
		Network                   network    `json:"network"`
		Filesystem                filesystem `json:"filesystem"`
	}
	type permissions struct {
		Deny []string `json:"deny"`
	}
	settings := struct {
		Env         map[string]string `json:"env"`
		Sandbox     sandbox           `json:"sandbox"`
		Permissions permissions       `json:"permissions"`
	}{
		Env: claudeEnv(p),
		Sandbox: sandbox{
			Enabled:                   true,
			FailIfUnavailable:         true,
			AllowUnsandboxedCommands:  false,
			EnableWeakerNestedSandbox: true,
			Network:                   network{AllowedDomains: domains, AllowManagedDomainsOnly: true},
			Filesystem:                filesystem{DenyRead: denyRead, AllowWrite: allowWrite, DenyWrite: denyWrite},
		},
		// The sandbox confines Bash only; Claude Code's own Read and Edit
		// tools follow permission rules, so the same lists go there too.
		Permissions: permissions{Deny: append(readRules, editRules...)},
	}
	b, err := json.MarshalIndent(settings, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// claudePath writes a policy path in Claude Code's settings syntax, where
// "//" starts an absolute path ("/" alone would be relative to the settings
// file's directory), "~/" the home, and anything else is relative to the
// project.
func claudePath(p string) string {
	if path.IsAbs(p) {
		return "/" + path.Clean(p)
	}
	return p
}

func appendNew(list []string, s string) []string {
	for _, x := range list {
		if x == s {
			return list
		}
	}
	return append(list, s)
}
