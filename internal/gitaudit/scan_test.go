package gitaudit

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/devbox-dev/devbox/internal/devboxtest"
)

// bareRepo makes the smallest directory git takes for a repository:
// HEAD, objects/ and refs/, plus a config.
func bareRepo(t *testing.T, dir, config string) {
	t.Helper()
	for _, d := range []string{"objects", "refs/heads", "hooks"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write(t, filepath.Join(dir, "HEAD"), "ref: refs/heads/main\n", 0o644)
	write(t, filepath.Join(dir, "config"), config, 0o644)
}

func write(t *testing.T, path, data string, mode os.FileMode) {
	t.Helper()
	os.MkdirAll(filepath.Dir(path), 0o755)
	if err := os.WriteFile(path, []byte(data), mode); err != nil {
		t.Fatal(err)
	}
	os.Chmod(path, mode)
}

func scan(t testing.TB, root string) *Result {
	t.Helper()
	r, err := Scan(root)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func find(r *Result, kind Kind, path, key string) *Finding {
	for i, f := range r.Findings {
		if f.Kind == kind && f.Path == path && (key == "" || f.Key == key) {
			return &r.Findings[i]
		}
	}
	return nil
}

// TestConfigWorktree: a worktree's config.worktree is read when
// extensions.worktreeConfig is on; it is audited like config.
func TestConfigWorktree(t *testing.T) {
	root := t.TempDir()
	bareRepo(t, filepath.Join(root, ".git"), "[extensions]\n\tworktreeConfig = true\n")
	write(t, filepath.Join(root, ".git/config.worktree"), "[core]\n\tfsmonitor = evil\n", 0o644)
	wt := filepath.Join(root, ".git/worktrees/wt")
	write(t, filepath.Join(wt, "HEAD"), "ref: refs/heads/wt\n", 0o644)
	write(t, filepath.Join(wt, "commondir"), "../..\n", 0o644)
	write(t, filepath.Join(wt, "config.worktree"), "[core]\n\tpager = evil\n", 0o644)
	r := scan(t, root)
	for _, want := range []struct{ path, key string }{
		{".git/config.worktree", "core.fsmonitor"},
		{".git/worktrees/wt/config.worktree", "core.pager"},
		{".git/config", "extensions.worktreeconfig"},
	} {
		if find(r, Config, want.path, want.key) == nil {
			t.Errorf("%s %s not reported: %+v", want.path, want.key, r.Findings)
		}
	}
	if find(r, GitDir, ".git/worktrees/wt", "") == nil || find(r, GitLink, ".git/worktrees/wt/commondir", "") == nil {
		t.Errorf("worktree admin dir or its commondir not reported: %+v", r.Findings)
	}
	for _, p := range []string{".git/config.worktree", ".git/worktrees/wt/config.worktree"} {
		if !contains(r.ReadOnly, p) {
			t.Errorf("ReadOnly %q lacks %s", r.ReadOnly, p)
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// TestHooks: executable hooks are reported with their first lines; samples
// and files git would not run are not; links are reported with their
// target; a FIFO does not block the audit.
func TestHooks(t *testing.T) {
	root := t.TempDir()
	gd := filepath.Join(root, ".git/modules/lib")
	bareRepo(t, gd, "")
	write(t, filepath.Join(gd, "hooks/post-checkout"), "#!/bin/sh\ntouch /tmp/marker\n", 0o755)
	write(t, filepath.Join(gd, "hooks/pre-commit.sample"), "#!/bin/sh\n", 0o755)
	write(t, filepath.Join(gd, "hooks/pre-push"), "#!/bin/sh\n", 0o644) // not executable
	write(t, filepath.Join(root, "evil.sh"), "#!/bin/sh\necho evil\n", 0o755)
	os.Symlink("../../../../evil.sh", filepath.Join(gd, "hooks/post-merge"))
	if err := syscall.Mkfifo(filepath.Join(gd, "hooks/pre-rebase"), 0o755); err != nil {
		t.Fatal(err)
	}
	done := make(chan *Result)
	go func() { r, _ := Scan(root); done <- r }()
	var r *Result
	select {
	case r = <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("Scan blocked (on the FIFO?)")
	}
	h := find(r, Hook, ".git/modules/lib/hooks/post-checkout", "")
	if h == nil || h.Size != 28 || !reflect.DeepEqual(h.Head, []string{"#!/bin/sh", "touch /tmp/marker"}) {
		t.Errorf("post-checkout: %+v", h)
	}
	if find(r, Hook, ".git/modules/lib/hooks/pre-commit.sample", "") != nil || find(r, Hook, ".git/modules/lib/hooks/pre-push", "") != nil {
		t.Errorf("a sample or a non-executable hook reported: %+v", r.Findings)
	}
	if l := find(r, Symlink, ".git/modules/lib/hooks/post-merge", ""); l == nil || l.Value != "../../../../evil.sh" {
		t.Errorf("linked hook: %+v", l)
	}
	if find(r, Hook, ".git/modules/lib/hooks/post-merge", "") == nil {
		t.Errorf("the linked hook's target is not hashed: %+v", r.Findings)
	}
	if find(r, Unreadable, ".git/modules/lib/hooks/pre-rebase", "") == nil {
		t.Errorf("FIFO hook not reported: %+v", r.Findings)
	}
	if !contains(r.ReadOnly, ".git/modules/lib/hooks") || !contains(r.ReadOnly, ".git/modules/lib/config") {
		t.Errorf("ReadOnly = %q", r.ReadOnly)
	}
}

// TestLayouts builds the layouts git makes with git itself: a submodule, a
// worktree, a nested repository, a bare repository, and a gitfile pointing
// out of the workspace.
func TestLayouts(t *testing.T) {
	git := needGit(t)
	base := t.TempDir()
	root := filepath.Join(base, "ws")
	sub := filepath.Join(base, "libsrc")
	g := func(dir string, args ...string) {
		t.Helper()
		cmd := exec.Command(git, append([]string{"-c", "protocol.file.allow=always", "-c", "user.name=t", "-c", "user.email=t@x.test", "-c", "init.defaultBranch=main"}, args...)...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	os.MkdirAll(root, 0o755)
	os.MkdirAll(sub, 0o755)
	g(sub, "init", "-q")
	g(sub, "commit", "-q", "--allow-empty", "-m", "lib")
	g(root, "init", "-q")
	g(root, "commit", "-q", "--allow-empty", "-m", "root")
	g(root, "submodule", "-q", "add", sub, "lib")
	g(root, "worktree", "add", "-q", "wt")
	os.MkdirAll(filepath.Join(root, "vendor/x"), 0o755)
	g(filepath.Join(root, "vendor/x"), "init", "-q")
	g(root, "init", "-q", "--bare", "store.git")
	outside := filepath.Join(base, "elsewhere")
	os.MkdirAll(outside, 0o755)
	g(outside, "init", "-q")
	write(t, filepath.Join(root, "linked/.git"), "gitdir: "+filepath.Join(outside, ".git")+"\n", 0o644)

	r := scan(t, root)
	want := []string{".git", ".git/modules/lib", ".git/worktrees/wt", filepath.Join(outside, ".git"), "store.git", "vendor/x/.git"}
	if !reflect.DeepEqual(r.GitDirs, want) {
		t.Errorf("GitDirs = %q, want %q", r.GitDirs, want)
	}
	for _, p := range []string{"lib/.git", "wt/.git", "linked/.git", ".git/worktrees/wt/commondir"} {
		if find(r, GitLink, p, "") == nil {
			t.Errorf("gitlink %s not reported", p)
		}
	}
	for _, p := range []string{".git/hooks", ".git/config", ".git/modules/lib/hooks", ".git/modules/lib/config", "vendor/x/.git/hooks", "vendor/x/.git/config", "store.git/hooks", "store.git/config"} {
		if !contains(r.ReadOnly, p) {
			t.Errorf("ReadOnly %q lacks %s", r.ReadOnly, p)
		}
	}
	for _, p := range r.ReadOnly {
		if filepath.IsAbs(p) {
			t.Errorf("ReadOnly has a path outside the workspace: %s", p)
		}
	}
	// git's own sample hooks are not findings; git init's config has no
	// dangerous key: fresh repositories audit clean but for their
	// directories, links and the submodule's core.worktree.
	if find(r, Config, ".git/modules/lib/config", "core.worktree") == nil {
		t.Errorf("the submodule's core.worktree is not reported")
	}
	for _, f := range r.Findings {
		if f.Kind == Hook || f.Kind == Config && f.Key != "core.worktree" || f.Kind == Unreadable {
			t.Errorf("unexpected finding in fresh repositories: %+v", f)
		}
	}
}

// TestIncludes: an include is followed (relative to the including file)
// and the keys of the included file are reported; include loops end.
func TestIncludes(t *testing.T) {
	root := t.TempDir()
	bareRepo(t, filepath.Join(root, "a/.git"), "[include]\n\tpath = ../../inc.cfg\n")
	write(t, filepath.Join(root, "inc.cfg"), "[core]\n\tpager = evil\n[include]\n\tpath = inc.cfg\n", 0o644)
	r := scan(t, root)
	if find(r, Config, "a/.git/config", "include.path") == nil || find(r, Config, "inc.cfg", "core.pager") == nil {
		t.Errorf("include not followed: %+v", r.Findings)
	}
}

// TestAuditRunsNothing plants everything that makes host git run a
// program, each pointing at a command that would create a marker file,
// then runs the whole audit (scan, compare, report, accept, JSON): the
// marker must not exist.
func TestAuditRunsNothing(t *testing.T) {
	root := t.TempDir()
	marker := filepath.Join(t.TempDir(), "marker")
	cmd := "touch " + marker
	cfg := strings.Join([]string{
		"[core]", "\tfsmonitor = " + cmd, "\tpager = " + cmd, "\teditor = " + cmd, "\tsshCommand = " + cmd,
		"\thooksPath = hooks2", "\taskPass = " + cmd,
		"[filter \"f\"]", "\tsmudge = " + cmd, "\tclean = " + cmd, "\tprocess = " + cmd,
		"[diff \"d\"]", "\ttextconv = " + cmd,
		"[credential]", "\thelper = !" + cmd,
		"[include]", "\tpath = /dev/stdin", "\tpath = ../fifo",
		"[alias]", "\tst = !" + cmd,
	}, "\n")
	for _, gd := range []string{".git", "vendor/x/.git", ".git/modules/lib"} {
		bareRepo(t, filepath.Join(root, gd), cfg)
		for _, h := range []string{"post-checkout", "pre-commit", "fsmonitor-watchman", "post-index-change", "reference-transaction"} {
			write(t, filepath.Join(root, gd, "hooks", h), "#!/bin/sh\n"+cmd+"\n", 0o755)
		}
	}
	syscall.Mkfifo(filepath.Join(root, "vendor/x/fifo"), 0o644)
	write(t, filepath.Join(root, ".gitattributes"), "* filter=f diff=d\n", 0o644)
	write(t, filepath.Join(root, "file.txt"), "x\n", 0o644)

	dir := t.TempDir()
	t.Setenv("XDG_STATE_HOME", dir)
	done := make(chan struct{})
	go func() {
		defer close(done)
		r, err := Scan(root)
		if err != nil {
			t.Error(err)
			return
		}
		d := Compare(nil, r)
		var b bytes.Buffer
		d.WriteText(&b)
		json.NewEncoder(&b).Encode(d)
		sd, _ := StateDir()
		r.State(time.Now()).Save(StatePath(sd, r.Root))
		if d.OK() || len(d.Changes) < 3*(1+5+11) {
			t.Errorf("the audit missed planted entries: %d changes\n%s", len(d.Changes), b.String())
		}
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the audit blocked")
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the audit ran a planted command: the marker exists")
	}
}

// TestCompare: accepted findings pass; a changed hook, a new key and a new
// repository fail; a removed one is only listed.
func TestCompare(t *testing.T) {
	root := t.TempDir()
	bareRepo(t, filepath.Join(root, ".git"), "[core]\n\tpager = less\n[credential]\n\thelper = a\n")
	write(t, filepath.Join(root, ".git/hooks/pre-commit"), "#!/bin/sh\nexit 0\n", 0o755)
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	dir, err := StateDir()
	if err != nil || !strings.HasSuffix(dir, "devbox/audit") || !strings.HasPrefix(dir, os.Getenv("XDG_STATE_HOME")) {
		t.Fatalf("StateDir = %q, %v", dir, err)
	}
	r := scan(t, root)
	path := StatePath(dir, r.Root)
	if _, err := LoadState(path); err != ErrNoState {
		t.Fatalf("LoadState before accept: %v", err)
	}
	if d := Compare(nil, r); d.OK() || !d.NoState {
		t.Fatalf("no state: %+v", d)
	}
	if err := r.State(time.Now()).Save(path); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Errorf("state mode %v", fi.Mode())
	}
	st, err := LoadState(path)
	if err != nil {
		t.Fatal(err)
	}
	if d := Compare(st, scan(t, root)); !d.OK() {
		t.Fatalf("unchanged workspace fails: %+v", d.Changes)
	}

	write(t, filepath.Join(root, ".git/hooks/pre-commit"), "#!/bin/sh\ncurl evil\n", 0o755)
	write(t, filepath.Join(root, ".git/config"), "[credential]\n\thelper = a\n\thelper = b\n", 0o644)
	bareRepo(t, filepath.Join(root, "new/.git"), "")
	d := Compare(st, scan(t, root))
	got := map[string]Status{}
	for _, c := range d.Changes {
		got[c.ID()] = c.Status
	}
	want := map[string]Status{
		"hook .git/hooks/pre-commit pre-commit":  Changed,
		"config .git/config credential.helper#2": New,
		"gitdir new/.git":                        New,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("changes = %v, want %v", got, want)
	}
	if !reflect.DeepEqual(d.Removed, []string{"config .git/config core.pager"}) {
		t.Errorf("removed = %q", d.Removed)
	}
	var b bytes.Buffer
	d.WriteText(&b)
	for _, s := range []string{"changed  hook", "new/.git", "credential.helper = b", "| curl evil", "devbox audit --accept"} {
		if !strings.Contains(b.String(), s) {
			t.Errorf("report lacks %q:\n%s", s, b.String())
		}
	}
}

// TestReportEscapes: terminal escapes in a hook cannot rewrite the report.
func TestReportEscapes(t *testing.T) {
	d := &Diff{Root: "/r", Changes: []Change{{Status: New, Finding: Finding{Kind: Hook, Path: "h\x1b[2K", Key: "post-checkout", Head: []string{"\x1b[1A\x1b[2Kinnocent", "tab\there"}}}}}
	var b bytes.Buffer
	d.WriteText(&b)
	if strings.ContainsRune(b.String(), 0x1b) {
		t.Errorf("raw escape in the report: %q", b.String())
	}
	if !strings.Contains(b.String(), `\x1b[1A`) || !strings.Contains(b.String(), `tab\there`) {
		t.Errorf("escapes not shown: %q", b.String())
	}
}

// needGit returns the git binary: tests building fixtures with git fail
// without it under DEVBOX_E2E and skip otherwise.
func needGit(t testing.TB) string {
	t.Helper()
	return devboxtest.LookBinary(t, "git")
}

// TestRunLaterOnHost: the host audit (Scan) covers the files other tools
// run or obey, at any depth outside node_modules, but for the dev
// container definition at the root (a read-only mount that devbox init
// rewrites) and empty files (they run nothing; devbox run's placeholders
// are empty); those that exist as real files or directories are ReadOnly,
// for init's mounts. Each of the names a dev container could plant for the
// host, written after the state was accepted, is reported by path.
func TestRunLaterOnHost(t *testing.T) {
	root, _ := newRepo(t)
	existing := map[string]string{
		".vscode/settings.json":             "{}\n",
		".envrc":                            "export A=1\n",
		"sub/.claude/settings.json":         "{}\n",
		"lefthook.yml":                      "pre-commit: {}\n",
		".devcontainer/devcontainer.json":   "{}\n",
		"node_modules/pkg/.envrc":           "export B=1\n",
		"node_modules/pkg/.vscode/x.json":   "{}\n",
		"elsewhere/not-a-run-later-name.md": "x\n",
	}
	for p, c := range existing {
		write(t, filepath.Join(root, p), c, 0o644)
	}
	if err := os.Symlink("elsewhere/not-a-run-later-name.md", filepath.Join(root, ".mcp.json")); err != nil {
		t.Fatal(err)
	}
	r := scan(t, root)
	want := []string{".envrc", ".git/config", ".git/hooks", ".vscode", "lefthook.yml", "sub/.claude"}
	if !reflect.DeepEqual(r.ReadOnly, want) {
		t.Errorf("ReadOnly = %q, want %q (no link, nothing under node_modules, not the root's .devcontainer)", r.ReadOnly, want)
	}
	if find(r, Symlink, ".mcp.json", "") == nil {
		t.Errorf("the link at .mcp.json is not reported")
	}
	st := r.State(timeZero)

	plants := []string{
		".vscode/settings.json", ".vscode/tasks.json", ".claude/settings.json", ".mcp.json", ".envrc",
		".cursor/rules/x.mdc", ".gemini/settings.json", ".claude/hooks/format.sh", "lefthook.yml",
		".pre-commit-config.yaml", ".idea/runConfigurations/x.xml", ".husky/pre-commit", "sub/.claude/settings.local.json",
		"deep/er/.envrc",
	}
	for _, p := range plants {
		full := filepath.Join(root, p)
		os.Remove(full) // the link at .mcp.json: replaced by a file
		write(t, full, "planted\n", 0o644)
	}
	write(t, filepath.Join(root, ".devcontainer/devcontainer.json"), `{"mounts": []}`+"\n", 0o644)
	write(t, filepath.Join(root, "node_modules/pkg/.envrc"), "planted\n", 0o644)
	// devbox run's placeholders: empty files and directories.
	write(t, filepath.Join(root, "placeholder/.gitmodules"), "", 0o644)
	os.MkdirAll(filepath.Join(root, "placeholder/.idea"), 0o755)
	got := changed(t, st, root)
	for _, p := range plants {
		if !hasChange(got, "runlater "+p) {
			t.Errorf("%s planted: not reported in %q", p, got)
		}
	}
	for _, c := range got {
		if strings.Contains(c, ".devcontainer/") || strings.Contains(c, "node_modules/") || strings.Contains(c, "placeholder/") {
			t.Errorf("reported %s: the root's .devcontainer, node_modules and empty files are not the host audit's", c)
		}
	}
}
