package sandbox

import (
	"errors"
	"fmt"
	"iter"
	"maps"
	"path"
	"slices"
	"sort"
	"strings"
)

// Config is what one sandboxed run is made from: the policy's sandbox lists
// as written (paths not yet expanded) and the run's own settings.
type Config struct {
	// Home is the user's home directory; "~" in the lists expands to it.
	Home string
	// Workspace is the writable project directory; relative paths in the
	// lists are relative to it.
	Workspace string
	// Dir is the command's working directory ("" means Workspace).
	Dir string
	// AllowWrite are writable paths besides Workspace and /tmp.
	AllowWrite []string
	// Caches are writable like AllowWrite when they exist, and left out
	// without a note when they do not: the toolchain caches of whatever
	// base the image has (ToolchainCaches).
	Caches []string
	// DenyRead are hidden paths. Entries may be globs (*, ?, [..], and a
	// "**" component for any depth of directories).
	DenyRead []string
	// DenyWrite are read-only paths on top of the mandatory lists; globs as
	// for DenyRead.
	DenyWrite []string
	// NoNetwork gives the command a network namespace with only loopback.
	NoNetwork bool
	// Weaker drops the new /proc and bwrap's --disable-userns, which an
	// unprivileged container cannot give (see Probe). The PID namespace
	// stays, and the seccomp filter still refuses nested user namespaces.
	Weaker bool
	// NewSession puts the command in a new session, so it cannot push input
	// into the terminal (TIOCSTI). Run sets it unless told otherwise.
	NewSession bool
	// Command is the program and its arguments.
	Command []string
}

// Op is one bwrap filesystem operation.
type Op int

const (
	// Bind makes Path writable (--bind Path Path).
	Bind Op = iota + 1
	// ReadOnly makes Path read-only (--ro-bind Path Path).
	ReadOnly
	// HideDir puts an empty read-only tmpfs over the directory Path.
	HideDir
	// HideFile puts /dev/null over the file Path.
	HideFile
)

// Mount is one filesystem operation of the plan, on a path with no symlink.
type Mount struct {
	Op   Op
	Path string
	// Placeholder is File or Dir when Path does not exist and must be created
	// (empty) before bwrap starts, so that the read-only bind over it makes
	// creating it from inside impossible. Missing otherwise.
	Placeholder Kind
}

// Spec is a resolved sandbox: everything Args needs, with no filesystem
// access left to do except creating placeholders (Prepare).
type Spec struct {
	// Mounts are applied in order, after the read-only root, /dev and /proc.
	Mounts []Mount
	// Dir is the command's working directory inside the sandbox.
	Dir        string
	NoNetwork  bool
	NewSession bool
	// Proc mounts a new /proc for the new PID namespace; DisableUserns
	// forbids further user namespaces inside. Both are off in the weaker mode.
	Proc          bool
	DisableUserns bool
	// StatusFD is the descriptor bwrap writes its JSON status to (0: none).
	StatusFD int
	// SeccompFD is the descriptor bwrap reads devbox's seccomp filter
	// from (0: none; see SeccompFilter).
	SeccompFD int
	Command   []string
	// Notes say what the plan left out and why (e.g. a missing allowWrite
	// path); `devbox run --explain` prints them.
	Notes []string
}

// ErrReplaceableLink is returned by Plan when a protected path goes through
// a symbolic link that a sandboxed command could replace.
var ErrReplaceableLink = errors.New("protected path goes through a replaceable symbolic link")

// Plan resolves cfg against fsys: it expands ~, relative paths and globs,
// follows symlinks so that every mount lands where a read or write would
// really go, and orders the mounts so that the most specific path wins.
func Plan(cfg Config, fsys FS) (Spec, error) {
	if len(cfg.Command) == 0 {
		return Spec{}, errors.New("sandbox: no command to run")
	}
	for name, p := range map[string]string{"home": cfg.Home, "workspace": cfg.Workspace} {
		if !path.IsAbs(p) {
			return Spec{}, fmt.Errorf("sandbox: %s %q is not an absolute path", name, p)
		}
	}
	if kl, ok := fsys.(kindLister); ok {
		// The default denies (**/.env, **/.env.*) walk the same tree twice.
		fsys = &listCache{FS: fsys, kl: kl, dirs: map[string][]DirEntry{}}
	}
	pl := planner{cfg: cfg, fsys: fsys}
	return pl.plan()
}

// listCache remembers directory listings for the length of one Plan, so
// that several "**" patterns list each directory once.
type listCache struct {
	FS
	kl   kindLister
	dirs map[string][]DirEntry
}

