package policy

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/devbox-dev/devbox/internal/layout"
)

// Explanation is the effective policy with where each part came from, for
// `devbox policy explain`. Its JSON form is stable: keys and list orders
// only change with the policy.
type Explanation struct {
	// File is the name the policy was read from.
	File string `json:"file"`
	// Policy is the effective (normalized) policy.
	Policy *Policy `json:"policy"`
	// NoNetwork is true when nothing at all may be reached.
	NoNetwork bool `json:"noNetwork"`
	// Allowed is every allowed destination with its origins.
	Allowed []AllowedEntry `json:"allowed"`
	// Removed are allow entries dropped because a deny covers them.
	Removed []Removal `json:"removed"`
	// Defaults are the keys the file left out, with the value used.
	Defaults []DefaultApplied `json:"defaults"`
	// Protected are the hosts only the credential gateway may reach
	// (Credentials.ProtectedHosts); none without a credentials section.
	Protected []ProtectedHost `json:"protected,omitempty"`

	// positions maps key paths ("network.allow[2]") to where they start;
	// elems maps a list's key path and a canonical element to its path.
	positions map[string]Position
	elems     map[string]string
}

// ElementPath returns the key path of value in the file's list at key
// ("sandbox.allowWrite", "/x" → "sandbox.allowWrite[1]"), or key when the
// file does not list it (a default, or a policy built in Go).
func (ex *Explanation) ElementPath(key, value string) string {
	if p, ok := ex.elems[key+"\x00"+value]; ok {
		return p
	}
	return key
}

// Position is a 1-based line and column (in characters) in a policy file.
type Position struct{ Line, Col int }

// At returns an Error placed at key path (as in "network.allow[2]") with
// msg. A path the file does not have is placed at its nearest parent the
// file has, and at 1:1 when there is none, so every problem gets a
// file:line:col.
func (ex *Explanation) At(path, msg string) Error {
	e := Error{File: ex.File, Path: path, Msg: msg, Line: 1, Col: 1}
	for p := path; p != ""; p = parentPath(p) {
		if pos, ok := ex.positions[p]; ok {
			e.Line, e.Col = pos.Line, pos.Col
			break
		}
	}
	return e
}

func parentPath(p string) string {
	if strings.HasSuffix(p, "]") {
		if i := strings.LastIndexByte(p, '['); i >= 0 {
			return p[:i]
		}
	}
	if i := strings.LastIndexByte(p, '.'); i >= 0 {
		return p[:i]
	}
	return ""
}

// AllowedEntry is one allowed destination. From lists "allow" when the
// file names it and "preset:NAME" for each preset that brings it, sorted.
// At lists the key paths that bring it ("network.allow[0]",
// "network.presets[1]"), in the same order.
type AllowedEntry struct {
	Destination Destination `json:"destination"`
	From        []string    `json:"from"`
	At          []string    `json:"-"`
}

// DefaultApplied is a key the file left out and the default it got.
type DefaultApplied struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// Explain parses a policy like Parse and returns the explanation.
func Explain(name string, raw []byte) (*Explanation, error) {
	return parse(name, raw)
}

// ExplainFile reads path and explains it; a missing file wraps ErrNoPolicy.
func ExplainFile(path string) (*Explanation, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		if os.IsNotExist(err) {
			return nil, fmt.Errorf("%s: %w", path, ErrNoPolicy)
		}
		return nil, fmt.Errorf("reading policy: %w", err)
	}
	return Explain(path, raw)
}

// finish canonicalizes a decoded policy and records its explanation.
func finish(p *Policy, notes *decodeNotes, seen map[string]bool) *Explanation {
	p.Image.Packages = sortFold(p.Image.Packages)
	// Upstream order is the user's preference order: fold, never sort.
	var ups = p.Network.DNS.Upstream[:0:0]
	for _, u := range p.Network.DNS.Upstream {
		if !slices.Contains(ups, u) {
			ups = append(ups, u)
		}
	}
	p.Network.DNS.Upstream = ups
	p.Sandbox.DenyRead = sortFold(p.Sandbox.DenyRead)
	p.Sandbox.AllowWrite = sortFold(p.Sandbox.AllowWrite)
	p.Sandbox.DenyWrite = sortFold(p.Sandbox.DenyWrite)
	removed := resolveNetwork(&p.Network)

	ex := &Explanation{File: p.Path, Policy: p, NoNetwork: p.Network.NoNetwork(), Removed: removed, Allowed: []AllowedEntry{}, Defaults: []DefaultApplied{}}
	for _, a := range p.Network.Allow {
		e := AllowedEntry{Destination: a}
		if i := slices.Index(notes.explicitAllow, a); i >= 0 {
			e.From = append(e.From, "allow")
			e.At = append(e.At, notes.explicitAllowAt[i])
		}
		for _, name := range p.Network.Presets {
			if slices.Contains(presets[name], a) {
				e.From = append(e.From, "preset:"+name)
				e.At = append(e.At, notes.presetAt[name])
			}
		}
		ex.Allowed = append(ex.Allowed, e)
	}
	for _, d := range defaultNotes {
		if !seen[d.path] {
			ex.Defaults = append(ex.Defaults, DefaultApplied{Key: d.path, Value: d.what})
		}
	}
	ex.Protected = p.Credentials.ProtectedHosts()
	ex.Defaults = append(ex.Defaults, DefaultApplied{
		Key:   "sandbox.denyRead",
		Value: "always includes " + strings.Join(DefaultDenyRead, ", "),
	})
	return ex
}

