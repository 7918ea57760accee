package sandbox

import (
	"fmt"
	"sort"
)

// Access is what a sandboxed command may do at a path.
type Access int

const (
	// Hidden: the path reads as empty (a tmpfs, or /dev/null).
	Hidden Access = iota
	// Readable: readable, not writable.
	Readable
	// Writable: readable and writable.
	Writable
)

func (a Access) String() string {
	return [...]string{"hidden", "read-only", "writable"}[a]
}

// Access says what the plan lets a command do at the real path p: the
// last of its mounts at or above p decides, as bwrap applies them in
// order (shallower first, so the most specific wins); with none, the
// read-only root does.
func (s Spec) Access(p string) Access {
	a := Readable
	for _, m := range s.Mounts {
		if !under(p, m.Path) {
			continue
		}
		switch m.Op {
		case Bind:
			a = Writable
		case ReadOnly:
			a = Readable
		case HideDir, HideFile:
			a = Hidden
		}
	}
	return a
}

// Narrows reports where s gives a command more than ceiling does (nil when
// nowhere): a path writable in s but not in ceiling, or visible in s but
// hidden in ceiling. Both plans are resolved (real paths, symbolic links
// followed, globs expanded), so this compares what bwrap will enforce, not
// what the policies say. Access changes only at mount points, so every
// mount path of either plan and a new name below each decide it for every
// path.
func Narrows(s, ceiling Spec) error {
	var probes []string
	for _, ms := range [][]Mount{s.Mounts, ceiling.Mounts} {
		for _, m := range ms {
			probes = append(probes, m.Path, m.Path+"/.devbox-probe")
		}
	}
	sort.Strings(probes)
	for _, p := range probes {
		got, max := s.Access(p), ceiling.Access(p)
		if got == Writable && max != Writable || got != Hidden && max == Hidden {
			return fmt.Errorf("sandbox: %s would be %s, where the baseline's sandbox makes it %s", p, got, max)
		}
	}
	return nil
}
