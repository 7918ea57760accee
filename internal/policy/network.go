package policy

import "slices"

// NoNetwork reports whether the policy allows no egress at all: an empty
// allow list (after presets and denies) means no network, never "anything".
func (n Network) NoNetwork() bool { return len(n.Allow) == 0 }

// Removal is an allow entry dropped because a deny entry covers it.
type Removal struct {
	Allow Destination `json:"allow"`
	Deny  Destination `json:"deniedBy"`
}

// resolveNetwork expands presets, folds duplicates, removes allow entries a
// deny covers and sorts everything. It returns the removals for Explain.
func resolveNetwork(n *Network) []Removal {
	n.Presets = sortFold(n.Presets)
	allow := slices.Clone(n.Allow)
	for _, name := range n.Presets {
		allow = append(allow, presets[name]...)
	}
	n.Deny = foldDestinations(n.Deny)
	allow = foldDestinations(allow)
	removed := []Removal{}
	kept := allow[:0]
	for _, a := range allow {
		if i := slices.IndexFunc(n.Deny, func(d Destination) bool { return d.covers(a) }); i >= 0 {
			removed = append(removed, Removal{Allow: a, Deny: n.Deny[i]})
			continue
		}
		kept = append(kept, a)
	}
	n.Allow = kept
	return removed
}

func foldDestinations(ds []Destination) []Destination {
	out := slices.Clone(ds)
	if out == nil {
		out = []Destination{}
	}
	slices.SortFunc(out, Destination.compare)
	return slices.Compact(out)
}

func sortFold(s []string) []string {
	out := slices.Clone(s)
	if out == nil {
		out = []string{}
	}
	slices.Sort(out)
	return slices.Compact(out)
}
