package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/devbox-dev/devbox/internal/golden"
	"github.com/devbox-dev/devbox/internal/policy"
)

// mapFS is a fixed tree for golden tests: each key is an absolute path and
// its value "dir", "file" or "-> target" for a symlink. Parents are implied.
type mapFS map[string]string

func (m mapFS) Lstat(name string) (Kind, error) {
	if name == "/" {
		return Dir, nil
	}
	if v, ok := m[name]; ok {
		switch {
		case v == "dir":
			return Dir, nil
		case v == "file":
			return File, nil
		case strings.HasPrefix(v, "-> "):
			return Symlink, nil
		}
		return Missing, fmt.Errorf("mapFS: bad entry %q: %q", name, v)
	}
	for k := range m {
		if strings.HasPrefix(k, name+"/") {
			return Dir, nil
		}
	}
	return Missing, nil
}

func (m mapFS) Readlink(name string) (string, error) {
	v := m[name]
	if !strings.HasPrefix(v, "-> ") {
		return "", fmt.Errorf("mapFS: %s is not a symlink", name)
	}
	return strings.TrimPrefix(v, "-> "), nil
}

func (m mapFS) ReadDir(name string) ([]string, error) {
	set := map[string]bool{}
	prefix := strings.TrimSuffix(name, "/") + "/"
	for k := range m {
		if rest, ok := strings.CutPrefix(k, prefix); ok {
			set[strings.Split(rest, "/")[0]] = true
		}
	}
	var out []string
	for n := range set {
		out = append(out, n)
	}
	sort.Strings(out)
	return out, nil
}

// goldenCase is one testdata/*.json input: a Config and the tree it is
// planned against.
type goldenCase struct {
	Config Config `json:"config"`
	FS     mapFS  `json:"fs"`
}

// render is the golden form of a plan: the bwrap argv one argument per line,
// then the placeholders and notes.
func render(spec Spec, err error) string {
	if err != nil {
		return "error: " + err.Error() + "\n"
	}
	var b strings.Builder
	b.WriteString("bwrap")
	for _, a := range Args(spec) {
		if strings.HasPrefix(a, "--") {
			b.WriteString("\n")
		} else {
			b.WriteString(" ")
		}
		b.WriteString(a)
	}
	b.WriteString("\n")
	for _, m := range spec.Mounts {
		if m.Placeholder != Missing {
			kind := "file"
			if m.Placeholder == Dir {
				kind = "dir"
			}
			fmt.Fprintf(&b, "# placeholder %s %s\n", kind, m.Path)
		}
	}
	for _, n := range spec.Notes {
		fmt.Fprintf(&b, "# note: %s\n", n)
	}
	return b.String()
}

func TestPlanGolden(t *testing.T) {
	golden.ForEach(t, "testdata/*.json", func(t *testing.T, in, _ string) {
		raw, err := os.ReadFile(in)
		if err != nil {
			t.Fatal(err)
		}
		var c goldenCase
		dec := json.NewDecoder(strings.NewReader(string(raw)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&c); err != nil {
			t.Fatalf("%s: %v", in, err)
		}
		got := render(Plan(c.Config, c.FS))
		golden.Check(t, strings.TrimSuffix(in, ".json")+".golden", []byte(got))
	})
}

func TestResolve(t *testing.T) {
	fsys := mapFS{
		"/a/b":        "dir",
		"/a/l":        "-> b",
		"/a/abs":      "-> /a/b/c",
		"/a/b/c":      "file",
		"/loop":       "-> /loop",
		"/a/b/up":     "-> ../l",
		"/f":          "file",
		"/chain/one":  "-> two",
		"/chain/two":  "-> /a/l",
		"/dangling/x": "-> /nowhere/y",
	}
	tests := []struct {
		in    string
		real  string
		kind  Kind
		links int
		err   bool
	}{
		{in: "/a/b", real: "/a/b", kind: Dir},
		{in: "/a/l", real: "/a/b", kind: Dir, links: 1},
		{in: "/a/l/c", real: "/a/b/c", kind: File, links: 1},
		{in: "/a/abs", real: "/a/b/c", kind: File, links: 1},
		{in: "/a/l/new/deeper", real: "/a/b/new/deeper", kind: Missing, links: 1},
		{in: "/a/b/up/c", real: "/a/b/c", kind: File, links: 2},
		{in: "/chain/one", real: "/a/b", kind: Dir, links: 3},
		{in: "/dangling/x", real: "/nowhere/y", kind: Missing, links: 1},
		{in: "/f/x", real: "/f/x", kind: Missing},
		{in: "/loop", err: true},
	}
	for _, tt := range tests {
		r, err := resolve(fsys, tt.in)
		if tt.err {
			if err == nil {
				t.Errorf("resolve(%s) = %+v, want an error", tt.in, r)
			}
			continue
		}
		if err != nil {
			t.Errorf("resolve(%s): %v", tt.in, err)
			continue
		}
		if r.Real != tt.real || r.Kind != tt.kind || len(r.Links) != tt.links {
			t.Errorf("resolve(%s) = %+v, want real %s kind %d links %d", tt.in, r, tt.real, tt.kind, tt.links)
		}
	}
}

func TestPlanErrors(t *testing.T) {
	fsys := mapFS{"/home/dev": "dir", "/w": "dir", "/file": "file"}
	base := Config{Home: "/home/dev", Workspace: "/w", Command: []string{"true"}}
	tests := []struct {
		name   string
		change func(*Config)
		want   string
	}{
		{"no command", func(c *Config) { c.Command = nil }, "no command"},
		{"relative home", func(c *Config) { c.Home = "home" }, "home \"home\" is not an absolute path"},
		{"workspace not a dir", func(c *Config) { c.Workspace = "/file" }, "workspace /file is not a directory"},
		{"deny read hides workspace", func(c *Config) { c.DenyRead = []string{"/"} }, "hides the workspace"},
		{"bad glob", func(c *Config) { c.DenyRead = []string{"/w/[x"} }, "bad pattern"},
	}
	for _, tt := range tests {
		c := base
		tt.change(&c)
		_, err := Plan(c, fsys)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: Plan error = %v, want it to contain %q", tt.name, err, tt.want)
		}
	}
}

