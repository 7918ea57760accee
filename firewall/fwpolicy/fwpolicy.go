// Package fwpolicy converts a devbox policy into a firewall.Config. It is a
// package of its own so the firewall package stays usable without devbox's
// policy file format.
package fwpolicy

import (
	"github.com/devbox-dev/devbox/firewall"
	"github.com/devbox-dev/devbox/internal/layout"
	"github.com/devbox-dev/devbox/internal/policy"
)

// Config is the one place a devbox policy becomes a firewall Config.
// The policy is already validated and normalized (presets expanded, names
// lower-cased); the in-container log path is the default when the policy
// turns logging on without naming a file.
func Config(p *policy.Policy) firewall.Config {
	n := p.Network
	cfg := firewall.Config{
		Allow:    destinations(n.Allow),
		Deny:     destinations(n.Deny),
		Upstream: n.DNS.Upstream,
		Log:      n.Log.Blocked,
		LogFile:  n.Log.File,
		// Every devbox container puts its names behind the gate.
		Gate: true,
		QUIC: n.QUIC,
	}
	// The credential gateway's hosts (which the policy allows on 443, or
	// it would not validate) and their services' other hosts: reachable by
	// the gateway's uid only, the protect rule comes before every allow.
	cfg.Protect = p.Credentials.ProtectList()
	if len(cfg.Protect) > 0 {
		cfg.ProtectUID = layout.GatewayUID
	}
	if cfg.Log && cfg.LogFile == "" {
		cfg.LogFile = layout.LogPath
	}
	return cfg
}

func destinations(ds []policy.Destination) []firewall.Destination {
	out := make([]firewall.Destination, 0, len(ds))
	for _, d := range ds {
		switch d.Kind {
		case policy.Host:
			out = append(out, firewall.Destination{Name: d.Name, Port: d.Port})
		case policy.Wildcard:
			out = append(out, firewall.Destination{Name: d.Name, Wildcard: true, Port: d.Port})
		case policy.Prefix:
			out = append(out, firewall.Destination{Prefix: d.Prefix, Port: d.Port})
		}
	}
	return out
}
