package policy

import (
	"net/netip"

	"github.com/devbox-dev/devbox/internal/layout"
)

// Defaults for keys a policy file leaves out. Explain lists the ones that
// applied.
const (
	// DefaultBase is the base image. Teams override it (tests use a local
	// registry); `devbox lock` pins whatever it is by digest.
	DefaultBase = "docker.io/library/debian:trixie-slim"
	// DefaultUserName, DefaultUID and DefaultGID describe the non-root user.
	DefaultUserName = "dev"
	DefaultUID      = 1000
	DefaultGID      = 1000
	// DefaultClaudeCode is the pinned Claude Code version.
	DefaultClaudeCode = "2.1.332"
	// DefaultLogFile is where blocked connections are logged.
	DefaultLogFile = layout.LogPath
	// DefaultDNSPort is the port of a dns.upstream entry given without one.
	DefaultDNSPort = 53

	// reservedID is the uid and gid of the DNS filter's account: the
	// firewall lets that uid query upstream resolvers, so the agent's user
	// must never have it.
	reservedID = layout.DNSUID
	// reservedUser is the DNS filter's account name.
	reservedUser = layout.DNSUser
)

// DefaultDenyRead are the paths sandboxed commands never read, whatever the
// file says: credentials an agent could exfiltrate. "~/" is the user's home;
// a relative pattern is matched inside the workspace, where "**/" means any
// directory depth (so "**/.env" is every .env file of the workspace).
var DefaultDenyRead = []string{
	"**/.env",
	"**/.env.*",
	"~/.aws",
	"~/.config/gcloud",
	"~/.docker",
	"~/.git-credentials",
	"~/.netrc",
	"~/.ssh",
}

// defaultPolicy returns a Policy holding every default; decoding overwrites
// the keys the file has.
func defaultPolicy() *Policy {
	return &Policy{
		Image: Image{
			Base:     DefaultBase,
			User:     User{Name: DefaultUserName, UID: DefaultUID, GID: DefaultGID},
			Packages: []string{},
		},
		Agent: Agent{ClaudeCode: DefaultClaudeCode},
		Network: Network{
			Presets: []string{},
			Allow:   []Destination{},
			Deny:    []Destination{},
			DNS:     DNS{Upstream: []netip.AddrPort{}},
			Log:     Log{Blocked: true, File: DefaultLogFile},
		},
		Sandbox: Sandbox{
			DenyRead:   append([]string(nil), DefaultDenyRead...),
			AllowWrite: []string{},
			DenyWrite:  []string{},
		},
	}
}

// defaultNotes names each defaultable key and describes its default, in the
// order Explain prints them.
var defaultNotes = []struct{ path, what string }{
	{"image.base", DefaultBase},
	{"image.user.name", DefaultUserName},
	{"image.user.uid", "1000"},
	{"image.user.gid", "1000"},
	{"image.packages", "none beyond devbox's own"},
	{"image.tag", "none: the image is not pushed"},
	{"agent.claudeCode", DefaultClaudeCode},
	{"network.presets", "none"},
	{"network.allow", "empty"},
	{"network.deny", "empty"},
	{"network.dns.upstream", "the resolvers in the container's /etc/resolv.conf when the firewall starts"},
	{"network.log.blocked", "true"},
	{"network.log.file", DefaultLogFile},
	{"network.quic", "false: UDP to allowed names' addresses is blocked; QUIC clients fall back to TCP"},
	{"sandbox.enabled", "false"},
	{"sandbox.allowWrite", "only the workspace and /tmp"},
	{"sandbox.denyWrite", "only the mandatory list"},
}
