// Package policy reads devbox sandbox policies: one HuJSON file per repository
// that describes the image, the pinned agent, the network allowlist and the
// per-command sandbox. A Policy returned by Load or Parse is validated,
// normalized and has its presets expanded; nothing downstream ever sees a
// policy that did not validate.
package policy

import "net/netip"

// DefaultFileName is the policy file name `devbox init` writes and the
// commands look for when given a directory.
const DefaultFileName = "devbox.policy.jsonc"

// Policy is the whole sandbox policy. The JSON names are the file's keys.
type Policy struct {
	// Path is the file the policy was read from ("" for Parse without a name).
	Path string `json:"-"`

	Image   Image   `json:"image"`
	Agent   Agent   `json:"agent"`
	Network Network `json:"network"`
	Sandbox Sandbox `json:"sandbox"`
	// Credentials are the credential gateway's routes (see credentials.go).
	Credentials Credentials `json:"credentials,omitzero"`
}

// Image describes what the image is built from and where it is pushed.
type Image struct {
	// Base is the base image reference (tag or digest). It is resolved to a
	// digest by `devbox lock`.
	Base string `json:"base"`
	// User is the non-root user the agent runs as.
	User User `json:"user"`
	// Packages are extra Debian packages installed on top of devbox's own.
	Packages []string `json:"packages"`
	// Tag is the reference `devbox build --push` pushes to ("" = none).
	Tag string `json:"tag"`
}

// User is the non-root account inside the image.
type User struct {
	Name string `json:"name"`
	UID  int    `json:"uid"`
	GID  int    `json:"gid"`
}

// Agent pins the coding agent installed in the image.
type Agent struct {
	// ClaudeCode is an exact X.Y.Z version, or "none" to leave it out.
	ClaudeCode string `json:"claudeCode"`
	// Login is "" when Claude Code gets its credential from the credential
	// gateway (credentials.anthropic), or LoginInContainer when the user
	// chose to log in inside the container, where the agent holds the
	// token: an explicit opt-out that `devbox doctor` warns about.
	Login string `json:"login,omitempty"`
}

// ClaudeCodeNone is the Agent.ClaudeCode value that leaves Claude Code out.
const ClaudeCodeNone = "none"

// LoginInContainer is the Agent.Login value for Claude Code's own /login
// inside the container, instead of the credential gateway.
const LoginInContainer = "in-container"

// Network is the egress policy. An empty Allow (after presets expand) means
// no network at all.
type Network struct {
	// Presets are named groups of destinations (see Presets).
	Presets []string `json:"presets"`
	// Allow lists the destinations egress may reach, presets expanded,
	// duplicates folded, entries covered by Deny removed.
	Allow []Destination `json:"allow"`
	// Deny lists destinations that are never reachable; deny wins over allow.
	Deny []Destination `json:"deny"`
	// DNS configures the DNS filter.
	DNS DNS `json:"dns"`
	// Log configures the blocked-connection log.
	Log Log `json:"log"`
	// QUIC lets UDP reach allowed names' addresses. Off by default: the
	// name gate checks TCP only (TLS SNI, HTTP Host), and QUIC's name is
	// where it cannot read it, so clients fall back to TCP.
	QUIC bool `json:"quic"`
}

// DNS configures where the DNS filter forwards allowed queries.
type DNS struct {
	// Upstream lists resolver addresses (IP or IP:port). Empty means the
	// resolvers of the container's resolv.conf at apply time.
	Upstream []netip.AddrPort `json:"upstream"`
}

// Log configures the blocked-connection log.
type Log struct {
	// Blocked turns logging of blocked connections and refused queries on.
	Blocked bool `json:"blocked"`
	// File is where the JSON lines go.
	File string `json:"file"`
}

// Sandbox is the per-command bubblewrap layer (`devbox run`).
type Sandbox struct {
	Enabled bool `json:"enabled"`
	// DenyRead are paths hidden from sandboxed commands (~ is the user's home).
	DenyRead []string `json:"denyRead"`
	// AllowWrite are paths sandboxed commands may write besides the workspace and /tmp.
	AllowWrite []string `json:"allowWrite"`
	// DenyWrite are paths never writable, on top of the mandatory list.
	DenyWrite []string `json:"denyWrite"`
}

// DestKind says what a Destination names.
type DestKind int

const (
	// Host is an exact DNS name ("api.example.com").
	Host DestKind = iota + 1
	// Wildcard matches every subdomain of Name, not Name itself ("*.example.com").
	Wildcard
	// Prefix is an IP literal (a /32 or /128) or a CIDR.
	Prefix
)

// Destination is one validated allow or deny entry.
type Destination struct {
	Kind DestKind
	// Name is the lower-cased host name for Host, or the suffix after "*."
	// for Wildcard.
	Name string
	// Prefix is set for Kind == Prefix (masked).
	Prefix netip.Prefix
	// Port restricts the destination to one TCP/UDP port; 0 means any port.
	Port uint16
}
