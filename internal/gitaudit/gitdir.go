package gitaudit

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// firstVisit marks p in seen, by its real path when it resolves (two
// names of one file are one visit), and reports whether it was new.
func firstVisit(seen map[string]bool, p string) bool {
	key := p
	if real, err := filepath.EvalSymlinks(p); err == nil {
		key = real
	}
	if seen[key] {
		return false
	}
	seen[key] = true
	return true
}

// gitDir audits one git directory: everything in it but pure data.
func (s *scanner) gitDir(dir string) {
	if !firstVisit(s.seenDir, dir) {
		return
	}
	s.res.GitDirs = append(s.res.GitDirs, s.rel(dir))
	s.add(Finding{Kind: GitDir, Path: s.rel(dir), Digest: digest("")})
	for _, name := range []string{"hooks", "config", "config.worktree"} {
		p := filepath.Join(dir, name)
		if fi, err := os.Lstat(p); err == nil && (fi.IsDir() || fi.Mode().IsRegular()) && s.inside(p) {
			s.res.ReadOnly = append(s.res.ReadOnly, s.rel(p))
		}
	}
	s.gitWalk(dir, "", 0)
}

// gitWalk audits the directory rel of the git directory gd.
func (s *scanner) gitWalk(gd, rel string, depth int) {
	dir := filepath.Join(gd, rel)
	entries, err := readDir(dir)
	if err != nil {
		s.unreadable(dir, "", err)
		return
	}
	if depth > maxDepth {
		s.add(Finding{Kind: Unreadable, Path: s.rel(dir), Value: "too deep", Digest: digest("too deep")})
		return
	}
	for _, e := range entries {
		r := e.Name()
		if rel != "" {
			r = rel + "/" + r
		}
		p := filepath.Join(gd, r)
		top, _, _ := strings.Cut(r, "/")
		t := e.Type()
		switch {
		case r == "config" || r == "config.worktree":
			s.configFile(p, gd, 0)
		case top == "hooks":
			s.whole(p, Hook, 0)
		case r == "commondir":
			if t&fs.ModeSymlink != 0 {
				s.link(p, "")
			}
			s.gitLink(p, "", gd)
		case top == "rebase-merge" || top == "rebase-apply" || top == "sequencer":
			s.whole(p, Sequencer, 0)
		case t&fs.ModeSymlink != 0:
			// objects, refs or HEAD linked elsewhere (a bare repository
			// of links is still one): the link is the finding.
			s.link(p, "")
		case t.IsDir():
			if pureDataDir[r] {
				continue
			}
			if sub, err := readDir(p); err == nil && looksLikeGitDir(sub) {
				s.gitDir(p) // .git/modules/**, .git/worktrees/*, or one planted anywhere
				continue
			}
			if r == "objects" {
				s.gitWalkOnly(gd, "objects/info", depth)
				continue
			}
			s.gitWalk(gd, r, depth+1)
		case !t.IsRegular():
			s.add(Finding{Kind: Unreadable, Path: s.rel(p), Value: "not a regular file: " + t.String(), Digest: digest(t.String())})
		case s.pureData(r, p):
		default:
			s.whole(p, File, 0)
		}
	}
}

// gitWalkOnly walks rel if it exists (objects/info: the one part of the
// object store that is not objects).
func (s *scanner) gitWalkOnly(gd, rel string, depth int) {
	fi, err := os.Lstat(filepath.Join(gd, rel))
	switch {
	case err != nil:
	case fi.Mode()&fs.ModeSymlink != 0:
		s.link(filepath.Join(gd, rel), "")
	case fi.IsDir():
		s.gitWalk(gd, rel, depth+1)
	}
}

// pureDataDir are directories of a git directory git only ever reads as
// data: reflogs, the rerere cache, LFS objects. Objects are walked for
// objects/info alone.
var pureDataDir = map[string]bool{"logs": true, "rr-cache": true, "lfs": true}

// dataFiles are files at the top of a git directory git reads as data
// only: messages, the index, markers of an operation under way, the
// worktree admin files that point back at a work tree.
var dataFiles = map[string]bool{
	"index": true, "description": true, "COMMIT_EDITMSG": true, "MERGE_MSG": true, "MERGE_MODE": true,
	"SQUASH_MSG": true, "TAG_EDITMSG": true, "NOTES_EDITMSG": true, "MERGE_RR": true, "shallow": true,
	"gitdir": true, "locked": true, "gc.pid": true, "gc.log": true, "BISECT_LOG": true, "BISECT_NAMES": true,
	"BISECT_START": true, "BISECT_TERMS": true, "BISECT_ANCESTORS_OK": true, "BISECT_EXPECTED_REV": true,
	"info/exclude": true, "info/refs": true, "info/sparse-checkout": true,
	"objects/info/packs": true, "objects/info/commit-graph": true, "objects/info/commit-graphs": true,
	"objects/info/multi-pack-index": true,
}

