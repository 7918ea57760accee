package image

import (
	"github.com/devbox-dev/devbox/internal/layout"
	"github.com/devbox-dev/devbox/internal/policy"
)

// FenceProperties is the one place that decides what a dev container needs
// so the fence starts: the devcontainer.json / devcontainer.metadata
// properties that carry capabilities, users and the entrypoint. The image
// builder puts them in the image's devcontainer.metadata label, `devbox init`
// in devcontainer.json and the feature in devcontainer-feature.json.
func FenceProperties(p *policy.Policy) map[string]any {
	return map[string]any{
		// NET_ADMIN and NET_RAW are for the root entrypoint only: it loads
		// the iptables rules and the DNS filter manages the kernel sets. The
		// remote user runs without any capability (non-root, no_new_privs).
		"capAdd": []string{"NET_ADMIN", "NET_RAW"},
		// no-new-privileges: nothing the agent runs can gain privileges
		// through setuid/setcap binaries.
		"securityOpt": []string{"no-new-privileges"},
		// The Dev Containers CLI runs "entrypoint" as containerUser on every
		// start; the fence must be installed by root.
		"containerUser": "root",
		"remoteUser":    p.Image.User.Name,
		// A real init reaps the DNS filter and whatever the agent leaves behind.
		"init":       true,
		"entrypoint": layout.BinaryPath + " entrypoint",
		// The uid remap must not be relied on by the fence, but it keeps
		// workspace ownership right; rules never key on this uid.
		"updateRemoteUserUID": true,
	}
}
