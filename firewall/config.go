package firewall

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"time"

	"github.com/devbox-dev/devbox/internal/layout"
	"github.com/devbox-dev/devbox/internal/resolvconf"
)

// Defaults for the Config fields left zero. They are fixed values so that a
// rule compiled by one devbox version matches the daemon of another.
const (
	// DefaultDNSPort is the local port the DNS filter listens on; every
	// outbound DNS packet is redirected there. It is above 1024 so the
	// filter, which runs as an unprivileged system user, can bind it.
	DefaultDNSPort = 53535
	// DefaultMark is the SO_MARK the DNS filter puts on its upstream
	// sockets. Setting a mark needs CAP_NET_ADMIN, so the agent cannot forge it.
	DefaultMark = 0x64627831
	// DefaultLogGroup is the NFLOG group blocked packets are sent to.
	DefaultLogGroup = 5353
	// DefaultMinTTL and DefaultMaxTTL bound how long a resolved address
	// stays in the allowed sets.
	DefaultMinTTL = 60 * time.Second
	DefaultMaxTTL = time.Hour
	// DefaultGatePort is where the name gate listens (127.0.0.1 and ::1);
	// TCP to name-derived addresses is redirected there.
	DefaultGatePort = 53443
	// DefaultStateDir holds the daemon's config copy and pidfile.
	DefaultStateDir = layout.RunDir
	// DefaultResolvConf is read for upstream resolvers when none are given.
	DefaultResolvConf = "/etc/resolv.conf"
)

// Destination is one allow or deny entry: exactly one of Name and Prefix is
// set. A Wildcard name matches every subdomain of Name but not Name itself.
type Destination struct {
	Name     string       `json:"name,omitempty"`
	Wildcard bool         `json:"wildcard,omitempty"`
	Prefix   netip.Prefix `json:"prefix,omitzero"`
	// Port restricts the entry to one TCP and UDP port; 0 means any port.
	Port uint16 `json:"port,omitempty"`
}

func (d Destination) String() string {
	s := d.Name
	switch {
	case d.Prefix.IsValid():
		s = d.Prefix.String()
	case d.Wildcard:
		s = "*." + d.Name
	}
	if d.Port != 0 {
		if d.Prefix.IsValid() && d.Prefix.Addr().Is6() {
			s = "[" + s + "]"
		}
		s = fmt.Sprintf("%s:%d", s, d.Port)
	}
	return s
}

// Config is everything the fence needs. The zero value of every optional
// field means its default (see WithDefaults); an empty Allow means no egress.
type Config struct {
	Allow []Destination `json:"allow"`
	Deny  []Destination `json:"deny"`
	// Upstream resolvers the filter forwards allowed queries to; empty means
	// the nameservers of ResolvConf (Docker's 127.0.0.11 included).
	Upstream   []netip.AddrPort `json:"upstream,omitempty"`
	ResolvConf string           `json:"resolvConf,omitempty"`

	DNSPort  uint16 `json:"dnsPort,omitempty"`
	Mark     uint32 `json:"mark,omitempty"`
	LogGroup uint16 `json:"logGroup,omitempty"`
	// Log turns the blocked-connection log on; LogFile is where it goes.
	Log     bool   `json:"log,omitempty"`
	LogFile string `json:"logFile,omitempty"`
	// LogMaxBytes bounds LogFile: past it the file is copied to LogFile.1
	// (replacing the previous copy) and emptied. Default 10 MiB.
	LogMaxBytes int64 `json:"logMaxBytes,omitempty"`

	// Gate puts the name-bound gate in front of every address that entered
	// the sets through a name: TCP to one from any uid but the gate's is
	// redirected to the gate (GatePort), which passes it only when its TLS
	// SNI or HTTP Host is allowed and resolved to that address; UDP to one
	// is rejected unless QUIC is set. Static prefixes keep the direct path.
	// fwpolicy always sets it; off, names open their addresses as before.
	Gate     bool   `json:"gate,omitempty"`
	GatePort uint16 `json:"gatePort,omitempty"`
	// QUIC lets UDP through to name-derived addresses, unchecked by the gate.
	QUIC bool `json:"quic,omitempty"`
	// Protect lists host names only ProtectUID may connect to: the
	// credential gateway's upstreams and their services' other hosts. An
	// entry is an exact name or "*.domain" (every name under domain). The
	// DNS filter puts the addresses of allowed names it matches into the
	// protect sets before it answers; a name not allowed is refused anyway.
	Protect []string `json:"protect,omitempty"`
	// ProtectUID is the one uid that may reach protected addresses
	// (default layout.GatewayUID).
	ProtectUID int `json:"protectUID,omitempty"`

	// NoCache turns the filter's answer cache off (for benchmarks and
	// debugging: every query then goes upstream).
	NoCache bool `json:"noCache,omitempty"`

	MinTTL   time.Duration `json:"minTTL,omitempty"`
	MaxTTL   time.Duration `json:"maxTTL,omitempty"`
	StateDir string        `json:"stateDir,omitempty"`
}

