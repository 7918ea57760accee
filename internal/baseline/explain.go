package baseline

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/devbox-dev/devbox/internal/policy"
)

// Layered is the effective policy of a repository on a team image —
// baseline ∩ repository — with where each entry comes from, for
// `devbox policy explain --baseline`.
type Layered struct {
	Baseline string `json:"baseline"`
	Repo     string `json:"repo"`
	// Allowed is every destination the fence allows: the repository's
	// entries (each within a baseline entry).
	Allowed []LayeredAllow `json:"allowed"`
	// Denied is every denied destination, from the baseline, the
	// repository or both.
	Denied []LayeredDeny `json:"denied"`
	// Unused are baseline allow entries no repository entry lies within:
	// the repository narrowed them away.
	Unused []policy.Destination `json:"narrowedAway"`
	// ClaudeCode is the pinned version (the baseline's).
	ClaudeCode string `json:"claudeCode"`
	// Violations are the repository's widenings; when there are any, the
	// entrypoint does not fence with this policy and egress stays denied.
	Violations []string `json:"violations"`
}

// LayeredAllow is one allowed destination: From says where in the
// repository file it is written ("network.allow[0] (7:7)"), Within the
// baseline entry it lies within ("" when none: a violation).
type LayeredAllow struct {
	Destination policy.Destination `json:"destination"`
	From        []string           `json:"from"`
	Within      string             `json:"within"`
}

// LayeredDeny is one denied destination and who denies it ("baseline",
// "repo").
type LayeredDeny struct {
	Destination policy.Destination `json:"destination"`
	From        []string           `json:"from"`
}

// Explain layers the explained repository policy on base.
func Explain(base *policy.Policy, baseName string, repo *policy.Explanation) *Layered {
	l := &Layered{Baseline: baseName, Repo: repo.File, ClaudeCode: base.Agent.ClaudeCode,
		Allowed: []LayeredAllow{}, Denied: []LayeredDeny{}, Unused: []policy.Destination{}, Violations: []string{}}
	used := make([]bool, len(base.Network.Allow))
	for _, a := range repo.Allowed {
		e := LayeredAllow{Destination: a.Destination, From: []string{}}
		for i, at := range a.At {
			pos := repo.At(at, "")
			e.From = append(e.From, fmt.Sprintf("%s %s (%d:%d)", a.From[i], at, pos.Line, pos.Col))
		}
		if i := slices.IndexFunc(base.Network.Allow, func(b policy.Destination) bool { return b.Covers(a.Destination) }); i >= 0 {
			e.Within = base.Network.Allow[i].String()
			used[i] = true
		}
		l.Allowed = append(l.Allowed, e)
	}
	for i, b := range base.Network.Allow {
		if !used[i] {
			l.Unused = append(l.Unused, b)
		}
	}
	for _, d := range base.Network.Deny {
		l.Denied = append(l.Denied, LayeredDeny{Destination: d, From: []string{"baseline"}})
	}
	for _, d := range repo.Policy.Network.Deny {
		if i := slices.IndexFunc(l.Denied, func(x LayeredDeny) bool { return x.Destination == d }); i >= 0 {
			l.Denied[i].From = append(l.Denied[i].From, "repo")
			continue
		}
		l.Denied = append(l.Denied, LayeredDeny{Destination: d, From: []string{"repo"}})
	}
	var vs *Violations
	if err := Check(base, baseName, repo); errors.As(err, &vs) {
		for _, v := range vs.List {
			l.Violations = append(l.Violations, v.Error())
		}
	}
	return l
}

// WriteText prints the layered policy for people.
func (l *Layered) WriteText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "Effective policy: baseline %s ∩ repository %s\n", l.Baseline, l.Repo)
	if len(l.Violations) > 0 {
		fmt.Fprintf(&b, "\nTHE REPOSITORY WIDENS THE BASELINE: the entrypoint will not fence with it, egress stays denied.\n")
		for _, v := range l.Violations {
			fmt.Fprintf(&b, "  %s\n", v)
		}
	}
	fmt.Fprintf(&b, "\nClaude Code: %s (pinned by the baseline)\n", l.ClaudeCode)
	fmt.Fprintf(&b, "\nAllowed (everything else is refused):\n")
	if len(l.Allowed) == 0 {
		fmt.Fprintf(&b, "  NO NETWORK\n")
	}
	for _, a := range l.Allowed {
		within := "within baseline " + a.Within
		if a.Within == "" {
			within = "NOT WITHIN THE BASELINE"
		}
		fmt.Fprintf(&b, "  %-36s %s; repo %s\n", a.Destination, within, strings.Join(a.From, ", "))
	}
	fmt.Fprintf(&b, "\nDenied (wins over allow):\n")
	for _, d := range l.Denied {
		fmt.Fprintf(&b, "  %-36s %s\n", d.Destination, strings.Join(d.From, " + "))
	}
	if len(l.Unused) > 0 {
		fmt.Fprintf(&b, "\nBaseline allow entries the repository narrowed away:\n")
		for _, d := range l.Unused {
			fmt.Fprintf(&b, "  %s\n", d)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}
