// Package gitaudit models what in a directory tree can make a program run
// later, outside any sandbox, with the user's rights: every directory git
// could use as a git directory (read generously: any HEAD entry beside
// objects and refs, any .git entry, gitfiles and commondir read whole,
// .git/modules/**, .git/worktrees/*, bare repositories with linked parts),
// everything in them but a short named list of pure data, the config keys
// git itself reads there judged by an allow-list, hooks directories
// digested whole, sequencer state; and the files and directories of other
// tools that run what they hold (shell start-up files, .envrc, hook
// runners, editor and agent settings). It never runs anything it
// inspects: config files are read by `git config` on standard input,
// outside any repository. The host's `devbox audit` and `devbox run`'s
// end-of-run audit both compare a scan with a state recorded outside the
// tree.
package gitaudit

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Kind says what a finding is.
type Kind string

const (
	// GitDir is a git directory; its presence is the finding.
	GitDir Kind = "gitdir"
	// GitLink is a pointer to a git directory: a .git file ("gitdir: X")
	// or a commondir file, read whole as git reads it; Value is the
	// target.
	GitLink Kind = "gitlink"
	// Symlink is a symbolic link in a git directory, at a .git, or at a
	// run-later name; Value is the target. Where git (or the tool) would
	// follow it, the target is audited too.
	Symlink Kind = "symlink"
	// Hook is an executable file in a hooks directory (core.hooksPath's
	// included), with its first lines.
	Hook Kind = "hook"
	// File is any other file of a git directory that is not on the list
	// of pure data (objects, refs with valid content, logs, index, ...):
	// a hook sample, info/attributes, a file git has no use for.
	File Kind = "file"
	// Sequencer is a file of an interrupted rebase, cherry-pick or revert
	// (rebase-merge/, rebase-apply/, sequencer/): its todo list can hold
	// "exec" lines that `git rebase --continue` runs.
	Sequencer Kind = "sequencer"
	// Config is a config entry git reads that is not on the allow-list
	// (Allowed); Key is the name as git printed it.
	Config Kind = "config"
	// RunLater is a file at a name another tool runs or obeys (RunLater
	// names), in a devbox run audit.
	RunLater Kind = "runlater"
	// Unreadable is something git would read that the audit could not: a
	// config git refuses, a FIFO, a directory the walk could not enter.
	// Reported so the audit fails closed.
	Unreadable Kind = "unreadable"
)

// Finding is one thing that could run, or choose what runs.
type Finding struct {
	Kind Kind `json:"kind"`
	// Path is the file, relative to the workspace root with slashes, or
	// absolute when it is outside the root (an include, a gitdir target).
	Path string `json:"path"`
	// Line is unused since config is read by git (kept for the JSON).
	Line int `json:"line,omitempty"`
	// Key is the config key as git printed it, or the hook's name.
	Key string `json:"key,omitempty"`
	// Value is the config value, a link's target, or why a file is
	// unreadable.
	Value string `json:"value,omitempty"`
	// Digest identifies the content: sha256 of the bytes (and the mode,
	// for files), of the value, or of the link's target.
	Digest string `json:"digest"`
	// Size is a file's size in bytes.
	Size int64 `json:"size,omitempty"`
	// Head is the first lines of a hook or sequencer file, for the
	// report. Not part of the state.
	Head []string `json:"head,omitempty"`

	ordinal int // nth occurrence of Key in Path, for keys git reads many times
}

// ID names a finding across runs: what it is and where, not its content.
func (f Finding) ID() string {
	id := string(f.Kind) + " " + f.Path
	if f.Key != "" {
		id += " " + f.Key
	}
	if f.ordinal > 0 {
		id += fmt.Sprintf("#%d", f.ordinal+1)
	}
	return id
}

// Result is what Scan found under a root.
type Result struct {
	// Root is the workspace, absolute.
	Root string `json:"root"`
	// GitDirs are the git directories found, relative (absolute outside
	// Root), sorted.
	GitDirs []string `json:"gitDirs"`
	// Findings, sorted by ID.
	Findings []Finding `json:"findings"`
	// ReadOnly are the paths under Root, relative and sorted, that a dev
	// container must see read-only: every git directory's hooks directory,
	// config and config.worktree, and every run-later name (with
	// Options.RunLater), that exist as a real directory or file (not a
	// link) at scan time. A bind mount needs its source to exist, so what
	// appears later is left to the audit.
	ReadOnly []string `json:"readOnly"`
	// Cache is the digest cache for the next scan (see Options.Cache).
	Cache map[string]string `json:"-"`
}

// HeadLines is how many lines of a hook the report shows.
const HeadLines = 5

// maxConfig is the largest config file the audit reads; a larger one is
// reported as unreadable rather than skipped.
const maxConfig = 16 << 20

// maxIncludeDepth matches git's limit on nested includes.
const maxIncludeDepth = 10

// maxDepth bounds how deep the audit follows directories inside a git
// directory or a run-later directory (links can make cycles).
const maxDepth = 64

