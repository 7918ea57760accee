// Package review turns the firewall's log of blocked attempts and the DNS
// filter's hit counters into a report — what was denied, which allow
// entries went unused — and a narrow policy change that adds exactly what
// was blocked, each line with its evidence, never beyond a baseline.
package review

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/devbox-dev/devbox/firewall"
	"github.com/devbox-dev/devbox/internal/policy"
)

// Options tune a review.
type Options struct {
	// Since limits the review to events and hits of the last Since (0:
	// everything in the log).
	Since time.Duration
	// Now is the end of the window (default time.Now()).
	Now time.Time
	// Wildcards lets the proposal fold two or more blocked names under one
	// parent domain into "*.parent:port"; by default only exact names are
	// proposed.
	Wildcards bool
	// DefaultPort is proposed for a name only its DNS query was seen for
	// (the client never learnt an address, so never tried a port).
	// Default 443.
	DefaultPort uint16
}

// Group is one kind of denied attempt: to one name (or address, when no
// name is known), port and uid, with how often and when.
type Group struct {
	Name string `json:"name,omitempty"`
	// Dst is the address, for packets with no known name.
	Dst  string `json:"dst,omitempty"`
	Port uint16 `json:"port,omitempty"`
	// UID is the refused process's uid when the log has it ("-" if not).
	UID string `json:"uid"`
	// What is "dns" (refused query), "answer" (address dropped from an
	// allowed name's answer), "tcp"/"udp" (blocked packet) or "gate"
	// (connection the name gate refused).
	What    string    `json:"what"`
	Reasons []string  `json:"reasons"`
	Count   int       `json:"count"`
	First   time.Time `json:"first"`
	Last    time.Time `json:"last"`
}

// Unused is an allow entry no query used in the window.
type Unused struct {
	Entry string `json:"entry"`
	// Measured is false for entries the filter does not count (CIDRs and
	// addresses: their packets never pass the filter) or when there are
	// no hit counters.
	Measured bool      `json:"measured"`
	Address  bool      `json:"address,omitempty"`
	Hits     int64     `json:"hits"`
	Last     time.Time `json:"last,omitzero"`
}

// Addition is one allow entry the review proposes, with its evidence.
type Addition struct {
	Destination policy.Destination `json:"destination"`
	Evidence    string             `json:"evidence"`
}

// Skipped is a denied name the review does not propose, and why.
type Skipped struct {
	What string `json:"what"`
	Why  string `json:"why"`
}

// Report is the review's result.
type Report struct {
	From, To time.Time
	Events   int        `json:"events"`
	Denied   []Group    `json:"denied"`
	Unused   []Unused   `json:"unused"`
	Add      []Addition `json:"add"`
	Skipped  []Skipped  `json:"skipped"`
	// HitsSince is when the hit counters started (zero: none were read).
	HitsSince time.Time `json:"hitsSince,omitzero"`
}

// proposable reasons: the attempt was refused only because no allow entry
// covers it. Denies, invalid names, dropped answers and the gate's
// mismatches are never turned into allow entries.
var proposable = map[string]bool{"not-allowed": true, "dns-not-allowed": true}

