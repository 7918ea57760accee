package gitaudit

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/devbox-dev/devbox/internal/atomicfile"
)

// State is what the user accepted for one workspace: every finding's ID
// and digest. It lives outside the workspace (StateDir), where code in the
// dev container cannot write.
type State struct {
	Root     string            `json:"root"`
	Accepted time.Time         `json:"accepted"`
	Entries  map[string]string `json:"entries"` // Finding.ID() → Digest
	// Cache is the scan's digest cache (Result.Cache), for the next scan.
	Cache map[string]string `json:"cache,omitempty"`
}

// ErrNoState says no state was ever accepted for a workspace.
var ErrNoState = errors.New("no accepted state")

// StateDir is where accepted states live: $XDG_STATE_HOME/devbox/audit,
// or ~/.local/state/devbox/audit.
func StateDir() (string, error) {
	if d := os.Getenv("XDG_STATE_HOME"); filepath.IsAbs(d) {
		return filepath.Join(d, "devbox", "audit"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("finding the state directory: %w", err)
	}
	return filepath.Join(home, ".local", "state", "devbox", "audit"), nil
}

// StatePath is the file of root's state in dir, keyed by root's absolute
// path.
func StatePath(dir, root string) string {
	sum := sha256.Sum256([]byte(root))
	return filepath.Join(dir, hex.EncodeToString(sum[:12])+".json")
}

// LoadState reads a state; ErrNoState when there is none.
func LoadState(path string) (*State, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, ErrNoState
	}
	if err != nil {
		return nil, err
	}
	var st State
	if err := json.Unmarshal(data, &st); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if st.Entries == nil {
		st.Entries = map[string]string{}
	}
	return &st, nil
}

// Save writes the state, creating its directory (private to the user).
func (st *State) Save(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	data, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(path, append(data, '\n'), 0o600)
}

// State is the result as a state to accept.
func (r *Result) State(now time.Time) *State {
	st := &State{Root: r.Root, Accepted: now.UTC(), Entries: map[string]string{}, Cache: r.Cache}
	for _, f := range r.Findings {
		st.Entries[f.ID()] = f.Digest
	}
	return st
}

// Status says how a finding compares with the accepted state.
type Status string

const (
	New     Status = "new"
	Changed Status = "changed"
)

// Change is a finding that is not in the accepted state.
type Change struct {
	Status Status `json:"status"`
	Finding
}

// Diff is the comparison of a scan with the accepted state.
type Diff struct {
	Root string `json:"root"`
	// Changes are the findings that are new or changed: each one makes
	// the audit fail.
	Changes []Change `json:"changes"`
	// Removed are accepted IDs no longer found (nothing to review).
	Removed []string `json:"removed,omitempty"`
	// NoState is true when nothing was ever accepted: every finding is new.
	NoState bool `json:"noState,omitempty"`
}

// OK reports whether the scan matches the accepted state.
func (d *Diff) OK() bool { return len(d.Changes) == 0 }

// Compare compares r with the accepted state st (nil: none accepted).
func Compare(st *State, r *Result) *Diff {
	d := &Diff{Root: r.Root, NoState: st == nil}
	seen := map[string]bool{}
	for _, f := range r.Findings {
		id := f.ID()
		seen[id] = true
		var old string
		var ok bool
		if st != nil {
			old, ok = st.Entries[id]
		}
		switch {
		case !ok:
			d.Changes = append(d.Changes, Change{Status: New, Finding: f})
		case old != f.Digest:
			d.Changes = append(d.Changes, Change{Status: Changed, Finding: f})
		}
	}
	if st != nil {
		for id := range st.Entries {
			if !seen[id] {
				d.Removed = append(d.Removed, id)
			}
		}
		sort.Strings(d.Removed)
	}
	return d
}

// Audit scans root and compares it with the state accepted for it in
// stateDir ("" means StateDir()). It returns the scan, the comparison
// and the state file's path.
func Audit(root, stateDir string) (*Result, *Diff, string, error) {
	if stateDir == "" {
		d, err := StateDir()
		if err != nil {
			return nil, nil, "", err
		}
		stateDir = d
	}
	r, err := Scan(root)
	if err != nil {
		return nil, nil, "", err
	}
	path := StatePath(stateDir, r.Root)
	st, err := LoadState(path)
	if errors.Is(err, ErrNoState) {
		st = nil
	} else if err != nil {
		return nil, nil, "", err
	}
	return r, Compare(st, r), path, nil
}

// Baseline records root's current state when none was ever accepted, and
// reports whether it did. `devbox init` calls it: the first state is the
// one the user had when setting devbox up, before any container ran.
func Baseline(root, stateDir string, now time.Time) (*Diff, string, bool, error) {
	r, d, path, err := Audit(root, stateDir)
	if err != nil || !d.NoState {
		return d, path, false, err
	}
	if err := r.State(now).Save(path); err != nil {
		return d, path, false, err
	}
	return d, path, true, nil
}
