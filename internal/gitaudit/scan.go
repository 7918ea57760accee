// Package gitaudit finds, without running anything, every place in a
// workspace from which git on the host would run a program: the git
// directories (the top-level .git, submodules under .git/modules, worktree
// admin directories, nested and bare repositories), their executable hooks
// and the config keys that name programs. It compares them with a state the
// user accepted, kept outside the workspace, so code written inside a dev
// container cannot wait in the checkout for the host to run it.
package gitaudit

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
)

// Kind says what a finding is.
type Kind string

const (
	// GitDir is a git directory; its presence is the finding.
	GitDir Kind = "gitdir"
	// GitLink is a pointer to a git directory: a .git file ("gitdir: X")
	// or a worktree's commondir file; Value is the target.
	GitLink Kind = "gitlink"
	// Symlink is a .git, hooks directory, hook or config that is a
	// symbolic link; Value is the target.
	Symlink Kind = "symlink"
	// Hook is an executable file in a hooks directory (samples excluded:
	// git never runs them).
	Hook Kind = "hook"
	// Config is a dangerous key (see Dangerous) in a config file.
	Config Kind = "config"
	// Unreadable is a file git would read that the audit could not: a
	// config git refuses, a hook that is not a regular file, a directory
	// the walk could not enter. Reported so the audit fails closed.
	Unreadable Kind = "unreadable"
)

// Finding is one thing git on the host could run or obey.
type Finding struct {
	Kind Kind `json:"kind"`
	// Path is the file, relative to the workspace root with slashes, or
	// absolute when it is outside the root (an include, a gitdir target).
	Path string `json:"path"`
	// Line is the line of a config key.
	Line int `json:"line,omitempty"`
	// Key is the config key (canonical name) or the hook's name.
	Key string `json:"key,omitempty"`
	// Value is the config value, a link's target, or why a file is
	// unreadable.
	Value string `json:"value,omitempty"`
	// Digest identifies the content: sha256 of the value, the hook's
	// bytes, the link's target.
	Digest string `json:"digest"`
	// Size is a hook's size in bytes.
	Size int64 `json:"size,omitempty"`
	// Head is the first lines of a hook, for the report. Not part of
	// the state.
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
	// GitDirs are the git directories under Root, relative, sorted.
	GitDirs []string `json:"gitDirs"`
	// Findings, sorted by ID.
	Findings []Finding `json:"findings"`
	// ReadOnly are the paths under Root, relative and sorted, that a dev
	// container must see read-only: every git directory's hooks directory,
	// config and config.worktree that exist as a real directory or file
	// (not a link) at scan time.
	ReadOnly []string `json:"readOnly"`
}

// HeadLines is how many lines of a hook the report shows.
const HeadLines = 5

// maxConfig is the largest config file the audit parses; a larger one is
// reported as unreadable rather than skipped.
const maxConfig = 16 << 20

// maxIncludeDepth matches git's limit on nested includes.
const maxIncludeDepth = 10