func TestPlanReplaceableLink(t *testing.T) {
	fsys := mapFS{"/home/dev": "dir", "/w/.git": "dir", "/w/.git/hooks": "-> /w/myhooks", "/w/myhooks": "dir"}
	_, err := Plan(Config{Home: "/home/dev", Workspace: "/w", Command: []string{"true"}}, fsys)
	if !errors.Is(err, ErrReplaceableLink) {
		t.Fatalf("Plan with .git/hooks a symlink in the workspace: err = %v, want ErrReplaceableLink", err)
	}
}

func TestGlob(t *testing.T) {
	fsys := mapFS{
		"/w/.env": "file", "/w/.env.local": "file", "/w/a/.env": "file", "/w/a/b/.env": "file",
		"/w/node_modules/x/.env": "file", "/w/.git/.env": "file", "/w/envy": "file",
	}
	tests := []struct {
		pattern string
		want    []string
	}{
		{"/w/.env*", []string{"/w/.env", "/w/.env.local"}},
		{"/w/**/.env", []string{"/w/.env", "/w/a/.env", "/w/a/b/.env"}},
		{"/w/*/.env", []string{"/w/.git/.env", "/w/a/.env"}},
		{"/w/nothing*", nil},
	}
	for _, tt := range tests {
		got, err := glob(fsys, tt.pattern)
		if err != nil {
			t.Errorf("glob(%s): %v", tt.pattern, err)
			continue
		}
		sort.Strings(got)
		if strings.Join(got, " ") != strings.Join(tt.want, " ") {
			t.Errorf("glob(%s) = %v, want %v", tt.pattern, got, tt.want)
		}
	}
}

// The mapFS and the real filesystem must agree on what they report.
func TestOSFS(t *testing.T) {
	dir := t.TempDir()
	os.Mkdir(path.Join(dir, "d"), 0o755)
	os.WriteFile(path.Join(dir, "f"), nil, 0o644)
	os.Symlink("d", path.Join(dir, "l"))
	for name, want := range map[string]Kind{"d": Dir, "f": File, "l": Symlink, "none": Missing, "f/x": Missing} {
		got, err := OSFS{}.Lstat(path.Join(dir, name))
		if err != nil || got != want {
			t.Errorf("Lstat(%s) = %d, %v; want %d", name, got, err, want)
		}
	}
	r, err := resolve(OSFS{}, path.Join(dir, "l/new"))
	if err != nil || r.Real != path.Join(dir, "d/new") || r.Kind != Missing {
		t.Errorf("resolve(l/new) = %+v, %v", r, err)
	}
}

// The toolchain caches the base has are writable; those it lacks are left
// out without a note (a Node image has no /go), unlike a missing allowWrite.
func TestPlanToolchainCaches(t *testing.T) {
	fsys := mapFS{"/home/dev/.npm": "dir", "/home/dev/.cache": "dir", "/home/dev/.ssh": "dir", "/w": "dir"}
	cfg := ConfigFromPolicy(policy.Sandbox{}, "/home/dev", "/w", []string{"true"})
	sp, err := Plan(cfg, fsys)
	if err != nil {
		t.Fatal(err)
	}
	writable := map[string]bool{}
	for _, m := range sp.Mounts {
		if m.Op == Bind {
			writable[m.Path] = true
		}
	}
	for _, p := range []string{"/home/dev/.npm", "/home/dev/.cache", "/w"} {
		if !writable[p] {
			t.Errorf("%s is not writable; binds: %v", p, writable)
		}
	}
	for _, p := range []string{"/home/dev/go", "/go", "/home/dev/.ssh", "/home/dev"} {
		if writable[p] {
			t.Errorf("%s is writable, want not", p)
		}
	}
	for _, n := range sp.Notes {
		if strings.Contains(n, "/go") {
			t.Errorf("note about a missing cache: %q", n)
		}
	}
}

