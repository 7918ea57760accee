package gitaudit

import (
	"path/filepath"
	"slices"
	"testing"
)

// TestSitePackages: python's start-up files in any site-packages or
// dist-packages of the tree (a venv's), and in the Sites patterns outside
// it (a user site made after the pattern was given), are RunLater
// findings; the other modules there are not.
func TestSitePackages(t *testing.T) {
	root, home := t.TempDir(), t.TempDir()
	for _, p := range []string{
		".venv/lib/python3.11/site-packages/a.pth", ".venv/lib/python3.11/site-packages/sitecustomize.py",
		"x/dist-packages/usercustomize/__init__.py", ".venv/lib/python3.11/site-packages/mod.py",
	} {
		write(t, filepath.Join(root, p), "import os\n", 0o644)
	}
	write(t, filepath.Join(home, ".local/lib/python3.12/site-packages/u.pth"), "import os\n", 0o644)
	write(t, filepath.Join(home, ".local/lib/python3.12/site-packages/mod.py"), "x = 1\n", 0o644)
	r, err := ScanWith(root, Options{RunLater: true, Home: home, Sites: []string{filepath.Join(home, ".local/lib/python3*/site-packages")}})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{".venv/lib/python3.11/site-packages/a.pth", ".venv/lib/python3.11/site-packages/sitecustomize.py",
		"x/dist-packages/usercustomize/__init__.py", filepath.Join(home, ".local/lib/python3.12/site-packages/u.pth")} {
		if find(r, RunLater, p, "") == nil {
			t.Errorf("%s not found: %+v", p, r.Findings)
		}
	}
	for _, p := range []string{".venv/lib/python3.11/site-packages/mod.py", filepath.Join(home, ".local/lib/python3.12/site-packages/mod.py")} {
		if find(r, RunLater, p, "") != nil {
			t.Errorf("%s is an ordinary module, reported", p)
		}
	}
}

// TestIncludedConfigs: the files a global config includes, through one
// another and whatever includeIf's condition, missing ones too, and the
// keys git reads in them once audited (GitConfigs).
func TestIncludedConfigs(t *testing.T) {
	needGit(t)
	home := t.TempDir()
	write(t, filepath.Join(home, ".gitconfig"), "[include]\n\tpath = ~/.gitconfig.local\n[includeIf \"gitdir:~/work/\"]\n\tpath = work.cfg\n", 0o644)
	write(t, filepath.Join(home, "work.cfg"), "[include]\n\tpath = /nonexistent/deeper.cfg\n", 0o644)
	got, err := IncludedConfigs([]string{filepath.Join(home, ".gitconfig"), filepath.Join(home, ".config/git/config")}, home, "")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{filepath.Join(home, ".gitconfig.local"), filepath.Join(home, "work.cfg"), "/nonexistent/deeper.cfg"}
	if !slices.Equal(got, want) {
		t.Errorf("IncludedConfigs = %q, want %q", got, want)
	}
	write(t, filepath.Join(home, ".gitconfig.local"), "[user]\n\temail = a@x.test\n[alias]\n\tx = !evil\n", 0o644)
	r, err := ScanWith(t.TempDir(), Options{RunLater: true, Home: home, GitConfigs: got})
	if err != nil {
		t.Fatal(err)
	}
	if find(r, Config, filepath.Join(home, ".gitconfig.local"), "alias.x") == nil || find(r, Config, filepath.Join(home, ".gitconfig.local"), "user.email") != nil {
		t.Errorf("the included file's keys: %+v", r.Findings)
	}
}

// TestPthRuns: a .pth file of paths is data, and so are the two import
// lines the packaging tools write; any other import line runs.
func TestPthRuns(t *testing.T) {
	dir := t.TempDir()
	for content, want := range map[string]bool{
		"/src/app\n# comment\n\n": false,
		"import os; var = 'SETUPTOOLS_USE_DISTUTILS'; enabled = os.environ.get(var, 'local') == 'local'; enabled and __import__('_distutils_hack').add_shim(); \n": false,
		"import __editable___pyapp_0_1_finder; __editable___pyapp_0_1_finder.install()":                                                                            false,
		"import __editable___pyapp_0_1_finder; __editable___evil_finder.install()":                                                                                 true,
		"/src/app\nimport os; os.system('evil')\n":                                                                                                                 true,
		"import\tevil\n": true,
		"import os; var = 'SETUPTOOLS_USE_DISTUTILS'; enabled = os.environ.get(var, 'local') == 'local'; enabled and __import__('evil').add_shim(); \n": true,
	} {
		p := filepath.Join(dir, "x.pth")
		write(t, p, content, 0o644)
		if got := pthRuns(p); got != want {
			t.Errorf("pthRuns(%q) = %v, want %v", content, got, want)
		}
	}
}
