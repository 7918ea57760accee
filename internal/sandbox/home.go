package sandbox

import (
	"path"
	"path/filepath"
	"strings"

	"github.com/devbox-dev/devbox/internal/gitaudit"
)

// The home's run-later places outside PATH: files a program started later,
// outside the sandbox, loads and runs. None is writable unless the policy
// makes it so (allowWrite; a toolchain cache alone does not, see
// CacheRunLater), and whatever a run can write of them, the run-end audit
// watches (Watched).

// HomeRunLater are files and directories of the home, relative to it,
// digested whole by the run-end audit when the sandbox leaves them
// writable: Debian's .bashrc sources .bash_aliases (and other
// distributions' .bashrc.d), npm obeys .npmrc (script-shell,
// node-options), `npx X` runs a package cached in .npm/_npx without
// fetching it again, pre-commit runs the hook environments it keeps in
// .cache/pre-commit, Claude Code starts the MCP servers of .claude.json
// (~/.claude.json, or in CLAUDE_CONFIG_DIR, ~/.claude in devbox's images).
var HomeRunLater = []string{
	".bash_aliases", ".bashrc.d", ".npmrc",
	".npm/_npx", ".cache/pre-commit",
	".claude.json", ".claude/.claude.json",
}

// CacheRunLater are the parts of ToolchainCaches that hold programs run
// later (npx's packages, pre-commit's hook environments): read-only like
// the mandatory list, unless allowWrite names them or a directory above
// them (the node example's "~/.npm" does). A missing one gets an empty
// placeholder directory when its cache exists, so it cannot be created.
var CacheRunLater = []string{"~/.npm/_npx", "~/.cache/pre-commit"}

// HomeStateRunLater are files of the home a program keeps its own state
// in, between its starts, and runs from: read-only in every run when they
// exist, since their owner rewrites them outside the sandbox all the time
// (an audit would report its writes at every run). No placeholder is made
// when they are missing (an empty file is not a state Claude Code
// accepts); a missing one that the sandbox leaves writable is watched
// (HomeRunLater), and one created in a run is reported.
var HomeStateRunLater = []string{".claude.json", ".claude/.claude.json"}

// HomeSites are the Python site-packages directories of the home
// (patterns, relative to it) whose start-up files (.pth,
// sitecustomize, usercustomize) the run-end audit watches when the
// sandbox leaves them writable: the user site (pip install --user), and
// the virtual environments pipx, pipenv, virtualenvwrapper, pyenv and a
// venv in the home keep. Those in the workspace are found by name.
var HomeSites = []string{
	".local/lib/python3*/site-packages",
	".local/share/pipx/venvs/*/lib/python3*/site-packages",
	".local/share/virtualenvs/*/lib/python3*/site-packages",
	".virtualenvs/*/lib/python3*/site-packages",
	".venv/lib/python3*/site-packages",
	".venvs/*/lib/python3*/site-packages",
	".pyenv/versions/*/lib/python3*/site-packages",
}

// globalGitConfigs are the user's and the system's git config files,
// relative to the home or absolute: read-only in every run (mandatory
// list, or the read-only root), but what they include may not be.
var globalGitConfigs = []string{".gitconfig", ".config/git/config", "/etc/gitconfig"}

// Watched are the places outside the workspace the run-end audit covers,
// absolute: see gitaudit.Options (Watch, Sites, GitConfigs).
type Watched struct {
	Paths      []string
	Sites      []string
	GitConfigs []string
}

// WatchedBy returns what of the home's run-later places, the directories
// of the PATH list and the files the global git config includes a
// sandboxed command of spec could write.
func WatchedBy(spec Spec, home, pathList string) (Watched, error) {
	w := Watched{Paths: WritablePath(spec, pathList)}
	for _, rel := range HomeRunLater {
		if p := filepath.Join(home, rel); spec.CanWrite(p) {
			w.Paths = append(w.Paths, p)
		}
	}
	for _, rel := range HomeSites {
		if pattern, ok := writablePattern(spec, home, rel); ok {
			w.Sites = append(w.Sites, pattern)
		}
	}
	var globals []string
	for _, g := range globalGitConfigs {
		if !filepath.IsAbs(g) {
			g = filepath.Join(home, g)
		}
		globals = append(globals, g)
	}
	inc, err := gitaudit.IncludedConfigs(globals, home, "")
	if err != nil {
		return Watched{}, err
	}
	for _, c := range inc {
		if spec.CanWrite(c) {
			w.GitConfigs = append(w.GitConfigs, c)
		}
	}
	return w, nil
}

// writablePattern returns the absolute pattern of rel (a pattern relative
// to home) and whether a command of spec could write a path it matches:
// where its fixed part is writable (it can make new matches), or at a
// match that exists.
func writablePattern(spec Spec, home, rel string) (string, bool) {
	fixed := rel
	for strings.ContainsAny(fixed, "*?[") {
		fixed = path.Dir(fixed)
	}
	pattern := filepath.Join(globEscape(home), rel)
	if spec.CanWrite(filepath.Join(home, fixed)) {
		return pattern, true
	}
	matches, _ := filepath.Glob(pattern)
	for _, m := range matches {
		if spec.CanWrite(m) {
			return pattern, true
		}
	}
	return pattern, false
}

// globEscape quotes the pattern characters of a literal path.
func globEscape(p string) string {
	var b strings.Builder
	for _, r := range p {
		if strings.ContainsRune(`*?[\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}