// headFiles hold one object name or one symbolic ref, like a ref.
var headFiles = map[string]bool{
	"HEAD": true, "ORIG_HEAD": true, "MERGE_HEAD": true, "CHERRY_PICK_HEAD": true, "REVERT_HEAD": true,
	"REBASE_HEAD": true, "AUTO_MERGE": true, "BISECT_HEAD": true,
}

var (
	objectName = `[0-9a-f]{40}(?:[0-9a-f]{24})?`
	refContent = regexp.MustCompile(`^(?:` + objectName + `|ref: refs/[^\x00-\x20\x7f~^:?*\[\\]+)$`)
	packedRef  = regexp.MustCompile(`^(?:# pack-refs with:[ a-z-]*|` + objectName + ` refs/[^\x00-\x20\x7f~^:?*\[\\]+|\^` + objectName + `)$`)
	fetchHead  = regexp.MustCompile(`^` + objectName + `\t(?:not-for-merge)?\t[^\x00-\x08\x0a-\x1f\x7f]*$`)
)

// pureData reports whether the file rel of a git directory is data git
// never runs and that cannot choose what git runs: named data files,
// *.lock files (an update under way), and refs, HEAD-like files,
// packed-refs and FETCH_HEAD whose content is valid.
func (s *scanner) pureData(rel, path string) bool {
	switch {
	case dataFiles[rel] || strings.HasSuffix(rel, ".lock"):
		return true
	case rel == "MERGE_HEAD":
		return validLines(path, 1<<16, refContent) // one line per merged head
	case headFiles[rel] || strings.HasPrefix(rel, "refs/"):
		// One line: an object name or a symbolic ref.
		data, n, err := readRegular(path, 512)
		return err == nil && n <= 512 && refContent.MatchString(strings.TrimSuffix(string(data), "\n"))
	case rel == "packed-refs":
		return validLines(path, maxConfig, packedRef)
	case rel == "FETCH_HEAD":
		return validLines(path, maxConfig, fetchHead)
	}
	return false
}

// validLines reports whether the regular file at path, at most limit
// bytes, is lines that each match re (a final newline allowed).
func validLines(path string, limit int64, re *regexp.Regexp) bool {
	data, n, err := readRegular(path, limit)
	if err != nil || n > limit || len(data) == 0 {
		return false
	}
	for _, l := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
		if !re.MatchString(l) {
			return false
		}
	}
	return true
}

// whole audits path and, when it is a directory, everything below it,
// following links (their targets are what runs) and reporting each link:
// a hooks directory, sequencer state, a run-later name. In a hooks
// directory an executable file is a Hook (with its first lines), any
// other a File.
func (s *scanner) whole(path string, kind Kind, depth int) {
	if depth == 0 {
		s.wholeLeft = maxWhole
	}
	if s.wholeLeft--; s.wholeLeft < 0 {
		if s.wholeLeft == -1 {
			// A core.hooksPath of "/" must not walk the machine; fail closed.
			msg := fmt.Sprintf("more than %d entries to digest", maxWhole)
			s.add(Finding{Kind: Unreadable, Path: s.rel(path), Value: msg, Digest: digest(msg)})
		}
		return
	}
	fi, err := os.Lstat(path)
	if err != nil {
		if !os.IsNotExist(err) {
			s.unreadable(path, "", err)
		}
		return
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		s.link(path, "")
		if fi, err = os.Stat(path); err != nil {
			return // a dangling link: reported, nothing to read
		}
	}
	if depth > maxDepth {
		s.add(Finding{Kind: Unreadable, Path: s.rel(path), Value: "too deep", Digest: digest("too deep")})
		return
	}
	if fi.IsDir() {
		real, err := filepath.EvalSymlinks(path)
		if err != nil {
			s.unreadable(path, "", err)
			return
		}
		if s.seenWhole[real] {
			return
		}
		s.seenWhole[real] = true
		entries, err := readDir(path)
		if err != nil {
			s.unreadable(path, "", err)
			return
		}
		for _, e := range entries {
			s.whole(filepath.Join(path, e.Name()), kind, depth+1)
		}
		return
	}
	if !fi.Mode().IsRegular() {
		s.add(Finding{Kind: Unreadable, Path: s.rel(path), Value: "not a regular file: " + fi.Mode().String(), Digest: digest(fi.Mode().String())})
		return
	}
	if kind == RunLater && fi.Size() == 0 {
		// An empty file at a run-later name runs and configures nothing
		// (devbox run's read-only placeholders are such files: the host
		// audit must not stop the next start over them).
		return
	}
	var head []byte
	var sum string
	size := fi.Size()
	key := statKey(fi)
	if c, ok := s.opts.Cache[path]; ok && kind == RunLater && key != "" && strings.HasPrefix(c, key+" ") {
		sum = c[len(key)+1:] // same inode, size, mtime and ctime: same bytes
	} else {
		head, sum, size, err = hashFile(path)
		if err != nil {
			s.unreadable(path, "", err)
			return
		}
	}
	if kind == RunLater && key != "" {
		s.res.Cache[path] = key + " " + sum
	}
	f := Finding{Kind: kind, Path: s.rel(path), Digest: fmt.Sprintf("%s mode:%o", sum, fi.Mode().Perm()), Size: size}
	switch {
	case kind == Hook && fi.Mode().Perm()&0o111 != 0 && !strings.HasSuffix(path, ".sample"):
		// git runs no *.sample; their content is still digested.
		f.Key = filepath.Base(path)
		f.Head = firstLines(head, HeadLines)
	case kind == Hook:
		f.Kind = File
	case kind == Sequencer:
		f.Head = firstLines(head, HeadLines)
	}
	s.add(f)
}

