// Package baseline checks that a repository's policy only narrows a team's
// baseline policy: the team bakes the baseline into its image
// (`devbox build --baseline`), and a repository using that image may tighten
// the fence but never loosen it. The entrypoint refuses to fence with a
// policy that fails Check, and `devbox policy validate --baseline` reports
// the same problems with their file:line:col.
package baseline

import (
	"fmt"
	"net/netip"
	"path"
	"slices"
	"strings"

	"github.com/devbox-dev/devbox/firewall/fwpolicy"
	"github.com/devbox-dev/devbox/internal/policy"
	"github.com/devbox-dev/devbox/internal/sandbox"
)

// Violation is one way a repository policy exceeds its baseline: where in
// the repository's file, and the baseline entry it exceeds.
type Violation struct {
	At policy.Error
	// Baseline names the baseline entry or setting that is exceeded, as
	// `network.allow "*.corp.test:443"`; "" when no baseline entry comes
	// close (an allow no baseline allow overlaps).
	Baseline string
}

func (v Violation) Error() string {
	if v.Baseline == "" {
		return v.At.Error()
	}
	return v.At.Error() + "; exceeds baseline " + v.Baseline
}

// Violations is every problem Check found, in the repository file's order
// of keys as Check visits them. It is an error.
type Violations struct {
	// Baseline is the baseline file's name, for the heading.
	Baseline string
	List     []Violation
}

var _ error = (*Violations)(nil)

// Error prints one violation per line.
func (vs *Violations) Error() string {
	lines := make([]string, len(vs.List))
	for i, v := range vs.List {
		lines[i] = v.Error()
	}
	return strings.Join(lines, "\n")
}

