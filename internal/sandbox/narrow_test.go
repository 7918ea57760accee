package sandbox

import (
	"strings"
	"testing"
)

// TestNarrows: the cases a text comparison of the lists accepted and the
// plans refuse. Each repository list lies textually within the baseline's;
// the plan, resolved the way devbox run resolves it, does not.
func TestNarrows(t *testing.T) {
	fsys := mapFS{
		"/home/dev/.local/bin":      "dir",
		"/home/dev/.bashrc":         "file",
		"/opt/cache/go":             "dir",
		"/opt/cache/bin":            "-> /home/dev/.local/bin",
		"/work/app/locked.txt":      "file",
		"/work/app/src/main.go":     "file",
		"/work/app/.git/config":     "file",
		"/work/app/.git/HEAD":       "file",
		"/opt/cache/go/pkg/mod/a.x": "file",
	}
	base := Config{Home: "/home/dev", Workspace: "/work/app", Command: []string{"true"},
		AllowWrite: []string{"/opt/cache"}, DenyWrite: []string{"locked.txt"}, DenyRead: []string{"~/.ssh"}}
	plan := func(c Config) Spec {
		t.Helper()
		s, err := Plan(c, fsys)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	ceiling := plan(base)
	with := func(f func(*Config)) Config {
		c := base
		c.AllowWrite = append([]string(nil), base.AllowWrite...)
		c.DenyWrite = append([]string(nil), base.DenyWrite...)
		f(&c)
		return c
	}
	for _, tc := range []struct {
		name string
		repo Config
		want string // "" when it narrows
	}{
		{"same", base, ""},
		{"narrower root", with(func(c *Config) { c.AllowWrite = []string{"/opt/cache/go"} }), ""},
		{"root through a link leaving it", with(func(c *Config) { c.AllowWrite = []string{"/opt/cache/bin"} }), "/home/dev/.local/bin would be writable"},
		{"glob through a link", with(func(c *Config) { c.AllowWrite = []string{"/opt/cache/*"} }), "/home/dev/.local/bin would be writable"},
		{"deny of / under the workspace's bind", with(func(c *Config) { c.DenyWrite = []string{"/"} }), "/work/app/locked.txt would be writable"},
		{"deny of the workspace's parent", with(func(c *Config) { c.DenyWrite = []string{"/work/app/.."} }), "/work/app/locked.txt would be writable"},
		{"deny kept deeper", with(func(c *Config) { c.DenyWrite = []string{"locked.txt", "src"} }), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Narrows(plan(tc.repo), ceiling)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("Narrows = %v; want %q", err, tc.want)
			}
		})
	}
}

// TestDenyWriteRootKeepsMandatory: a denyWrite of "/" made every missing
// mandatory path in the workspace look "already protected" (below an
// existing protected path), so no placeholder was mounted and the
// workspace's bind, deeper than "/", left them creatable.
func TestDenyWriteRootKeepsMandatory(t *testing.T) {
	fsys := mapFS{"/home/dev/.bashrc": "file", "/work/app/main.go": "file"}
	s, err := Plan(Config{Home: "/home/dev", Workspace: "/work/app", Command: []string{"true"}, DenyWrite: []string{"/"}}, fsys)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/work/app/.bash_profile", "/work/app/.git/hooks", "/home/dev/.bashrc"} {
		if a := s.Access(p); a == Writable {
			t.Errorf("%s is %s with denyWrite [\"/\"]", p, a)
		}
	}
}