// Review builds the report from the log events, the hit counters (nil when
// there are none), the explained repository policy and an optional
// baseline the proposal must stay within.
func Review(events []firewall.Event, hits *firewall.Hits, ex *policy.Explanation, base *policy.Policy, o Options) *Report {
	if o.Now.IsZero() {
		o.Now = time.Now()
	}
	if o.DefaultPort == 0 {
		o.DefaultPort = 443
	}
	r := &Report{To: o.Now.UTC(), Denied: []Group{}, Unused: []Unused{}, Add: []Addition{}, Skipped: []Skipped{}}
	if o.Since > 0 {
		r.From = o.Now.Add(-o.Since).UTC()
	}
	groups := map[string]*Group{}
	for _, e := range events {
		if e.Time.Before(r.From) || e.Time.After(o.Now) {
			continue
		}
		r.Events++
		g := Group{Name: e.Name, Port: e.Port, UID: "-", What: e.Proto}
		if e.UID != nil {
			g.UID = strconv.Itoa(*e.UID)
		}
		switch {
		case e.Proto == "dns" && strings.HasPrefix(e.Reason, "answer-"):
			g.What, g.Dst = "answer", e.Dst
		case e.Proto == "dns":
		case e.Proto == "tls" || e.Proto == "http" || (e.Proto == "tcp" && e.UID != nil):
			g.What = "gate"
		}
		if g.Name == "" {
			g.Dst = e.Dst
		}
		key := strings.Join([]string{g.Name, g.Dst, strconv.Itoa(int(g.Port)), g.UID, g.What}, "\x00")
		have := groups[key]
		if have == nil {
			g.First, g.Last = e.Time, e.Time
			groups[key] = &g
			have = &g
		}
		have.Count++
		if !slices.Contains(have.Reasons, e.Reason) {
			have.Reasons = append(have.Reasons, e.Reason)
			slices.Sort(have.Reasons)
		}
		if e.Time.Before(have.First) {
			have.First = e.Time
		}
		if e.Time.After(have.Last) {
			have.Last = e.Time
		}
	}
	for _, g := range groups {
		r.Denied = append(r.Denied, *g)
	}
	slices.SortFunc(r.Denied, func(a, b Group) int {
		return cmp.Or(cmp.Compare(b.Count, a.Count), cmp.Compare(a.Name, b.Name), cmp.Compare(a.Dst, b.Dst),
			cmp.Compare(a.Port, b.Port), cmp.Compare(a.UID, b.UID), cmp.Compare(a.What, b.What))
	})
	r.unused(hits, ex)
	r.propose(ex, base, o)
	return r
}

func (r *Report) unused(hits *firewall.Hits, ex *policy.Explanation) {
	counted := map[string]firewall.EntryHits{}
	if hits != nil {
		r.HitsSince = hits.Since
		for _, e := range hits.Entries {
			counted[e.Entry] = e
		}
	}
	for _, a := range ex.Allowed {
		d := a.Destination
		if d.Kind == policy.Prefix {
			r.Unused = append(r.Unused, Unused{Entry: d.String(), Address: true})
			continue
		}
		h, ok := counted[d.String()]
		switch {
		case !ok:
			r.Unused = append(r.Unused, Unused{Entry: d.String()})
		case h.Hits == 0 || h.Last.Before(r.From):
			r.Unused = append(r.Unused, Unused{Entry: d.String(), Measured: true, Hits: h.Hits, Last: h.Last})
		}
	}
}

// candidate is a proposed entry and the groups behind it.
type candidate struct {
	dest   policy.Destination
	groups []Group
	note   string
}

func (r *Report) propose(ex *policy.Explanation, base *policy.Policy, o Options) {
	p := ex.Policy
	byName := map[string][]Group{}
	var names []string
	for _, g := range r.Denied {
		switch {
		case g.Name == "" && g.What != "dns" && g.What != "answer":
			if slices.ContainsFunc(g.Reasons, func(s string) bool { return proposable[s] }) {
				r.skip(fmt.Sprintf("%s port %d", g.Dst, g.Port), "no name is known for the address: an address is never proposed (add it by hand if you mean it)")
			}
			continue
		case g.Name == "":
			continue
		}
		if _, ok := byName[g.Name]; !ok {
			names = append(names, g.Name)
		}
		byName[g.Name] = append(byName[g.Name], g)
	}
	slices.Sort(names)
	var cands []candidate
	for _, n := range names {
		gs := byName[n]
		if why := refusal(gs); why != "" {
			r.skip(n, why)
			continue
		}
		if _, err := policy.ParseDestination(n); err != nil {
			r.skip(n, "not a host name a policy can list")
			continue
		}
		ports := map[uint16]bool{}
		for _, g := range gs {
			if g.Port != 0 && g.What != "answer" && slices.ContainsFunc(g.Reasons, func(s string) bool { return proposable[s] }) {
				ports[g.Port] = true
			}
		}
		note := ""
		if len(ports) == 0 {
			ports[o.DefaultPort] = true
			note = fmt.Sprintf("port %d assumed: only DNS queries were seen", o.DefaultPort)
		}
		for _, port := range slices.Sorted(mapsKeys(ports)) {
			d, _ := policy.ParseDestination(n + ":" + strconv.Itoa(int(port)))
			cands = append(cands, candidate{dest: d, groups: gs, note: note})
		}
	}
	if o.Wildcards {
		cands = foldWildcards(cands)
	}
	for _, c := range cands {
		switch {
		case slices.ContainsFunc(p.Network.Allow, func(a policy.Destination) bool { return a.Covers(c.dest) }):
			r.skip(c.dest.String(), "already allowed: the attempts predate the current policy")
			continue
		case slices.ContainsFunc(p.Network.Deny, func(d policy.Destination) bool { return overlapsName(d, c.dest) }):
			r.skip(c.dest.String(), "the policy denies it: a deny is only lifted by hand")
			continue
		case base != nil && !slices.ContainsFunc(base.Network.Allow, func(a policy.Destination) bool { return a.Covers(c.dest) }):
			r.skip(c.dest.String(), "outside the baseline: a repository can only narrow it")
			continue
		case base != nil && slices.ContainsFunc(base.Network.Deny, func(d policy.Destination) bool { return overlapsName(d, c.dest) }):
			r.skip(c.dest.String(), "the baseline denies it")
			continue
		}
		r.Add = append(r.Add, Addition{Destination: c.dest, Evidence: evidence(c)})
	}
}