// Options choose what Scan covers beyond git.
type Options struct {
	// RunLater adds, at any depth outside node_modules, the files and
	// directories of RunLaterFiles and RunLaterDirs, digested whole. The
	// host audit (Scan) and `devbox run`'s both set it.
	RunLater bool
	// Skip are run-later paths, relative to the root with slashes, that
	// RunLater leaves out (walked for git directories as any other
	// directory).
	Skip []string
	// Home resolves "~/" in include paths and core.hooksPath; "" means
	// the user's home directory.
	Home string
	// Git is the git binary that reads config; "" means git on PATH.
	Git string
	// Watch are more paths, absolute, digested whole as RunLater (the
	// directories on the agent's PATH a sandboxed command can write, the
	// home's run-later files), taken as written (a '*' in a name is a
	// '*').
	Watch []string
	// Sites are Python site-packages directories, absolute patterns
	// (filepath.Match syntax, expanded at each scan, so a directory made
	// during a run counts), whose start-up files are audited as RunLater: what
	// python runs at every start, whatever the program imports (see
	// sitePackages). At any depth of the tree they are found by name.
	Sites []string
	// GitConfigs are more git config files, absolute, audited as a
	// repository's config is (keys off the allow-list, includes
	// followed): the files the user's global config includes that a
	// sandboxed command can write (IncludedConfigs).
	GitConfigs []string
	// Cache is the previous scan's Result.Cache: a RunLater file whose
	// device, inode, size, mtime and ctime are unchanged keeps its digest
	// without being read again (a toolchain's bin directory is large).
	Cache map[string]string
}

// Scan is ScanWith with the host audit's options: git and the run-later
// names, but for the dev container definition at the root (DevcontainerDir).
func Scan(root string) (*Result, error) {
	return ScanWith(root, Options{RunLater: true, Skip: []string{DevcontainerDir}})
}

// DevcontainerDir is the dev container definition at a workspace's root.
// The host audit leaves it out: every dev container devbox init writes
// mounts it read-only (so nothing in the container can change it), and
// devbox init itself rewrites it on the host, in the initializeCommand
// right after the audit (the mounts, the copied binary), which the next
// audit would otherwise report at every start.
const DevcontainerDir = ".devcontainer"

// ScanWith walks root and returns every git directory and what in it is
// not pure data, and with o.RunLater every run-later name. It reads files
// only, runs nothing it finds (config goes to `git config` as bytes on
// standard input), never follows a symbolic link while walking the tree
// (links at the names git or a tool would follow are followed and the
// target audited), and opens files so that a FIFO planted where a file
// should be cannot block it. Errors reading a single file become
// Unreadable findings; ScanWith fails only when root itself cannot be
// read or git cannot be started.
func ScanWith(root string, o Options) (*Result, error) {
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, err
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		abs = real
	}
	if fi, err := os.Stat(abs); err != nil {
		return nil, err
	} else if !fi.IsDir() {
		return nil, fmt.Errorf("%s is not a directory", root)
	}
	if o.Home == "" {
		o.Home, _ = os.UserHomeDir()
	}
	cfg, err := NewConfigReader(o.Git)
	if err != nil {
		return nil, err
	}
	defer cfg.Close()
	s := &scanner{root: abs, opts: o, cfg: cfg, res: &Result{Root: abs, Cache: map[string]string{}},
		seenDir: map[string]bool{}, seenFile: map[string]bool{}, seenWhole: map[string]bool{}, count: map[string]int{},
		skip: setOf(o.Skip)}
	if _, err := os.ReadDir(abs); err != nil {
		return nil, err
	}
	s.walkTree(abs, o.RunLater)
	for _, w := range o.Watch {
		s.whole(w, RunLater, 0)
	}
	for _, pattern := range o.Sites {
		matches, _ := filepath.Glob(pattern) // a bad pattern names nothing
		for _, d := range matches {
			s.sitePackages(d)
		}
	}
	for _, c := range o.GitConfigs {
		s.configFile(c, "", 0)
	}
	sort.Strings(s.res.GitDirs)
	sort.Strings(s.res.ReadOnly)
	sort.SliceStable(s.res.Findings, func(i, j int) bool { return s.res.Findings[i].ID() < s.res.Findings[j].ID() })
	return s.res, nil
}

type scanner struct {
	root      string
	opts      Options
	cfg       *ConfigReader
	res       *Result
	seenDir   map[string]bool // git dirs audited, real paths
	seenFile  map[string]bool // config files audited, real paths
	seenWhole map[string]bool // directories digested whole, real paths
	count     map[string]int  // findings per kind, path and key
	wholeLeft int             // entries the current whole() may still digest
	skip      map[string]bool // Options.Skip
}

func (s *scanner) add(f Finding) {
	k := string(f.Kind) + "\x00" + f.Path + "\x00" + f.Key
	f.ordinal = s.count[k]
	s.count[k]++
	s.res.Findings = append(s.res.Findings, f)
}