// Scan walks root and returns every git directory, hook and dangerous key
// under it. It reads files only: it never runs git or anything it finds,
// never follows a symbolic link while walking, and opens files so that a
// FIFO planted where a hook or config should be cannot block it. Errors
// reading a single file become Unreadable findings; Scan fails only when
// root itself cannot be read.
func Scan(root string) (*Result, error) {
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
	s := &scanner{root: abs, res: &Result{Root: abs}, seenDir: map[string]bool{}, seenFile: map[string]bool{}}
	err = filepath.WalkDir(abs, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if path == abs {
				return err
			}
			s.add(Finding{Kind: Unreadable, Path: s.rel(path), Value: err.Error(), Digest: digest(err.Error())})
			if d != nil && d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		switch {
		case d.IsDir():
			if looksLikeGitDir(path, d.Name()) {
				s.gitDir(path)
			}
		case d.Name() == ".git":
			s.dotGit(path, d)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	sort.Strings(s.res.GitDirs)
	sort.Strings(s.res.ReadOnly)
	sort.SliceStable(s.res.Findings, func(i, j int) bool { return s.res.Findings[i].ID() < s.res.Findings[j].ID() })
	return s.res, nil
}

type scanner struct {
	root     string
	res      *Result
	seenDir  map[string]bool // git dirs audited, absolute
	seenFile map[string]bool // config files audited, absolute
}

func (s *scanner) add(f Finding) {
	for _, g := range s.res.Findings {
		if g.Kind == f.Kind && g.Path == f.Path && g.Key == f.Key {
			f.ordinal++
		}
	}
	s.res.Findings = append(s.res.Findings, f)
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

// looksLikeGitDir is git's test for a git directory, loosened: a
// directory named .git, a directory with HEAD, objects/ and refs/ (a bare
// repository or a submodule's directory under .git/modules), or a worktree's
// admin directory (HEAD and commondir).
func looksLikeGitDir(path, name string) bool {
	if name == ".git" {
		return true
	}
	if !isRegular(filepath.Join(path, "HEAD")) {
		return false
	}
	if isRegular(filepath.Join(path, "commondir")) {
		return true
	}
	return isRealDir(filepath.Join(path, "objects")) && isRealDir(filepath.Join(path, "refs"))
}

func isRegular(p string) bool { fi, err := os.Lstat(p); return err == nil && fi.Mode().IsRegular() }
func isRealDir(p string) bool { fi, err := os.Lstat(p); return err == nil && fi.IsDir() }

// dotGit handles a .git that is not a directory: a gitfile or a link.
func (s *scanner) dotGit(path string, d fs.DirEntry) {
	if d.Type()&fs.ModeSymlink != 0 {
		target, err := os.Readlink(path)
		if err != nil {
			s.add(Finding{Kind: Unreadable, Path: s.rel(path), Value: err.Error(), Digest: digest(err.Error())})
			return
		}
		s.add(Finding{Kind: Symlink, Path: s.rel(path), Value: target, Digest: digest(target)})
		if fi, err := os.Stat(path); err == nil && fi.IsDir() {
			s.gitDir(path)
		}
		return
	}
	if !d.Type().IsRegular() {
		s.add(Finding{Kind: Unreadable, Path: s.rel(path), Value: "not a regular file: " + d.Type().String(), Digest: digest(d.Type().String())})
		return
	}
	s.gitLink(path, "gitdir: ")
}

// gitLink reads a file naming a git directory (a gitfile, or a worktree's
// commondir with prefix ""), reports it and audits the directory it names.
func (s *scanner) gitLink(path, prefix string) {
	data, _, err := readRegular(path, 4096)
	if err != nil {
		s.add(Finding{Kind: Unreadable, Path: s.rel(path), Value: err.Error(), Digest: digest(err.Error())})
		return
	}
	line, _, _ := strings.Cut(string(data), "\n")
	line = strings.TrimSuffix(line, "\r")
	target, ok := strings.CutPrefix(line, prefix)
	if !ok {
		s.add(Finding{Kind: Unreadable, Path: s.rel(path), Value: "not a gitfile: " + line, Digest: digest(line)})
		return
	}
	s.add(Finding{Kind: GitLink, Path: s.rel(path), Value: target, Digest: digest(target)})
	if !filepath.IsAbs(target) {
		target = filepath.Join(filepath.Dir(path), target)
	}
	if fi, err := os.Stat(target); err == nil && fi.IsDir() {
		s.gitDir(target)
	}
}

// gitDir audits one git directory: its hooks, config and config.worktree,
// and a worktree admin directory's commondir.
func (s *scanner) gitDir(dir string) {
	key := dir
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		key = real
	}
	if s.seenDir[key] {
		return
	}
	s.seenDir[key] = true
	s.res.GitDirs = append(s.res.GitDirs, s.rel(dir))
	s.add(Finding{Kind: GitDir, Path: s.rel(dir), Digest: digest("")})

	hooks := filepath.Join(dir, "hooks")
	if fi, err := os.Lstat(hooks); err == nil {
		if fi.Mode()&fs.ModeSymlink != 0 {
			target, _ := os.Readlink(hooks)
			s.add(Finding{Kind: Symlink, Path: s.rel(hooks), Value: target, Digest: digest(target)})
		} else if fi.IsDir() && s.inside(hooks) {
			s.res.ReadOnly = append(s.res.ReadOnly, s.rel(hooks))
		}
		s.hooks(hooks)
	}
	for _, name := range []string{"config", "config.worktree"} {
		p := filepath.Join(dir, name)
		fi, err := os.Lstat(p)
		if err != nil {
			continue
		}
		if fi.Mode().IsRegular() && s.inside(p) {
			s.res.ReadOnly = append(s.res.ReadOnly, s.rel(p))
		}
		s.configFile(p, 0)
	}
	if isRegular(filepath.Join(dir, "commondir")) {
		s.gitLink(filepath.Join(dir, "commondir"), "")
	}
}

// hooks reports every file git could run from a hooks directory.
func (s *scanner) hooks(dir string) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		s.add(Finding{Kind: Unreadable, Path: s.rel(dir), Value: err.Error(), Digest: digest(err.Error())})
		return
	}
	for _, e := range entries {
		name := e.Name()
		if strings.HasSuffix(name, ".sample") {
			continue
		}
		p := filepath.Join(dir, name)
		if e.Type()&fs.ModeSymlink != 0 {
			target, _ := os.Readlink(p)
			s.add(Finding{Kind: Symlink, Path: s.rel(p), Key: name, Value: target, Digest: digest(target)})
		}
		fi, err := os.Stat(p) // what git would run: the link's target
		if err != nil || fi.IsDir() {
			continue
		}
		if !fi.Mode().IsRegular() {
			s.add(Finding{Kind: Unreadable, Path: s.rel(p), Key: name, Value: "not a regular file: " + fi.Mode().String(), Digest: digest(fi.Mode().String())})
			continue
		}
		if fi.Mode().Perm()&0o111 == 0 {
			continue // git ignores a hook that is not executable
		}
		head, sum, size, err := hashFile(p)
		if err != nil {
			s.add(Finding{Kind: Unreadable, Path: s.rel(p), Key: name, Value: err.Error(), Digest: digest(err.Error())})
			continue
		}
		s.add(Finding{Kind: Hook, Path: s.rel(p), Key: name, Digest: sum, Size: size, Head: firstLines(head, HeadLines)})
	}
}