func mapsKeys(m map[uint16]bool) func(func(uint16) bool) {
	return func(yield func(uint16) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// refusal says why a name's attempts are not proposed ("" to propose).
func refusal(gs []Group) string {
	for _, g := range gs {
		for _, s := range g.Reasons {
			switch {
			case s == "dns-denied" || s == "denied" || s == "dns-denied-cname":
				return "the policy denies it: a deny is only lifted by hand"
			case g.What == "gate" && !proposable[s]:
				return "the name gate refused it (" + s + "): the connection did not match its name, which no allow entry fixes"
			case strings.HasPrefix(s, "answer-"):
				return "its answers pointed at " + strings.TrimPrefix(s, "answer-") + " addresses, which are never allowed"
			case s == "dns-invalid-name":
				return "not a valid host name"
			}
		}
	}
	return ""
}

// overlapsName reports whether deny d refuses some connection allow a would
// allow (for the proposal: a deny always wins, so proposing under it is
// pointless).
func overlapsName(d, a policy.Destination) bool {
	if d.Port != 0 && a.Port != 0 && d.Port != a.Port {
		return false
	}
	dd, aa := d, a
	dd.Port, aa.Port = 0, 0
	return dd.Covers(aa) || aa.Covers(dd)
}

// foldWildcards replaces two or more exact names under one parent domain
// (at least two labels) with the same port by "*.parent:port".
func foldWildcards(cands []candidate) []candidate {
	type key struct {
		parent string
		port   uint16
	}
	byParent := map[key][]int{}
	for i, c := range cands {
		if _, parent, ok := strings.Cut(c.dest.Name, "."); ok && strings.Contains(parent, ".") {
			k := key{parent, c.dest.Port}
			byParent[k] = append(byParent[k], i)
		}
	}
	folded := map[int]bool{}
	var out []candidate
	keys := slices.SortedFunc(func(yield func(key) bool) {
		for k := range byParent {
			if !yield(k) {
				return
			}
		}
	}, func(a, b key) int { return cmp.Or(cmp.Compare(a.parent, b.parent), cmp.Compare(a.port, b.port)) })
	for _, k := range keys {
		idx := byParent[k]
		if len(idx) < 2 {
			continue
		}
		w, err := policy.ParseDestination("*." + k.parent + ":" + strconv.Itoa(int(k.port)))
		if err != nil {
			continue
		}
		c := candidate{dest: w}
		for _, i := range idx {
			folded[i] = true
			c.groups = append(c.groups, cands[i].groups...)
			if cands[i].note != "" {
				c.note = cands[i].note
			}
		}
		out = append(out, c)
	}
	for i, c := range cands {
		if !folded[i] {
			out = append(out, c)
		}
	}
	return out
}

// evidence summarizes a candidate's groups for its comment: counts by
// kind, uids, and the first and last time.
func evidence(c candidate) string {
	var dns, pkts int
	var uids, names []string
	var first, last time.Time
	for _, g := range c.groups {
		if g.What == "dns" {
			dns += g.Count
		} else {
			pkts += g.Count
		}
		if g.UID != "-" && !slices.Contains(uids, g.UID) {
			uids = append(uids, g.UID)
		}
		if !slices.Contains(names, g.Name) {
			names = append(names, g.Name)
		}
		if first.IsZero() || g.First.Before(first) {
			first = g.First
		}
		if g.Last.After(last) {
			last = g.Last
		}
	}
	var parts []string
	if dns > 0 {
		parts = append(parts, plural(dns, "refused query", "refused queries"))
	}
	if pkts > 0 {
		parts = append(parts, plural(pkts, "blocked connection", "blocked connections"))
	}
	s := "review: " + strings.Join(parts, ", ")
	if c.dest.Kind == policy.Wildcard {
		slices.Sort(names)
		s += " for " + strings.Join(names, ", ")
	}
	if len(uids) > 0 {
		slices.Sort(uids)
		s += " from uid " + strings.Join(uids, ", ")
	}
	s += ", " + first.UTC().Format(time.RFC3339) + " to " + last.UTC().Format(time.RFC3339)
	if c.note != "" {
		s += "; " + c.note
	}
	return s
}

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.Itoa(n) + " " + many
}

func (r *Report) skip(what, why string) {
	r.Skipped = append(r.Skipped, Skipped{What: what, Why: why})
}

// WriteText prints the report for people; diff is the proposed change to
// the policy file (empty when nothing is proposed).
func (r *Report) WriteText(w io.Writer, diff string) error {
	var b strings.Builder
	from := "the start of the log"
	if !r.From.IsZero() {
		from = r.From.Format(time.RFC3339)
	}
	fmt.Fprintf(&b, "Review of %s to %s: %d logged events\n", from, r.To.Format(time.RFC3339), r.Events)
	fmt.Fprintf(&b, "\nDenied attempts (by name or address, port, uid):\n")
	if len(r.Denied) == 0 {
		fmt.Fprintf(&b, "  none\n")
	}
	for _, g := range r.Denied {
		target := g.Name
		if target == "" {
			target = g.Dst
		} else if g.Dst != "" {
			target += " → " + g.Dst
		}
		port := "-"
		if g.Port != 0 {
			port = strconv.Itoa(int(g.Port))
		}
		fmt.Fprintf(&b, "  %5d× %-6s %-32s port %-5s uid %-5s %s  first %s  last %s\n", g.Count, g.What, target, port, g.UID,
			strings.Join(g.Reasons, ","), g.First.UTC().Format(time.RFC3339), g.Last.UTC().Format(time.RFC3339))
	}
	fmt.Fprintf(&b, "\nAllowed entries not used in the window:\n")
	if r.HitsSince.IsZero() {
		fmt.Fprintf(&b, "  (no hit counters were read: names cannot be measured)\n")
	} else {
		fmt.Fprintf(&b, "  (hit counters since %s)\n", r.HitsSince.UTC().Format(time.RFC3339))
	}
	n := 0
	for _, u := range r.Unused {
		switch {
		case u.Measured && u.Hits == 0:
			fmt.Fprintf(&b, "  %-40s never queried\n", u.Entry)
		case u.Measured:
			fmt.Fprintf(&b, "  %-40s last queried %s, before the window\n", u.Entry, u.Last.UTC().Format(time.RFC3339))
		case u.Address:
			fmt.Fprintf(&b, "  %-40s not measured (addresses are not counted)\n", u.Entry)
		default:
			fmt.Fprintf(&b, "  %-40s not measured\n", u.Entry)
		}
		n++
	}
	if n == 0 {
		fmt.Fprintf(&b, "  none\n")
	}
	fmt.Fprintf(&b, "\nProposed change (exact names and ports; `devbox policy review --apply` writes it):\n")
	if diff == "" {
		fmt.Fprintf(&b, "  nothing to add\n")
	} else {
		b.WriteString(diff)
	}
	if len(r.Skipped) > 0 {
		fmt.Fprintf(&b, "\nNot proposed:\n")
		for _, s := range r.Skipped {
			fmt.Fprintf(&b, "  %s: %s\n", s.What, s.Why)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}