// Check reports every way repo (an explained repository policy) is wider
// than base; nil means repo only narrows base. Rules:
//   - every allow entry (written or from a preset) lies within one baseline
//     allow entry (policy.Destination.Covers: name or wildcard containment,
//     CIDR containment, the same port or a baseline entry for any port);
//   - every baseline deny is covered by a repository deny (it stays);
//   - sandbox.denyRead and sandbox.denyWrite keep every baseline entry: the
//     same entry, or (both relative to the workspace) a directory above it
//     with no writable root between (see keeps: the sandbox's deeper
//     binds win);
//     sandbox.allowWrite entries lie within a baseline allowWrite entry,
//     and a pattern only as one of the baseline's own; a baseline's
//     enabled sandbox stays enabled. `devbox run` checks again on the
//     resolved plans (symbolic links followed, globs expanded);
//   - agent.claudeCode is the baseline's version;
//   - network.quic stays off when the baseline's is off;
//   - network.dns.upstream only names the baseline's resolvers, a baseline
//     that logs blocked connections keeps logging them, to its log file;
//   - image.user is the baseline's (the image has no other account);
//   - credentials are the baseline's routes or a subset of them: the same
//     secret on the same host (an http route's header and value too), git
//     repos among the baseline route's, push only where the baseline
//     pushes. A route may be dropped: its host stays protected in the
//     fence (FenceConfig), so the repository may not deny it by name;
//   - then, on what is enforced: both fences are compiled with the
//     firewall's own code (fwpolicy.Config, and FenceConfig for the
//     repository), and no packet — the agent's uid or the gateway's, TCP
//     or UDP, to any address of the check's DNS world (every name's own
//     address, one address all names share, an address in every range), on
//     any port either policy names or 22, 80, 443, 8443, with any SNI/Host
//     the gate can see — passes the repository's rules and not the
//     baseline's (Widens, firewall.Model).
func Check(base *policy.Policy, baseName string, repo *policy.Explanation) error {
	c := checker{repo: repo}
	b := base
	p := repo.Policy

	for _, a := range repo.Allowed {
		if slices.ContainsFunc(b.Network.Allow, func(w policy.Destination) bool { return w.Covers(a.Destination) }) {
			continue
		}
		at := "network.allow"
		if len(a.At) > 0 {
			at = a.At[0]
		}
		via := ""
		if len(a.From) > 0 && a.From[0] != "allow" {
			via = " (from " + a.From[0] + ")"
		}
		near := nearest(b.Network.Allow, a.Destination)
		msg := fmt.Sprintf("%q%s is not within any baseline allow entry", a.Destination.String(), via)
		ref := ""
		if near != nil {
			msg = fmt.Sprintf("%q%s is wider than the baseline allows: %s", a.Destination.String(), via, why(*near, a.Destination))
			ref = fmt.Sprintf("network.allow %q", near.String())
		}
		c.add(at, msg, ref)
	}
	for _, d := range b.Network.Deny {
		if slices.ContainsFunc(p.Network.Deny, func(r policy.Destination) bool { return r.Covers(d) }) {
			continue
		}
		c.add("network.deny", fmt.Sprintf("the baseline deny %q is missing: every baseline deny stays (add it to network.deny)", d.String()), fmt.Sprintf("network.deny %q", d.String()))
	}
	if len(p.Network.DNS.Upstream) > 0 || len(b.Network.DNS.Upstream) > 0 {
		for i, u := range p.Network.DNS.Upstream {
			if !slices.Contains(b.Network.DNS.Upstream, u) {
				c.add(fmt.Sprintf("network.dns.upstream[%d]", i), fmt.Sprintf("%q is not one of the baseline's resolvers", u.String()), "network.dns.upstream "+upstreams(b.Network.DNS.Upstream))
			}
		}
		if len(p.Network.DNS.Upstream) == 0 {
			c.add("network.dns.upstream", "the baseline names its DNS resolvers; list some of them here", "network.dns.upstream "+upstreams(b.Network.DNS.Upstream))
		}
	}
	if p.Network.Log.File != b.Network.Log.File {
		// The entrypoint creates the log file as root for the DNS filter's
		// account: a repository must not pick that path.
		c.add("network.log.file", fmt.Sprintf("%q: the log file is the baseline's", p.Network.Log.File), fmt.Sprintf("network.log.file %q", b.Network.Log.File))
	}
	if p.Network.QUIC && !b.Network.QUIC {
		// UDP to allowed names' addresses skips the name gate.
		c.add("network.quic", "the baseline keeps QUIC off (UDP to allowed names would skip the name gate); the repository cannot turn it on", "network.quic false")
	}
	if b.Network.Log.Blocked && !p.Network.Log.Blocked {
		c.add("network.log.blocked", "the baseline logs blocked connections; the repository cannot turn that off", "network.log.blocked true")
	}

	if p.Agent.ClaudeCode != b.Agent.ClaudeCode {
		c.add("agent.claudeCode", fmt.Sprintf("%q: the baseline pins Claude Code %s", p.Agent.ClaudeCode, b.Agent.ClaudeCode), fmt.Sprintf("agent.claudeCode %q", b.Agent.ClaudeCode))
	}
	if p.Image.User != b.Image.User {
		u := b.Image.User
		c.add("image.user", fmt.Sprintf("the image's user is %s (uid %d, gid %d); the repository cannot name another", u.Name, u.UID, u.GID), fmt.Sprintf("image.user %s", u.Name))
	}

	if b.Sandbox.Enabled && !p.Sandbox.Enabled {
		c.add("sandbox.enabled", "the baseline enables the sandbox; the repository cannot turn it off", "sandbox.enabled true")
	}
	writable := slices.Concat(p.Sandbox.AllowWrite, sandbox.ToolchainCaches, []string{"/tmp"})
	for _, d := range b.Sandbox.DenyRead {
		if !slices.ContainsFunc(p.Sandbox.DenyRead, func(r string) bool { return keeps(d, r, writable) }) {
			c.add("sandbox.denyRead", fmt.Sprintf("the baseline's %q is missing: denyRead can only add entries", d), fmt.Sprintf("sandbox.denyRead %q", d))
		}
	}
	for _, d := range b.Sandbox.DenyWrite {
		if !slices.ContainsFunc(p.Sandbox.DenyWrite, func(r string) bool { return keeps(d, r, writable) }) {
			c.add("sandbox.denyWrite", fmt.Sprintf("the baseline's %q is missing: denyWrite can only add entries", d), fmt.Sprintf("sandbox.denyWrite %q", d))
		}
	}
	for _, w := range p.Sandbox.AllowWrite {
		if isGlob(w) && !slices.Contains(b.Sandbox.AllowWrite, w) {
			// devbox run expands it to whatever exists then, symbolic
			// links included.
			c.add(c.repo.ElementPath("sandbox.allowWrite", w), fmt.Sprintf("%q is a pattern: a writable pattern must be one of the baseline's own", w), "sandbox.allowWrite "+quoteList(b.Sandbox.AllowWrite))
			continue
		}
		if slices.ContainsFunc(b.Sandbox.AllowWrite, func(bw string) bool { return within(w, bw) }) {
			continue
		}
		ref := "sandbox.allowWrite " + quoteList(b.Sandbox.AllowWrite)
		c.add(c.repo.ElementPath("sandbox.allowWrite", w), fmt.Sprintf("%q is not within the baseline's writable paths", w), ref)
	}
	c.credentials(b, p)
	if len(c.list) == 0 {
		// The entries lie within the baseline's; now what is enforced.
		switch w, err := Widens(fwpolicy.Config(b), FenceConfig(b, p), nil); {
		case err != nil:
			c.add("network", "the two fences could not be compared: "+err.Error(), "")
		case w != nil:
			c.add("network", "the compiled fences differ: "+w.String(), "")
		}
	}
	if len(c.list) == 0 {
		return nil
	}
	slices.SortStableFunc(c.list, func(x, y Violation) int {
		if x.At.Line != y.At.Line {
			return x.At.Line - y.At.Line
		}
		return x.At.Col - y.At.Col
	})
	return &Violations{Baseline: baseName, List: c.list}
}