// maxWhole bounds the entries one whole() call digests.
const maxWhole = 20000

// configFile reports the entries git reads from one config file that are
// not Allowed, and audits the files it includes and the hooks directory
// it names. gd is the git directory the file configures.
func (s *scanner) configFile(path, gd string, depth int) {
	if depth > maxIncludeDepth {
		s.add(Finding{Kind: Unreadable, Path: s.rel(path), Value: "includes nested deeper than git follows", Digest: digest("depth")})
		return
	}
	fi, err := os.Lstat(path)
	if err != nil {
		return // git skips a missing include
	}
	if !firstVisit(s.seenFile, path) {
		return
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		s.link(path, "")
	}
	data, total, err := readRegular(path, maxConfig)
	if err == nil && total > maxConfig {
		err = fmt.Errorf("larger than %d bytes", maxConfig)
	}
	if err != nil {
		if !os.IsNotExist(err) {
			s.unreadable(path, "", err)
		}
		return
	}
	entries, rerr := s.cfg.Read(data)
	if rerr != nil {
		// git refuses the file (and dies, running nothing of what follows);
		// fail closed: the user should see what is there.
		s.add(Finding{Kind: Unreadable, Path: s.rel(path), Value: "git refuses it: " + rerr.Error(), Digest: sha256Hex(data)})
	}
	for _, e := range entries {
		if Allowed(e) {
			continue
		}
		v := e.Value
		if e.NoValue {
			v = "(no value: true)"
		}
		s.add(Finding{Kind: Config, Path: s.rel(path), Key: e.Name, Value: v, Digest: digest(e.Name + "=" + v)})
		if e.NoValue || e.Value == "" {
			continue
		}
		section, _, k := splitName(e.Name)
		switch {
		case (section == "include" || section == "includeif") && k == "path":
			if t := s.expandPath(e.Value, filepath.Dir(path)); t != "" {
				s.configFile(t, gd, depth+1)
			}
		case e.Name == "core.hookspath":
			base := gd
			if filepath.Base(gd) == ".git" {
				base = filepath.Dir(gd) // relative to the work tree's top
			}
			// In a global config (gd "") a relative path depends on the
			// repository git runs in: the key itself is the finding.
			if t := s.expandPath(e.Value, base); filepath.IsAbs(t) {
				s.whole(t, Hook, 0)
			}
		}
	}
}

// expandPath resolves a path value the way git's interpolate_path does for
// include.path and core.hooksPath: "~/" is the home directory, a relative
// path is relative to base. "~user/" and "%(prefix)/" are not resolved
// (the key itself is reported).
func (s *scanner) expandPath(v, base string) string {
	if rest, ok := strings.CutPrefix(v, "~/"); ok {
		if s.opts.Home == "" {
			return ""
		}
		return filepath.Join(s.opts.Home, rest)
	}
	if strings.HasPrefix(v, "~") || strings.HasPrefix(v, "%(") {
		return ""
	}
	if filepath.IsAbs(v) {
		return v
	}
	return filepath.Join(base, v)
}