func (c *listCache) ReadDirKinds(name string) ([]DirEntry, error) {
	if es, ok := c.dirs[name]; ok {
		return es, nil
	}
	es, err := c.kl.ReadDirKinds(name)
	if err == nil {
		c.dirs[name] = es
	}
	return es, err
}

type planner struct {
	cfg   Config
	fsys  FS
	notes []string

	hidden    map[string]Kind // deny-read real paths → Dir or File
	writable  []string        // writable roots, real paths
	protected map[string]Kind // deny-write real paths → kind, or placeholder kind when missing
	missing   map[string]bool // protected paths that do not exist yet
	done      map[string]bool // protected paths with a read-only mount
}

func (pl *planner) notef(format string, args ...any) {
	pl.notes = append(pl.notes, fmt.Sprintf(format, args...))
}

// expand turns a list entry into absolute paths: ~ is the home, relative
// paths are under the workspace, globs expand to what exists.
func (pl *planner) expand(entry string) ([]string, error) {
	var p string
	switch {
	case entry == "~":
		p = pl.cfg.Home
	case strings.HasPrefix(entry, "~/"):
		p = path.Join(pl.cfg.Home, entry[2:])
	case path.IsAbs(entry):
		p = path.Clean(entry)
	case entry == "":
		return nil, errors.New("sandbox: empty path in the sandbox lists")
	default:
		p = path.Join(pl.cfg.Workspace, entry)
	}
	if !strings.ContainsAny(p, "*?[") {
		return []string{p}, nil
	}
	return glob(pl.fsys, p)
}

// want is a path to protect, as the plan first sees it.
type want struct {
	entry string // the list entry it comes from, for messages
	path  string
	kind  Kind // the placeholder's kind if it is missing
}

// prot is a want with its path resolved.
type prot struct {
	want
	r resolved
}

// plan resolves the lists in the order the decisions depend on each other:
// what is hidden, what is protected, what is writable (deny wins over
// allow), then the mounts that make it so.
func (pl *planner) plan() (Spec, error) {
	ws, err := resolve(pl.fsys, pl.cfg.Workspace)
	if err != nil {
		return Spec{}, err
	}
	if ws.Kind != Dir {
		return Spec{}, fmt.Errorf("sandbox: workspace %s is not a directory", pl.cfg.Workspace)
	}
	if err := pl.hide(ws.Real); err != nil {
		return Spec{}, err
	}
	prots, err := pl.protect(ws.Real)
	if err != nil {
		return Spec{}, err
	}
	if err := pl.allowWrite(); err != nil {
		return Spec{}, err
	}
	var mounts []Mount
	for _, p := range pl.writable {
		mounts = append(mounts, Mount{Op: Bind, Path: p})
	}
	ro, err := pl.readOnlyMounts(prots)
	if err != nil {
		return Spec{}, err
	}
	mounts = append(mounts, ro...)
	mounts = append(mounts, pl.pins(ro)...)
	mounts = append(mounts, pl.hideMounts()...)
	sortMounts(mounts)
	mounts = dedupe(mounts)

	dir := pl.cfg.Workspace
	if pl.cfg.Dir != "" {
		dir = pl.cfg.Dir
	}
	sort.Strings(pl.notes)
	return Spec{
		Mounts:        mounts,
		Dir:           dir,
		NoNetwork:     pl.cfg.NoNetwork,
		NewSession:    pl.cfg.NewSession,
		Proc:          !pl.cfg.Weaker,
		DisableUserns: !pl.cfg.Weaker,
		Command:       pl.cfg.Command,
		Notes:         pl.notes,
	}, nil
}