type checker struct {
	repo *policy.Explanation
	list []Violation
}

func (c *checker) add(at, msg, baseline string) {
	c.list = append(c.list, Violation{At: c.repo.At(at, msg), Baseline: baseline})
}

// within reports whether path p lies within q: the same path, or below q
// when q is a plain directory (no pattern characters).
func within(p, q string) bool {
	if p == q {
		return true
	}
	if strings.ContainsAny(q, "*?[") {
		return false
	}
	if q == "/" {
		return strings.HasPrefix(p, "/")
	}
	return strings.HasPrefix(p, q+"/") && path.Clean(p) == p
}

func isGlob(p string) bool { return strings.ContainsAny(p, "*?[") }

// keeps reports whether the repository's deny r keeps the baseline's deny
// d in the sandbox's mount order: r is d, or a directory above d when both
// are relative to the workspace, with no writable root between them. The
// sandbox's deeper binds win: a "/" or any absolute directory (or one
// under ~) above d is undone by the workspace's bind when the workspace
// lies between, and where the workspace is is known only when devbox run
// starts, which checks the resolved plans again (sandbox.Narrows).
func keeps(d, r string, writable []string) bool {
	if d == r {
		return true
	}
	if anchor(d) != "workspace" || anchor(r) != "workspace" || !within(d, r) {
		return false
	}
	for _, w := range writable {
		if w != r && anchor(w) == "workspace" && within(w, r) && (within(d, w) || d == w) {
			return false
		}
	}
	return true
}

// anchor says what a sandbox path is relative to.
func anchor(p string) string {
	switch {
	case p == "~" || strings.HasPrefix(p, "~/"):
		return "home"
	case strings.HasPrefix(p, "/"):
		return "root"
	}
	return "workspace"
}

// nearest picks the baseline allow entry that an uncovered entry d comes
// closest to, to name it in the error: one that overlaps d (a name both
// match, a prefix both contain), preferring one that matches d's names or
// addresses, ignoring ports.
func nearest(allow []policy.Destination, d policy.Destination) *policy.Destination {
	for i, a := range allow {
		anyPort := a
		anyPort.Port = 0
		if anyPort.Covers(withPort(d, 0)) {
			return &allow[i]
		}
	}
	var best *policy.Destination
	bestScore := -1
	for i, a := range allow {
		if !overlaps(a, d) {
			continue
		}
		score := 0
		if a.Kind == d.Kind {
			score += 2
		}
		if a.Port == d.Port {
			score++
		}
		if score > bestScore {
			best, bestScore = &allow[i], score
		}
	}
	return best
}

func withPort(d policy.Destination, port uint16) policy.Destination {
	d.Port = port
	return d
}

// overlaps reports whether some name or address matches both a and d.
func overlaps(a, d policy.Destination) bool {
	a.Port, d.Port = 0, 0
	if a.Covers(d) || d.Covers(a) {
		return true
	}
	if a.Kind == policy.Prefix && d.Kind == policy.Prefix {
		return a.Prefix.Overlaps(d.Prefix)
	}
	return false
}

// why says how d exceeds the baseline entry a that comes closest.
func why(a, d policy.Destination) string {
	switch {
	case withPort(a, 0).Covers(withPort(d, 0)) && a.Port != 0 && d.Port == 0:
		return fmt.Sprintf("every port, where %q allows port %d only", a.String(), a.Port)
	case withPort(a, 0).Covers(withPort(d, 0)):
		return fmt.Sprintf("port %d, where %q allows port %d only", d.Port, a.String(), a.Port)
	case a.Kind == policy.Prefix && d.Kind == policy.Prefix:
		return fmt.Sprintf("the range %s is wider than %s", d.Prefix, a.Prefix)
	case d.Kind == policy.Wildcard:
		return fmt.Sprintf("the wildcard %q matches names %q does not", d.String(), a.String())
	}
	return fmt.Sprintf("it reaches beyond %q", a.String())
}

func upstreams(us []netip.AddrPort) string {
	if len(us) == 0 {
		return "(the container's resolv.conf)"
	}
	s := make([]string, len(us))
	for i, u := range us {
		s[i] = u.String()
	}
	return strings.Join(s, ", ")
}

func quoteList(l []string) string {
	if len(l) == 0 {
		return "(none: only the workspace and /tmp)"
	}
	q := make([]string, len(l))
	for i, s := range l {
		q[i] = fmt.Sprintf("%q", s)
	}
	return strings.Join(q, ", ")
}