// configFile reports the dangerous keys of one config file and of the
// files it includes.
func (s *scanner) configFile(path string, depth int) {
	if depth > maxIncludeDepth {
		return
	}
	fi, err := os.Lstat(path)
	if err != nil {
		return // git skips a missing include
	}
	key := path
	if real, err := filepath.EvalSymlinks(path); err == nil {
		key = real
	}
	if s.seenFile[key] {
		return
	}
	s.seenFile[key] = true
	if fi.Mode()&fs.ModeSymlink != 0 {
		target, _ := os.Readlink(path)
		s.add(Finding{Kind: Symlink, Path: s.rel(path), Value: target, Digest: digest(target)})
	}
	data, total, err := readRegular(path, maxConfig)
	if err == nil && total > maxConfig {
		err = fmt.Errorf("larger than %d bytes", maxConfig)
	}
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return
		}
		s.add(Finding{Kind: Unreadable, Path: s.rel(path), Value: err.Error(), Digest: digest(err.Error())})
		return
	}
	entries, perr := ParseConfig(data)
	if perr != nil {
		// git refuses the file, but acts on no key of it; fail closed
		// anyway, the user should see what is there.
		sum := sha256.Sum256(data)
		s.add(Finding{Kind: Unreadable, Path: s.rel(path), Value: "git would refuse it: " + perr.Error(), Digest: "sha256:" + hex.EncodeToString(sum[:])})
	}
	for _, e := range entries {
		if !Dangerous(e.Name) {
			continue
		}
		v := e.Value
		if e.NoValue {
			v = "(no value: true)"
		}
		s.add(Finding{Kind: Config, Path: s.rel(path), Line: e.Line, Key: e.Name, Value: v, Digest: digest(e.Name + "=" + v)})
		if (e.Section() == "include" || e.Section() == "includeif") && e.Key() == "path" && !e.NoValue {
			s.configFile(includeTarget(path, e.Value), depth+1)
		}
	}
}

// includeTarget resolves an include.path value the way git does: "~/" is
// the home directory, a relative path is relative to the including file.
func includeTarget(from, v string) string {
	if rest, ok := strings.CutPrefix(v, "~/"); ok {
		home, _ := os.UserHomeDir()
		return filepath.Join(home, rest)
	}
	if filepath.IsAbs(v) {
		return v
	}
	return filepath.Join(filepath.Dir(from), v)
}

// openRegular opens path for reading without blocking on a FIFO and
// without acquiring a terminal, and refuses anything but a regular file.
func openRegular(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("not a regular file: %s", fi.Mode())
	}
	return f, nil
}

// readRegular returns up to limit bytes of a regular file and its size.
func readRegular(path string, limit int64) ([]byte, int64, error) {
	f, err := openRegular(path)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, 0, err
	}
	data, err := io.ReadAll(io.LimitReader(f, limit))
	return data, fi.Size(), err
}

// hashFile returns the first bytes of a regular file, its digest and size.
func hashFile(path string) ([]byte, string, int64, error) {
	f, err := openRegular(path)
	if err != nil {
		return nil, "", 0, err
	}
	defer f.Close()
	h := sha256.New()
	var head bytes.Buffer
	n, err := io.Copy(io.MultiWriter(h, &limitedBuffer{&head, 4096}), f)
	if err != nil {
		return nil, "", 0, err
	}
	return head.Bytes(), "sha256:" + hex.EncodeToString(h.Sum(nil)), n, nil
}

type limitedBuffer struct {
	b   *bytes.Buffer
	max int
}

func (l *limitedBuffer) Write(p []byte) (int, error) {
	if room := l.max - l.b.Len(); room > 0 {
		l.b.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}

func firstLines(b []byte, n int) []string {
	lines := strings.SplitN(string(b), "\n", n+1)
	if len(lines) > n {
		lines = lines[:n]
	}
	for len(lines) > 0 && lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	return lines
}

func digest(s string) string {
	sum := sha256.Sum256([]byte(s))
	return "sha256:" + hex.EncodeToString(sum[:])
}