// WriteText prints the explanation for people.
func (ex *Explanation) WriteText(w io.Writer) error {
	p := ex.Policy
	var b strings.Builder
	name := p.Path
	if name == "" {
		name = "(unnamed policy)"
	}
	fmt.Fprintf(&b, "Policy %s\n\n", name)

	fmt.Fprintf(&b, "Image\n")
	fmt.Fprintf(&b, "  base:      %s\n", p.Image.Base)
	fmt.Fprintf(&b, "  user:      %s (uid %d, gid %d), never root, no sudo\n", p.Image.User.Name, p.Image.User.UID, p.Image.User.GID)
	fmt.Fprintf(&b, "  packages:  %s\n", listOr(p.Image.Packages, "none beyond devbox's own"))
	fmt.Fprintf(&b, "  push tag:  %s\n", or(p.Image.Tag, "none (not pushed)"))
	fmt.Fprintf(&b, "\nAgent\n")
	if p.Agent.ClaudeCode == ClaudeCodeNone {
		fmt.Fprintf(&b, "  Claude Code: not installed\n")
	} else {
		fmt.Fprintf(&b, "  Claude Code: %s (pinned)\n", p.Agent.ClaudeCode)
		switch {
		case p.Credentials.Anthropic != nil:
			fmt.Fprintf(&b, "  login:       through the credential gateway (credentials.anthropic): the agent never holds the credential\n")
		case p.Agent.Login == LoginInContainer:
			fmt.Fprintf(&b, "  login:       in the container (agent.login): the agent holds its own credential, can read it and use it from anywhere it can reach\n")
		default:
			fmt.Fprintf(&b, "  login:       no credentials.anthropic: a /login in the container leaves the token with the agent\n")
		}
	}

	fmt.Fprintf(&b, "\nNetwork\n")
	fmt.Fprintf(&b, "  presets:   %s\n", listOr(p.Network.Presets, "none"))
	if ex.NoNetwork {
		fmt.Fprintf(&b, "  NO NETWORK: the allow list is empty, so every outbound connection and every\n")
		fmt.Fprintf(&b, "  DNS query is refused. Only loopback works inside the container.\n")
	} else {
		fmt.Fprintf(&b, "  allowed (everything else is refused):\n")
		for _, a := range ex.Allowed {
			fmt.Fprintf(&b, "    %-44s from %s\n", a.Destination, strings.Join(a.From, ", "))
		}
	}
	if len(p.Network.Deny) > 0 {
		fmt.Fprintf(&b, "  denied (wins over allow):\n")
		for _, d := range p.Network.Deny {
			fmt.Fprintf(&b, "    %s\n", d)
		}
	}
	for _, r := range ex.Removed {
		fmt.Fprintf(&b, "  removed %s from the allow list: denied by %s\n", r.Allow, r.Deny)
	}
	if len(p.Network.DNS.Upstream) == 0 {
		fmt.Fprintf(&b, "  DNS upstream: the resolvers in /etc/resolv.conf when the firewall starts\n")
	} else {
		ups := make([]string, len(p.Network.DNS.Upstream))
		for i, u := range p.Network.DNS.Upstream {
			ups[i] = u.String()
		}
		fmt.Fprintf(&b, "  DNS upstream: %s\n", strings.Join(ups, ", "))
	}
	if p.Network.Log.Blocked {
		fmt.Fprintf(&b, "  blocked connections are logged to %s\n", p.Network.Log.File)
	} else {
		fmt.Fprintf(&b, "  blocked connections are not logged\n")
	}

	if c := p.Credentials; !c.IsZero() {
		fmt.Fprintf(&b, "\nCredentials (the gateway injects them; the agent never holds them)\n")
		for _, r := range c.routes() {
			fmt.Fprintf(&b, "  %-44s secret %q\n", r.at+" "+r.host, r.secret)
		}
		fmt.Fprintf(&b, "  protected (only the gateway, uid %d, may connect; everyone else is refused):\n", layout.GatewayUID)
		for _, h := range c.ProtectedHosts() {
			fmt.Fprintf(&b, "    %-44s from %s\n", h.Host, h.From)
		}
	}

	fmt.Fprintf(&b, "\nSandbox (devbox run)\n")
	if p.Sandbox.Enabled {
		fmt.Fprintf(&b, "  enabled\n")
	} else {
		fmt.Fprintf(&b, "  disabled (the lists below apply once it is enabled)\n")
	}
	fmt.Fprintf(&b, "  unreadable:  %s\n", strings.Join(p.Sandbox.DenyRead, ", "))
	fmt.Fprintf(&b, "  writable:    the workspace, /tmp%s\n", prefixList(p.Sandbox.AllowWrite))
	fmt.Fprintf(&b, "  never writable (besides the mandatory list): %s\n", listOr(p.Sandbox.DenyWrite, "nothing more"))

	fmt.Fprintf(&b, "\nDefaults that applied\n")
	for _, d := range ex.Defaults {
		fmt.Fprintf(&b, "  %-22s %s\n", d.Key, d.Value)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func listOr(l []string, none string) string {
	if len(l) == 0 {
		return none
	}
	return strings.Join(l, ", ")
}

func or(s, none string) string {
	if s == "" {
		return none
	}
	return s
}

func prefixList(l []string) string {
	if len(l) == 0 {
		return ""
	}
	return ", " + strings.Join(l, ", ")
}
