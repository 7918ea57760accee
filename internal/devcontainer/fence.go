package devcontainer

import "github.com/devbox-dev/devbox/internal/policy"

// Fixed paths inside every devbox image and feature install. The image
// builder writes them, the entrypoint and the firewall read them.
const (
	// BinaryPath is where the devbox binary lives in the container.
	BinaryPath = "/usr/local/bin/devbox"
	// PolicyPath is the normalized policy baked into the image.
	PolicyPath = "/etc/devbox/policy.json"
	// LogPath is the default blocked-connection log (JSON lines).
	LogPath = "/var/log/devbox/firewall.jsonl"
	// DNSUser is the system account the DNS filter runs as. It is a fixed
	// system uid that updateRemoteUserUID never remaps.
	DNSUser = "devbox-dns"
	// DNSUID is DNSUser's uid and gid.
	DNSUID = 998
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
		"entrypoint": BinaryPath + " entrypoint",
		// The uid remap must not be relied on by the fence, but it keeps
		// workspace ownership right; rules never key on this uid.
		"updateRemoteUserUID": true,
	}
}
