// Package layout is the one place that names the fixed paths and system
// accounts inside every devbox container. The image builder writes them, the
// entrypoint, firewall wiring, doctor and the escape suite read them; none of
// them repeats a literal.
//
// It imports nothing, so every package (policy included) may depend on it.
package layout

// Paths inside the container.
const (
	// BinaryPath is where the devbox binary lives in the container.
	BinaryPath = "/usr/local/bin/devbox"
	// ConfigDir holds what the image bakes in for the entrypoint.
	ConfigDir = "/etc/devbox"
	// PolicyPath is the normalized policy baked into the image.
	PolicyPath = ConfigDir + "/policy.json"
	// BaselinePath is the team baseline baked in by `devbox build --baseline`.
	BaselinePath = ConfigDir + "/baseline.json"
	// RepoPolicyPath is where a container started from a prebuilt image
	// (`devbox init --image`) finds the repository's own policy: a
	// read-only bind mount of .devcontainer/devbox.policy.jsonc. The
	// entrypoint applies it only when it narrows the image's baseline.
	RepoPolicyPath = ConfigDir + "/repo.policy.jsonc"
	// LogDir holds the firewall's logs.
	LogDir = "/var/log/devbox"
	// LogPath is the blocked-connection log (JSON lines).
	LogPath = LogDir + "/firewall.jsonl"
	// RunDir holds run-time state: pid files, the fence status. It is 0755
	// root, so the agent's user can read it but never forge its contents.
	RunDir = "/run/devbox"
	// StatusPath is where the entrypoint records whether the fence is up.
	StatusPath = RunDir + "/status"
	// AppliedPolicyPath is where the entrypoint records the policy it
	// resolved and fenced with (the repository's, when one is mounted and
	// narrows the baseline): `devbox run`, the credential gateway and
	// `devbox doctor` read it (baseline.Applied), so they apply the same
	// narrowing as the fence.
	AppliedPolicyPath = RunDir + "/policy.json"
	// SecretsDir is where credentials live, readable by root and the
	// gateway's account only. DEVBOX_SECRETS_DIR overrides it.
	SecretsDir = "/var/lib/devbox/secrets"
	// GitConfigPath is git's system-wide config, where the credential
	// gateway's url.insteadOf rules go.
	GitConfigPath = "/etc/gitconfig"
	// OriginDir is where isolated mode (`devbox init --isolated`) mounts
	// the host's checkout, read-only, to clone the workspace volume from.
	OriginDir = "/mnt/devbox-origin"
	// IsolatedWorkspaceEnv names, in isolated mode, the workspace folder
	// that is a per-container volume: the entrypoint hands the new,
	// empty volume to the agent's user, and `devbox pull` finds the
	// repository there.
	IsolatedWorkspaceEnv = "DEVBOX_ISOLATED_WORKSPACE"
	// ClaudeDir is Claude Code's state directory, relative to the agent's
	// home: the image creates it, devbox init mounts the per-container
	// volume there and points CLAUDE_CONFIG_DIR at it, the entrypoint
	// hands it to the agent's user.
	ClaudeDir = ".claude"
)

// GatewayAddr is where the credential gateway listens: loopback only, a
// fixed port so the image's Claude Code settings and git config can name it.
const GatewayAddr = "127.0.0.1:53541"

// System accounts. Each enforcing daemon runs under its own fixed system
// uid (below 1000, so updateRemoteUserUID never remaps it), which the rules
// match by owner. The agent's user must never have any of them.
const (
	// DNSUser is the DNS filter's account; DNSUID is its uid and gid.
	DNSUser = "devbox-dns"
	DNSUID  = 998
	// GateUser is the name-bound egress gate's account.
	GateUser = "devbox-gate"
	GateUID  = 997
	// GatewayUser is the credential gateway's account.
	GatewayUser = "devbox-gateway"
	GatewayUID  = 996
)