// RunLaterFiles are file names other tools run or obey, watched at any
// depth of the tree in a devbox run audit: shell start-up files, direnv,
// hook runners, agent and editor settings.
var RunLaterFiles = []string{
	".bashrc", ".bash_profile", ".bash_login", ".bash_logout", ".bash_aliases", ".profile",
	".zshrc", ".zprofile", ".zshenv", ".zlogin",
	".gitconfig", ".gitmodules", ".ripgreprc", ".mcp.json", ".claude.json", ".envrc",
	".pre-commit-config.yaml", "lefthook.yml", "lefthook.yaml", ".lefthook.yml", ".lefthook.yaml",
}

// RunLaterDirs are directories whose every file is watched, in a devbox
// run audit: editor and agent settings (tasks, MCP servers, hooks), git
// hook managers, dev container definitions.
var RunLaterDirs = []string{".vscode", ".idea", ".claude", ".cursor", ".gemini", ".husky", ".devcontainer"}

// sitePackagesDir are the names of the directories Python's site module
// reads start-up files from (venvs and pip use site-packages, Debian's
// system Python dist-packages).
var sitePackagesDir = setOf([]string{"site-packages", "dist-packages"})

// sitePackages audits what python runs from a site-packages directory at
// every start, before the program's first line: each *.pth file (site
// executes its lines that start with "import"; the others add paths) and
// sitecustomize/usercustomize, which site imports from anywhere on the
// path (a module, a package, compiled or not: every entry so named). The
// rest of site-packages is code too, but runs only when imported, like
// the workspace's own source files.
func (s *scanner) sitePackages(dir string) {
	entries, err := readDir(dir)
	if err != nil {
		if !os.IsNotExist(err) {
			s.unreadable(dir, "", err)
		}
		return
	}
	for _, e := range entries {
		n, p := e.Name(), filepath.Join(dir, e.Name())
		switch {
		case strings.HasSuffix(n, ".pth") && e.Type().IsRegular() && !pthRuns(p):
		case strings.HasSuffix(n, ".pth") || strings.HasPrefix(n, "sitecustomize") || strings.HasPrefix(n, "usercustomize"):
			s.whole(p, RunLater, 0)
		}
	}
}

// pthRuns reports whether python would run something of the .pth file at
// path (a file it cannot read whole, up to 64 KiB, counts as running):
// site executes the lines that start with "import" and adds the others to
// the path, so a file of paths and comments is data. Two lines the
// packaging tools write are allowed, as they import a module of the same
// site-packages and run nothing else (that module is code, like the rest
// of site-packages, which runs when imported and is not audited):
// setuptools' distutils-precedence.pth, and the finder an editable
// install (pip install -e) puts beside its .pth. Measured: in a venv,
// `pip install .` writes no .pth, `pip install -e .` the finder's.
func pthRuns(path string) bool {
	data, n, err := readRegular(path, 64<<10)
	if err != nil || n > 64<<10 {
		return true
	}
	for _, l := range strings.Split(string(data), "\n") {
		l = strings.TrimSuffix(l, "\r")
		if !strings.HasPrefix(l, "import ") && !strings.HasPrefix(l, "import\t") {
			continue // a path, a comment or a blank line
		}
		if !distutilsShim.MatchString(l) && !editableFinder(l) {
			return true
		}
	}
	return false
}

// distutilsShim is setuptools' distutils-precedence.pth, in its versions
// since 49.
var distutilsShim = regexp.MustCompile(`^import os; var = 'SETUPTOOLS_USE_DISTUTILS'; enabled = os\.environ\.get\(var, '(?:local|stdlib)'\) == 'local'; enabled and __import__\('_distutils_hack'\)\.add_shim\(\); ?$`)

// editableFinderLine is setuptools' editable-install line; the module it
// imports must be the one it calls.
var editableFinderLine = regexp.MustCompile(`^import (__editable___[A-Za-z0-9_]+_finder); (__editable___[A-Za-z0-9_]+_finder)\.install\(\)$`)

func editableFinder(l string) bool {
	m := editableFinderLine.FindStringSubmatch(l)
	return m != nil && m[1] == m[2]
}

var (
	runLaterFile = setOf(RunLaterFiles)
	runLaterDir  = setOf(RunLaterDirs)
)

func setOf(names []string) map[string]bool {
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = true
	}
	return m
}