// A cache's run-later parts are read-only (placeholders when missing)
// unless allowWrite covers them; Claude Code's state is read-only when it
// exists, even in a writable home, and left alone when missing.
func TestPlanCacheRunLater(t *testing.T) {
	fsys := mapFS{"/home/dev/.npm": "dir", "/home/dev/.cache": "dir", "/home/dev/.claude.json": "file", "/w": "dir"}
	for _, tc := range []struct {
		allow []string
		want  map[string]Access
	}{
		{nil, map[string]Access{"/home/dev/.npm/_npx/x": Readable, "/home/dev/.cache/pre-commit": Readable, "/home/dev/.npm/_cacache": Writable,
			"/home/dev/.claude.json": Readable}},
		{[]string{"~/.npm"}, map[string]Access{"/home/dev/.npm/_npx/x": Writable, "/home/dev/.cache/pre-commit": Readable}},
		{[]string{"~"}, map[string]Access{"/home/dev/.npm/_npx/x": Writable, "/home/dev/.cache/pre-commit/y": Writable,
			"/home/dev/.claude.json": Readable, "/home/dev/.claude/.claude.json": Writable}},
	} {
		cfg := ConfigFromPolicy(policy.Sandbox{AllowWrite: tc.allow}, "/home/dev", "/w", []string{"true"})
		sp, err := Plan(cfg, fsys)
		if err != nil {
			t.Fatal(err)
		}
		for p, want := range tc.want {
			if got := sp.Access(p); got != want {
				t.Errorf("allowWrite %q: %s is %v, want %v", tc.allow, p, got, want)
			}
		}
		for _, m := range sp.Mounts {
			if m.Path == "/home/dev/.claude/.claude.json" || m.Path == "/home/dev/.claude.json" && m.Placeholder != Missing {
				t.Errorf("allowWrite %q: a mount or placeholder for Claude Code's state: %+v", tc.allow, m)
			}
		}
	}
}

// WatchedBy watches the home's run-later places a command can write: with
// the home writable, the user site's pattern, the files of HomeRunLater;
// with the default policy, none. (The home is outside /tmp, which every
// run may write.)
func TestWatchedBy(t *testing.T) {
	home, err := os.MkdirTemp("/var/tmp", "devbox-watched-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(home) })
	os.MkdirAll(filepath.Join(home, ".npm"), 0o755)
	ws := filepath.Join(home, "ws")
	os.MkdirAll(ws, 0o755)
	for _, tc := range []struct {
		allow []string
		sites int
		paths []string
	}{
		{nil, 0, nil},
		{[]string{"~"}, len(HomeSites), []string{filepath.Join(home, ".bash_aliases"), filepath.Join(home, ".npm/_npx")}},
	} {
		sp, err := Plan(ConfigFromPolicy(policy.Sandbox{AllowWrite: tc.allow}, home, ws, []string{"true"}), OSFS{})
		if err != nil {
			t.Fatal(err)
		}
		w, err := WatchedBy(sp, home, "")
		if err != nil {
			t.Fatal(err)
		}
		if len(w.Sites) != tc.sites || len(tc.paths) == 0 && len(w.Paths) != 0 {
			t.Errorf("allowWrite %q: %+v", tc.allow, w)
		}
		for _, p := range tc.paths {
			if !slices.Contains(w.Paths, p) {
				t.Errorf("allowWrite %q: %s not watched: %+v", tc.allow, p, w.Paths)
			}
		}
		if tc.sites > 0 {
			site := filepath.Join(home, ".local/lib/python3.11/site-packages")
			os.MkdirAll(site, 0o755)
			if m, _ := filepath.Glob(w.Sites[0]); len(m) != 1 || m[0] != site {
				t.Errorf("the user site's pattern %q matches %q, want %s", w.Sites[0], m, site)
			}
		}
	}
}

func TestGlobEscape(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a[1]*?")
	os.MkdirAll(filepath.Join(dir, "x1"), 0o755)
	if m, _ := filepath.Glob(filepath.Join(globEscape(dir), "x*")); len(m) != 1 || m[0] != filepath.Join(dir, "x1") {
		t.Errorf("escaped pattern matches %q", m)
	}
}
