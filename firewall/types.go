package firewall

import "time"

// Result tells what Apply did.
type Result struct {
	// StaticEntries is the number of set members loaded from prefixes.
	StaticEntries int
	Took          time.Duration
}

// HealthName is the CHAOS-class TXT name the filter answers itself with its
// counters (base64 JSON: TXT strings escape quotes); StartDNS and Status use it to check the daemon.
const HealthName = "health.devbox."

// Health is the daemon's answer to a HealthName query.
type Health struct {
	PID            int      `json:"pid"`
	Upstreams      []string `json:"upstreams"`
	Queries        int64    `json:"queries"`
	Forwarded      int64    `json:"forwarded"`
	Refused        int64    `json:"refused"`
	Dropped        int64    `json:"droppedAnswers"`
	UpstreamErrors int64    `json:"upstreamErrors"`
	Inserted       int64    `json:"inserted"`
	Blocked        int64    `json:"blockedPackets"`
	CacheHits      int64    `json:"cacheHits"`
}

// DaemonOptions says how StartDNS runs the DNS filter.
type DaemonOptions struct {
	// Command is the argv that runs RunDNS in the foreground and accepts
	// "--config FILE" after it, e.g. {layout.BinaryPath, "firewall", "dns"}.
	// Required.
	Command []string
	// Env is the daemon's environment (default: empty).
	Env []string
	// UID and GID the daemon runs as; it keeps only CAP_NET_ADMIN, as an
	// ambient capability. The default is layout.DNSUID (devbox-dns), a
	// fixed system id that updateRemoteUserUID never remaps. -1 keeps the caller's.
	UID, GID int
	// Wait bounds how long StartDNS waits for the daemon to answer
	// (default 5s).
	Wait time.Duration
}

// Status is what `devbox firewall status` shows.
type Status struct {
	Families []FamilyStatus `json:"families"`
	Sets     map[string]int `json:"sets"`
	Daemon   DaemonStatus   `json:"daemon"`
	Gate     GateStatus     `json:"gate"`
	LogFile  string         `json:"logFile,omitempty"`
}

// FamilyStatus is one family's rules and counters.
type FamilyStatus struct {
	Family string `json:"family"`
	// Loaded is true when every devbox jump is in place.
	Loaded bool `json:"loaded"`
	// Policy is the OUTPUT chain's policy.
	Policy string `json:"outputPolicy"`
	// Rules are DEVBOX-OUTPUT's rules with their packet and byte counters.
	Rules []RuleCounter `json:"rules"`
	// Error says why the rules could not be read (e.g. not root).
	Error string `json:"error,omitempty"`
}

// RuleCounter is one rule and what it matched.
type RuleCounter struct {
	Rule    string `json:"rule"`
	Packets uint64 `json:"packets"`
	Bytes   uint64 `json:"bytes"`
}

// DaemonStatus is the DNS filter's state.
type DaemonStatus struct {
	PID     int     `json:"pid,omitempty"`
	Running bool    `json:"running"`
	Health  *Health `json:"health,omitempty"`
	Error   string  `json:"error,omitempty"`
}
