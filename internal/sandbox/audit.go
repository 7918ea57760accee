package sandbox

import (
	"errors"
	"fmt"
	"path"
	"path/filepath"
	"time"

	"github.com/devbox-dev/devbox/internal/gitaudit"
)

// RunStateDir is where `devbox run` keeps the state of its last completed
// audit of each workspace, relative to the home directory. It is on the
// mandatory write-deny list (MandatoryHomeDenyWrite): no sandboxed command
// can rewrite the baseline it will be compared with.
const RunStateDir = ".local/state/devbox/run"

// Audit is devbox run's end-of-run audit: gitaudit's model of what in a
// tree can run later (every git directory and what in it is not pure
// data, config entries off the allow-list, hooks, sequencer state, and the
// run-later names of other tools), compared with the state of the last
// audit that completed for this workspace. The state advances only when
// an audit completes (Finish): a run that is killed, or whose devbox is
// killed, leaves the next run reporting everything since the last
// completed audit. No mount can cover a directory that did not exist when
// the sandbox started (a `git clone`, a new sub-project); the audit does.
type Audit struct {
	ws    string
	home  string
	watch Watched
	path  string
	state *gitaudit.State
	// Baseline is true when no audit had completed for the workspace:
	// BeginAudit recorded the tree as it is as the first state.
	Baseline bool
}

// BeginAudit loads the state of the last completed audit of ws from
// home's RunStateDir; when there is none, it scans ws and records it as
// the first state (so that even the first run, killed, is caught next
// time). watch are the places outside ws to audit too: what of the
// agent's PATH, the home's run-later places and the global git config's
// includes the sandbox leaves writable (WatchedBy).
func BeginAudit(ws, home string, watch Watched) (*Audit, error) {
	if real, err := filepath.EvalSymlinks(ws); err == nil {
		ws = real // the state is keyed by the path the scan reports
	}
	// The audit reads config with git: find out before the command runs.
	cr, err := gitaudit.NewConfigReader("")
	if err != nil {
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	cr.Close()
	a := &Audit{ws: ws, home: home, watch: watch, path: gitaudit.StatePath(filepath.Join(home, RunStateDir), ws)}
	st, err := gitaudit.LoadState(a.path)
	switch {
	case err == nil && st.Root == ws:
		a.state = st
		return a, nil
	case err != nil && !errors.Is(err, gitaudit.ErrNoState):
		return nil, fmt.Errorf("sandbox: audit state: %w", err)
	}
	r, err := gitaudit.ScanWith(ws, a.options())
	if err != nil {
		return nil, fmt.Errorf("sandbox: audit of %s: %w", ws, err)
	}
	a.state, a.Baseline = r.State(time.Now()), true
	if err := a.state.Save(a.path); err != nil {
		return nil, fmt.Errorf("sandbox: audit state: %w", err)
	}
	return a, nil
}

// AcceptPlaceholders records, in the state this run is compared with, the
// empty placeholders devbox itself made for the run (Prepare's paths) and
// the .git directory made to hold one: a run started in a new
// sub-directory makes new ones (its .git/hooks, .bashrc, ...), which the
// command did not write. Only the placeholders themselves are accepted,
// as scanned now (an empty file, an empty directory has no finding):
// nothing the command, or a killed run, could have put there. The first
// run has nothing to do (BeginAudit scanned after Prepare); otherwise this
// scan is the cost, paid only when something was made.
func (a *Audit) AcceptPlaceholders(created []string) error {
	if a.Baseline || len(created) == 0 {
		return nil
	}
	ours := map[string]bool{}
	for _, c := range created {
		rel, err := filepath.Rel(a.ws, c)
		if err != nil {
			continue
		}
		rel = filepath.ToSlash(rel)
		ours[string(gitaudit.RunLater)+" "+rel] = true
		if d := path.Dir(rel); path.Base(d) == ".git" {
			ours[string(gitaudit.GitDir)+" "+d] = true
		}
	}
	r, err := gitaudit.ScanWith(a.ws, a.options())
	if err != nil {
		return fmt.Errorf("sandbox: audit of %s: %w", a.ws, err)
	}
	for _, f := range r.Findings {
		if _, known := a.state.Entries[f.ID()]; ours[f.ID()] && !known {
			a.state.Entries[f.ID()] = f.Digest
		}
	}
	if err := a.state.Save(a.path); err != nil {
		return fmt.Errorf("sandbox: audit state: %w", err)
	}
	return nil
}

// Finish scans the workspace, compares it with the last completed audit's
// state, and records the scan as the new state: this audit is complete,
// its report is the caller's to print.
func (a *Audit) Finish() (*gitaudit.Diff, error) {
	r, err := gitaudit.ScanWith(a.ws, a.options())
	if err != nil {
		return nil, fmt.Errorf("sandbox: audit of %s: %w", a.ws, err)
	}
	d := gitaudit.Compare(a.state, r)
	if err := r.State(time.Now()).Save(a.path); err != nil {
		return d, fmt.Errorf("sandbox: audit state: %w", err)
	}
	return d, nil
}

// Since is when the state the audit compares with was recorded.
func (a *Audit) Since() time.Time { return a.state.Accepted }

// CanWrite reports whether a sandboxed command of spec could write path,
// resolved through links as bwrap will find it (Access decides).
// `devbox run` refuses a policy file it could write.
func (s Spec) CanWrite(path string) bool {
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	if real, err := filepath.EvalSymlinks(path); err == nil {
		path = real
	}
	return s.Access(path) == Writable
}

func (a *Audit) options() gitaudit.Options {
	o := gitaudit.Options{RunLater: true, Home: a.home, Watch: a.watch.Paths, Sites: a.watch.Sites, GitConfigs: a.watch.GitConfigs}
	if a.state != nil {
		o.Cache = a.state.Cache
	}
	return o
}

// WritablePath returns the directories of a PATH list that a sandboxed
// command of spec could write: a program planted there runs the next time
// a shell looks it up, outside the sandbox.
func WritablePath(spec Spec, pathList string) []string {
	var out []string
	seen := map[string]bool{}
	for _, d := range filepath.SplitList(pathList) {
		if !filepath.IsAbs(d) || seen[d] {
			continue
		}
		seen[d] = true
		if spec.CanWrite(d) {
			out = append(out, d)
		}
	}
	return out
}