// WithDefaults returns c with every zero optional field set to its default.
func (c Config) WithDefaults() Config {
	c.DNSPort = cmp.Or(c.DNSPort, DefaultDNSPort)
	c.Mark = cmp.Or(c.Mark, DefaultMark)
	c.GatePort = cmp.Or(c.GatePort, DefaultGatePort)
	c.LogGroup = cmp.Or(c.LogGroup, DefaultLogGroup)
	c.MinTTL = cmp.Or(c.MinTTL, DefaultMinTTL)
	c.MaxTTL = cmp.Or(c.MaxTTL, DefaultMaxTTL)
	c.LogMaxBytes = cmp.Or(c.LogMaxBytes, DefaultLogMaxBytes)
	c.StateDir = cmp.Or(c.StateDir, DefaultStateDir)
	c.ResolvConf = cmp.Or(c.ResolvConf, DefaultResolvConf)
	c.ProtectUID = cmp.Or(c.ProtectUID, layout.GatewayUID)
	return c
}

// Validate reports the first entry that cannot be enforced.
func (c Config) Validate() error {
	for _, list := range []struct {
		what string
		ds   []Destination
	}{{"allow", c.Allow}, {"deny", c.Deny}} {
		for i, d := range list.ds {
			if d.Prefix.IsValid() == (d.Name != "") {
				return fmt.Errorf("firewall: %s[%d]: exactly one of name and prefix must be set", list.what, i)
			}
			if d.Name != "" && !validName(d.Name) {
				return fmt.Errorf("firewall: %s[%d]: %q is not a valid host name", list.what, i, d.Name)
			}
			if d.Wildcard && d.Name == "" {
				return fmt.Errorf("firewall: %s[%d]: a wildcard needs a name", list.what, i)
			}
		}
	}
	for i, n := range c.Protect {
		if !validName(strings.TrimPrefix(n, "*.")) {
			return fmt.Errorf("firewall: protect[%d]: %q is not a valid host name", i, n)
		}
	}
	if c.LogMaxBytes < 0 {
		return fmt.Errorf("firewall: logMaxBytes %d is negative", c.LogMaxBytes)
	}
	if c.MinTTL < 0 || c.MaxTTL < 0 || (c.MaxTTL != 0 && c.MinTTL > c.MaxTTL) {
		return fmt.Errorf("firewall: TTL bounds %v..%v are not a range", c.MinTTL, c.MaxTTL)
	}
	for _, u := range c.Upstream {
		if !u.IsValid() || u.Port() == 0 {
			return fmt.Errorf("firewall: upstream %q is not an address with a port", u)
		}
	}
	return nil
}

// validName accepts lower-case LDH names (underscores allowed for service
// labels), byte for byte: anything else, NUL included, is rejected rather
// than normalized.
func validName(s string) bool {
	if s == "" || len(s) > 253 || strings.HasPrefix(s, ".") || strings.HasSuffix(s, ".") {
		return false
	}
	for rest := s; rest != ""; {
		label, after, _ := strings.Cut(rest, ".")
		rest = after
		if label == "" || len(label) > 63 {
			return false
		}
		for i := 0; i < len(label); i++ {
			b := label[i]
			if !(b >= 'a' && b <= 'z' || b >= '0' && b <= '9' || b == '-' || b == '_') {
				return false
			}
		}
	}
	return true
}

// LoadConfig reads a Config written as JSON (the daemon's copy).
func LoadConfig(path string) (Config, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("firewall: read config: %w", err)
	}
	var c Config
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return Config{}, fmt.Errorf("firewall: %s: %w", path, err)
	}
	if err := c.Validate(); err != nil {
		return Config{}, fmt.Errorf("%w (in %s)", err, path)
	}
	return c, nil
}

// EffectiveUpstream returns cfg with Upstream set to what the DNS filter
// will forward to — the nameservers of cfg.ResolvConf (default
// /etc/resolv.conf) when the policy names none — so that the rules exempt
// Docker's embedded DNS forwards exactly when the filter uses it. Apply and
// `devbox firewall rules` both compile Rules(EffectiveUpstream(cfg)). An
// unreadable resolv.conf leaves Upstream empty: no exemption, and the
// filter itself reports the missing upstream when it starts.
func EffectiveUpstream(cfg Config) Config {
	if len(cfg.Upstream) == 0 {
		if cfg.ResolvConf == "" {
			cfg.ResolvConf = DefaultResolvConf
		}
		if ups, err := cfg.upstreams(); err == nil {
			cfg.Upstream = ups
		}
	}
	return cfg
}

// upstreams returns the resolvers the filter forwards to.
func (c Config) upstreams() ([]netip.AddrPort, error) {
	if len(c.Upstream) > 0 {
		return c.Upstream, nil
	}
	ns, err := resolvconf.Nameservers(c.ResolvConf)
	if err != nil {
		return nil, fmt.Errorf("no upstream resolver configured and %w", err)
	}
	out := make([]netip.AddrPort, len(ns))
	for i, a := range ns {
		// A zone cannot go into a rule or a set.
		out[i] = netip.AddrPortFrom(a.Addr().WithZone(""), a.Port())
	}
	return out, nil
}