func (s *scanner) unreadable(path, key string, err error) {
	msg := err.Error()
	var pe *fs.PathError
	if errors.As(err, &pe) {
		msg = pe.Op + ": " + pe.Err.Error()
	}
	s.add(Finding{Kind: Unreadable, Path: s.rel(path), Key: key, Value: msg, Digest: digest(msg)})
}

// rel is path relative to the root with slashes, or absolute outside it.
func (s *scanner) rel(path string) string {
	r, err := filepath.Rel(s.root, path)
	if err != nil || r == ".." || strings.HasPrefix(r, ".."+string(filepath.Separator)) {
		return path
	}
	return filepath.ToSlash(r)
}

func (s *scanner) inside(path string) bool { return !filepath.IsAbs(s.rel(path)) }

// walkTree walks a directory of the work tree. A directory that looks like
// a git directory is audited as one (and not walked as a tree); a .git
// entry of any kind is followed; with names set, run-later names are
// digested whole.
func (s *scanner) walkTree(dir string, names bool) {
	entries, err := readDir(dir)
	if err != nil {
		s.unreadable(dir, "", err)
		return
	}
	if looksLikeGitDir(entries) {
		s.gitDir(dir)
		return
	}
	for _, e := range entries {
		name := e.Name()
		p := filepath.Join(dir, name)
		switch {
		case name == ".git":
			s.dotGit(p, e)
		case names && (runLaterFile[name] || runLaterDir[name]) && !s.skip[s.rel(p)]:
			if t := e.Type(); t.IsDir() || t.IsRegular() {
				s.res.ReadOnly = append(s.res.ReadOnly, s.rel(p))
			}
			s.whole(p, RunLater, 0)
		case names && sitePackagesDir[name] && e.IsDir():
			s.sitePackages(p)
			s.walkTree(p, names)
		case e.IsDir():
			s.walkTree(p, names && name != "node_modules")
		}
	}
}

// readDir lists a directory without sorting or stat-ing its entries.
func readDir(dir string) ([]fs.DirEntry, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.ReadDir(-1)
}

// looksLikeGitDir is git's is_git_directory read generously: a HEAD entry
// of any kind (file, link, directory, FIFO), and either objects and refs
// entries of any kind or a commondir entry (a worktree's admin directory
// takes them from the common directory). Git itself also checks HEAD's
// content; the audit does not, so that no HEAD git accepts is missed.
func looksLikeGitDir(entries []fs.DirEntry) bool {
	var head, objects, refs, common bool
	for _, e := range entries {
		switch e.Name() {
		case "HEAD":
			head = true
		case "objects":
			objects = true
		case "refs":
			refs = true
		case "commondir":
			common = true
		}
	}
	return head && (objects && refs || common)
}

// dotGit follows a .git entry: a directory, a gitfile, or a link to
// either; anything else is reported.
func (s *scanner) dotGit(path string, d fs.DirEntry) {
	switch t := d.Type(); {
	case t.IsDir():
		s.gitDir(path)
	case t&fs.ModeSymlink != 0:
		s.link(path, "")
		fi, err := os.Stat(path)
		switch {
		case err != nil:
		case fi.IsDir():
			s.gitDir(path)
		default:
			s.gitLink(path, "gitdir: ", filepath.Dir(path))
		}
	case t.IsRegular():
		s.gitLink(path, "gitdir: ", filepath.Dir(path))
	default:
		s.add(Finding{Kind: Unreadable, Path: s.rel(path), Value: "not a regular file: " + t.String(), Digest: digest(t.String())})
	}
}

// link reports a symbolic link and its target.
func (s *scanner) link(path, key string) {
	target, err := os.Readlink(path)
	if err != nil {
		s.unreadable(path, key, err)
		return
	}
	s.add(Finding{Kind: Symlink, Path: s.rel(path), Key: key, Value: target, Digest: digest(target)})
}

// gitLink reads a file naming a git directory the way git does: the whole
// file (a gitfile must start with "gitdir: "), trailing newlines and
// carriage returns stripped, cut at a NUL as git's C strings are. Further
// lines are part of the path. A relative target is relative to base.
// It reports the file and audits the directory it names.
func (s *scanner) gitLink(path, prefix, base string) {
	data, _, err := readRegular(path, 1<<16)
	if err != nil {
		s.unreadable(path, "", err)
		return
	}
	sum := sha256Hex(data)
	text := string(data)
	if !strings.HasPrefix(text, prefix) {
		s.add(Finding{Kind: Unreadable, Path: s.rel(path), Value: "not a gitfile: " + firstN(text, 200), Digest: sum})
		return
	}
	text = strings.TrimRight(text[len(prefix):], "\r\n")
	target, _, _ := strings.Cut(text, "\x00")
	s.add(Finding{Kind: GitLink, Path: s.rel(path), Value: target, Digest: sum})
	if target == "" {
		return
	}
	if !filepath.IsAbs(target) {
		target = filepath.Join(base, target)
	}
	if fi, err := os.Stat(target); err == nil && fi.IsDir() {
		s.gitDir(target)
	}
}

func firstN(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}