// hide fills pl.hidden from denyRead. Missing paths have nothing to hide;
// an entry that would hide the workspace ws is an error.
func (pl *planner) hide(ws string) error {
	pl.hidden = map[string]Kind{}
	for _, e := range pl.cfg.DenyRead {
		err := pl.eachResolved(e, func(_ string, r resolved) error {
			if r.Kind == Missing {
				return nil
			}
			if under(ws, r.Real) {
				return fmt.Errorf("sandbox: denyRead entry %q hides the workspace %s", e, ws)
			}
			pl.hidden[r.Real] = r.Kind
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// eachResolved expands a list entry and calls fn with each path it names
// and that path resolved, stopping at the first error.
func (pl *planner) eachResolved(entry string, fn func(p string, r resolved) error) error {
	ps, err := pl.expand(entry)
	if err != nil {
		return err
	}
	for _, p := range ps {
		r, err := resolve(pl.fsys, p)
		if err != nil {
			return err
		}
		if err := fn(p, r); err != nil {
			return err
		}
	}
	return nil
}

// protect lists the protected paths — the mandatory ones at the home and
// the workspace root (missing ones included), the dangerous names that
// exist deeper in the workspace ws, and denyWrite — resolves them and fills
// pl.protected and pl.missing. Symlinks are checked once the writable roots
// are known.
func (pl *planner) protect(ws string) ([]prot, error) {
	var wants []want
	for _, n := range MandatoryHomeDenyWrite {
		wants = append(wants, want{"~/" + n, path.Join(pl.cfg.Home, n), placeholderKind(n)})
	}
	for _, n := range MandatoryWorkspaceDenyWrite {
		wants = append(wants, want{n, path.Join(pl.cfg.Workspace, n), placeholderKind(n)})
		if d := pl.cfg.Dir; d != "" && path.Clean(d) != path.Clean(pl.cfg.Workspace) {
			// A command started in a sub-project: its own .git/hooks and
			// friends are protected even before they exist.
			wants = append(wants, want{n, path.Join(d, n), placeholderKind(n)})
		}
	}
	err := findDangerous(pl.fsys, ws, func(p string, k Kind) {
		rel := strings.TrimPrefix(p, ws+"/")
		switch {
		case k != Missing:
			wants = append(wants, want{rel, p, k})
		case path.Base(p) == "hooks":
			// A repository's hooks directory, missing: denied before there
			// are any, as for the root's.
			wants = append(wants, want{rel, p, Dir})
		}
	})
	if err != nil {
		return nil, err
	}
	for _, n := range HomeStateRunLater {
		p := path.Join(pl.cfg.Home, n)
		if k, err := pl.fsys.Lstat(p); err != nil {
			return nil, err
		} else if k != Missing {
			wants = append(wants, want{"~/" + n, p, File})
		}
	}
	cacheWants, err := pl.cacheRunLater()
	if err != nil {
		return nil, err
	}
	wants = append(wants, cacheWants...)
	for _, e := range pl.cfg.DenyWrite {
		ps, err := pl.expand(e)
		if err != nil {
			return nil, err
		}
		for _, p := range ps {
			k := File
			if strings.HasSuffix(e, "/") {
				k = Dir
			}
			wants = append(wants, want{e, p, k})
		}
	}
	var prots []prot
	pl.protected = map[string]Kind{}
	pl.missing = map[string]bool{}
	for _, w := range wants {
		r, err := resolve(pl.fsys, w.path)
		if err != nil {
			return nil, err
		}
		prots = append(prots, prot{w, r})
		if r.Kind == Missing {
			pl.protected[r.Real] = w.kind
			pl.missing[r.Real] = true
		} else {
			pl.protected[r.Real] = r.Kind
		}
	}
	return prots, nil
}

// cacheRunLater are the CacheRunLater paths that neither the workspace nor
// allowWrite covers: a toolchain cache alone, or /tmp (a home under /tmp),
// does not make them writable.
func (pl *planner) cacheRunLater() ([]want, error) {
	var explicit []string
	for _, e := range append([]string{pl.cfg.Workspace}, pl.cfg.AllowWrite...) {
		err := pl.eachResolved(e, func(_ string, r resolved) error {
			explicit = append(explicit, r.Real)
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	var wants []want
	for _, e := range CacheRunLater {
		err := pl.eachResolved(e, func(p string, r resolved) error {
			if deepest(r.Real, slices.Values(explicit)) == "" {
				wants = append(wants, want{e, p, Dir})
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return wants, nil
}

// allowWrite fills pl.writable: the workspace, /tmp and allowWrite. Deny
// wins over allow: a root inside a hidden or protected path is left out.
func (pl *planner) allowWrite() error {
	roots := []string{pl.cfg.Workspace, "/tmp"}
	for _, e := range pl.cfg.AllowWrite {
		ps, err := pl.expand(e)
		if err != nil {
			return err
		}
		roots = append(roots, ps...)
	}
	quiet := map[string]bool{}
	for _, e := range pl.cfg.Caches {
		ps, err := pl.expand(e)
		if err != nil {
			return err
		}
		for _, p := range ps {
			quiet[p] = true
		}
		roots = append(roots, ps...)
	}
	seen := map[string]bool{}
	for i, p := range roots {
		r, err := resolve(pl.fsys, p)
		if err != nil {
			return err
		}
		if r.Kind == Missing {
			if !quiet[p] {
				pl.notef("allowWrite %s does not exist: not writable", p)
			}
			continue
		}
		if i > 0 {
			if h := pl.coveredBy(r.Real, pl.hidden); h != "" {
				pl.notef("allowWrite %s is inside denyRead %s: deny wins", p, h)
				continue
			}
			if h := pl.coveredBy(r.Real, pl.protected); h != "" {
				pl.notef("allowWrite %s is inside protected %s: deny wins", p, h)
				continue
			}
		}
		if !seen[r.Real] {
			seen[r.Real] = true
			pl.writable = append(pl.writable, r.Real)
		}
	}
	return nil
}

// readOnlyMounts are the protected paths' mounts, where they matter: only
// inside writable roots (everything else is read-only already) and not
// under a hidden path. A protected path reached through a symlink that a
// sandboxed command could replace is an error.
func (pl *planner) readOnlyMounts(prots []prot) ([]Mount, error) {
	var mounts []Mount
	pl.done = map[string]bool{}
	for _, pr := range prots {
		for _, l := range pr.r.Links {
			if pl.isWritable(path.Dir(l)) {
				return nil, fmt.Errorf("sandbox: %s: %s is a symbolic link in a writable directory, so a sandboxed command could replace it and write where the link pointed; replace the link by what it points to: %w", pr.path, l, ErrReplaceableLink)
			}
		}
		real := pr.r.Real
		if pl.done[real] || pl.coveredBy(real, pl.hidden) != "" {
			continue
		}
		if !pl.isWritable(real) && !pl.holdsWritable(real) {
			continue
		}
		pl.done[real] = true
		m := Mount{Op: ReadOnly, Path: real}
		if pl.missing[real] {
			// Below another protected path that exists, creating it is
			// already impossible, and so is creating a placeholder there —
			// unless a writable root lies between (a denyWrite of "/" does
			// not keep what the workspace's bind, deeper, makes writable).
			if c := pl.coveredBy(real, existing(pl.protected, pl.missing)); c != "" && c != real && under(c, pl.writableRoot(real)) {
				continue
			}
			m.Placeholder = pl.protected[real]
		}
		mounts = append(mounts, m)
	}
	return mounts, nil
}

// pins are the binds that keep read-only mounts where they are. A read-only
// mount protects a path, not the directories above it: renaming .git away
// and making a new .git/hooks would get around it. A directory that is a
// mount point cannot be renamed (EBUSY), so every directory between the
// writable root and a protected path is bound onto itself, writable as
// before.
func (pl *planner) pins(ro []Mount) []Mount {
	pinned := map[string]bool{}
	for _, m := range ro {
		root := pl.writableRoot(m.Path)
		if root == "" {
			continue
		}
		for d := path.Dir(m.Path); d != root && under(d, root) && !pinned[d]; d = path.Dir(d) {
			if pl.done[d] || pl.coveredBy(d, pl.hidden) != "" {
				continue
			}
			pinned[d] = true
		}
	}
	var mounts []Mount
	for d := range pinned {
		mounts = append(mounts, Mount{Op: Bind, Path: d})
	}
	return mounts
}

// hideMounts hide the denyRead paths: an empty tmpfs over a directory,
// /dev/null over a file.
func (pl *planner) hideMounts() []Mount {
	var mounts []Mount
	for p, k := range pl.hidden {
		if k == Dir {
			mounts = append(mounts, Mount{Op: HideDir, Path: p})
		} else {
			mounts = append(mounts, Mount{Op: HideFile, Path: p})
		}
	}
	return mounts
}

// sortMounts orders mounts so that the most specific path wins: shallower
// mounts first, and at one path a deny after an allow.
func sortMounts(mounts []Mount) {
	sort.SliceStable(mounts, func(i, j int) bool {
		di, dj := depth(mounts[i].Path), depth(mounts[j].Path)
		if di != dj {
			return di < dj
		}
		if mounts[i].Path != mounts[j].Path {
			return mounts[i].Path < mounts[j].Path
		}
		return mounts[i].Op < mounts[j].Op
	})
}

// existing returns the entries of m that are not in missing.
func existing(m map[string]Kind, missing map[string]bool) map[string]Kind {
	out := map[string]Kind{}
	for p, k := range m {
		if !missing[p] {
			out[p] = k
		}
	}
	return out
}

// coveredBy returns the path of set that p is at or under ("" if none).
func (pl *planner) coveredBy(p string, set map[string]Kind) string {
	return deepest(p, maps.Keys(set))
}

// isWritable reports whether a sandboxed command could write at p.
func (pl *planner) isWritable(p string) bool {
	return slices.ContainsFunc(pl.writable, func(w string) bool { return under(p, w) })
}

// writableRoot returns the deepest writable root holding p ("" if none).
func (pl *planner) writableRoot(p string) string {
	return deepest(p, slices.Values(pl.writable))
}

// holdsWritable reports whether a writable root lies inside p.
func (pl *planner) holdsWritable(p string) bool {
	return slices.ContainsFunc(pl.writable, func(w string) bool { return under(w, p) })
}

// deepest returns the longest of roots that p is at or under ("" if none).
func deepest(p string, roots iter.Seq[string]) string {
	best := ""
	for q := range roots {
		if under(p, q) && len(q) > len(best) {
			best = q
		}
	}
	return best
}

func placeholderKind(name string) Kind {
	if placeholderDirs[name] {
		return Dir
	}
	return File
}

func depth(p string) int {
	if p == "/" {
		return 0
	}
	return strings.Count(p, "/")
}

// dedupe drops a mount whose path and operation repeat the previous one.
func dedupe(ms []Mount) []Mount {
	out := ms[:0]
	for i, m := range ms {
		if i > 0 && ms[i-1].Path == m.Path && ms[i-1].Op == m.Op {
			continue
		}
		out = append(out, m)
	}
	return out
}

// glob expands an absolute pattern against fsys. A "**" component matches
// any number of directories (none included); hidden build trees that are
// large and never hold secrets (.git, node_modules) are not descended.
func glob(fsys FS, pattern string) ([]string, error) {
	for _, part := range splitPath(pattern) {
		if _, err := path.Match(part, ""); err != nil {
			return nil, fmt.Errorf("sandbox: bad pattern %q: %w", pattern, err)
		}
	}
	var out []string
	var walk func(dir string, parts []string, depth int) error
	walk = func(dir string, parts []string, depth int) error {
		if len(parts) == 0 {
			out = append(out, dir)
			return nil
		}
		part, rest := parts[0], parts[1:]
		if part == "**" {
			if err := walk(dir, rest, depth); err != nil {
				return err
			}
			if depth >= maxGlobDepth {
				return nil
			}
			entries, err := readDirKinds(fsys, dir)
			if err != nil {
				return err
			}
			for _, e := range entries {
				if e.Name == ".git" || e.Name == "node_modules" {
					continue
				}
				if e.Kind == Dir {
					if err := walk(path.Join(dir, e.Name), parts, depth+1); err != nil {
						return err
					}
				}
			}
			return nil
		}
		if !strings.ContainsAny(part, "*?[") {
			c := path.Join(dir, part)
			k, err := fsys.Lstat(c)
			if err != nil {
				return err
			}
			if k == Missing {
				return nil
			}
			return walk(c, rest, depth)
		}
		names, err := readDirIfDir(fsys, dir)
		if err != nil {
			return err
		}
		for _, n := range names {
			// Unlike a shell, * matches names starting with a dot too:
			// hiding too much is the safe side.
			if ok, _ := path.Match(part, n); ok {
				if err := walk(path.Join(dir, n), rest, depth); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := walk("/", splitPath(pattern), 0); err != nil {
		return nil, err
	}
	return out, nil
}

// maxGlobDepth bounds "**" so that a pattern cannot make every run walk a
// whole home directory.
const maxGlobDepth = 8

// DirEntry is one directory entry with what it is (as Lstat says: a
// symlink is a Symlink, never what it points to).
type DirEntry struct {
	Name string
	Kind Kind
}

// kindLister is implemented by filesystems that learn each entry's kind
// while listing a directory (the kernel's d_type): a "**" walk then needs
// no Lstat per entry, which is most of `devbox run`'s start-up on a large
// workspace.
type kindLister interface {
	ReadDirKinds(name string) ([]DirEntry, error)
}

// readDirKinds lists dir (nothing when it is not a directory) with each
// entry's kind, through kindLister when fsys has it.
func readDirKinds(fsys FS, dir string) ([]DirEntry, error) {
	k, err := fsys.Lstat(dir)
	if err != nil || k != Dir {
		return nil, err
	}
	if kl, ok := fsys.(kindLister); ok {
		return kl.ReadDirKinds(dir)
	}
	names, err := fsys.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	out := make([]DirEntry, 0, len(names))
	for _, n := range names {
		k, err := fsys.Lstat(path.Join(dir, n))
		if err != nil {
			return nil, err
		}
		out = append(out, DirEntry{Name: n, Kind: k})
	}
	return out, nil
}

func readDirIfDir(fsys FS, dir string) ([]string, error) {
	k, err := fsys.Lstat(dir)
	if err != nil || k != Dir {
		return nil, err
	}
	return fsys.ReadDir(dir)
}
