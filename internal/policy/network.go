package policy

import (
	"net/netip"
	"slices"
)

// AllowsName reports whether the DNS filter may answer name: some Host or
// Wildcard allow entry matches it (on any port) and no Host or Wildcard
// deny entry without a port matches it. A deny entry with a port only closes
// that port (see NamePorts and DeniedPorts). name may end with a dot and be
// in any case; a name that is not a valid host name is never allowed.
func (n Network) AllowsName(name string) bool {
	c, ok := canonicalQueryName(name)
	if !ok {
		return false
	}
	return n.allowsCanonical(c)
}

func (n Network) allowsCanonical(c string) bool {
	for _, d := range n.Deny {
		if d.Port == 0 && d.matchCanonical(c) {
			return false
		}
	}
	for _, a := range n.Allow {
		if a.matchCanonical(c) {
			return true
		}
	}
	return false
}

// NamePorts says which destination ports the addresses learned for name
// (from the DNS filter's answers) may be reached on. any is true when some
// matching allow entry has no port; then ports is nil and the firewall must
// still refuse DeniedPorts(name). Otherwise ports is the sorted set of
// allowed ports with the denied ones already taken out. A name AllowsName
// refuses gets (nil, false).
func (n Network) NamePorts(name string) (ports []uint16, any bool) {
	c, ok := canonicalQueryName(name)
	if !ok || !n.allowsCanonical(c) {
		return nil, false
	}
	denied := n.deniedPorts(c)
	for _, a := range n.Allow {
		if !a.matchCanonical(c) {
			continue
		}
		if a.Port == 0 {
			any = true
			continue
		}
		if !slices.Contains(denied, a.Port) && !slices.Contains(ports, a.Port) {
			ports = append(ports, a.Port)
		}
	}
	if any {
		return nil, true
	}
	slices.Sort(ports)
	return ports, false
}

// DeniedPorts returns the sorted ports that deny entries with a port close
// for name ("x.test:22" denies port 22 of x.test and leaves the others).
func (n Network) DeniedPorts(name string) []uint16 {
	c, ok := canonicalQueryName(name)
	if !ok {
		return nil
	}
	return n.deniedPorts(c)
}

func (n Network) deniedPorts(c string) []uint16 {
	var out []uint16
	for _, d := range n.Deny {
		if d.Port != 0 && d.matchCanonical(c) && !slices.Contains(out, d.Port) {
			out = append(out, d.Port)
		}
	}
	slices.Sort(out)
	return out
}

// DeniesAddr reports whether a deny entry without a port covers addr. The
// DNS filter drops such addresses from answers (the resolved-address
// check), and the firewall rejects them outright.
func (n Network) DeniesAddr(addr netip.Addr) bool {
	addr = addr.Unmap()
	for _, d := range n.Deny {
		if d.Kind == Prefix && d.Port == 0 && d.Prefix.Contains(addr) {
			return true
		}
	}
	return false
}

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
