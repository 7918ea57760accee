package gitaudit

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// hostGit runs git the way the host user would, with no system or global
// config, and returns its combined output; failures are returned, not
// fatal (a control may expect git to fail after running the plant).
func hostGit(t *testing.T, dir string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(needGit(t), args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "HOME="+t.TempDir(),
		"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@x.test", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@x.test", "GIT_EDITOR=true")
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func mustGit(t *testing.T, dir string, args ...string) string {
	t.Helper()
	out, err := hostGit(t, dir, args...)
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// newRepo makes a repository with one commit and accepts its state.
func newRepo(t *testing.T) (root string, st *State) {
	t.Helper()
	root = t.TempDir()
	mustGit(t, root, "init", "-q", "-b", "main")
	write(t, filepath.Join(root, "a.txt"), "a\n", 0o644)
	mustGit(t, root, "add", ".")
	mustGit(t, root, "commit", "-qm", "one")
	return root, scan(t, root).State(timeZero)
}

// changed is the diff's changes as "kind path key" strings.
func changed(t *testing.T, st *State, root string) []string {
	t.Helper()
	var out []string
	for _, c := range Compare(st, scan(t, root)).Changes {
		out = append(out, c.ID())
	}
	return out
}

func hasChange(list []string, prefix string) bool {
	for _, s := range list {
		if strings.HasPrefix(s, prefix) {
			return true
		}
	}
	return false
}

// TestPlants: each class of the issue, planted alone in an accepted
// repository, fails the audit with a change naming it; and a control shows
// the host's git runs it (the plant writes a marker file).
func TestPlants(t *testing.T) {
	needGit(t)
	cases := []struct {
		name string
		// plant writes into the repository; it returns the marker the
		// plant would create when run.
		plant func(t *testing.T, root, marker string)
		// control runs git the way the user would.
		control func(t *testing.T, root string)
		want    string // prefix of a change ID
	}{
		{"fsmonitor behind a NUL in a subsection", func(t *testing.T, root, m string) {
			appendFile(t, filepath.Join(root, ".git/config"), "[core \"fsmonitor\x00\"]\n\tx = touch "+m+"; false\n")
		}, func(t *testing.T, root string) { hostGit(t, root, "status") }, "config .git/config core.fsmonitor"},
		{"protocol.allow and url.insteadOf to ext::", func(t *testing.T, root, m string) {
			appendFile(t, filepath.Join(root, ".git/config"), "[protocol]\n\tallow = always\n[url \"ext::sh -c touch% "+m+"% #\"]\n\tinsteadOf = https://x.test/\n[remote \"up\"]\n\turl = https://x.test/r\n")
		}, func(t *testing.T, root string) { hostGit(t, root, "fetch", "-q", "up") }, "config .git/config protocol.allow"},
		{"hook under an accepted core.hooksPath", nil, nil, "hook githooks/post-commit"},
		{"exec line in a rebase todo", func(t *testing.T, root, m string) {
			mustGit(t, root, "commit", "-q", "--allow-empty", "-m", "two")
			cmd := exec.Command(needGit(t), "rebase", "-q", "-i", "HEAD~1")
			cmd.Dir = root
			cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_SEQUENCE_EDITOR=sed -i 1ibreak", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@x.test")
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("rebase: %v %s", err, out)
			}
			appendFile(t, filepath.Join(root, ".git/rebase-merge/git-rebase-todo"), "exec touch "+m+"\n")
		}, func(t *testing.T, root string) { hostGit(t, root, "rebase", "--continue") }, "sequencer .git/rebase-merge/git-rebase-todo"},
		{"gitfile whose second line changes the target", func(t *testing.T, root, m string) {
			evil := filepath.Join(root, "sub", "x\nevil")
			mustGit(t, root, "init", "-q", "--bare", evil)
			write(t, filepath.Join(evil, "hooks/post-checkout"), "#!/bin/sh\ntouch "+m+"\n", 0o755)
			write(t, filepath.Join(evil, "config"), "[core]\n\tbare = false\n\tworktree = "+filepath.Join(root, "sub")+"\n[core]\n\tfsmonitor = touch "+m+"; false\n", 0o644)
			write(t, filepath.Join(root, "sub/.git"), "gitdir: x\nevil\n", 0o644)
		}, func(t *testing.T, root string) { hostGit(t, filepath.Join(root, "sub"), "status") }, "config sub/x\nevil/config core.fsmonitor"},
		{"bare repository with a linked HEAD", func(t *testing.T, root, m string) {
			b := filepath.Join(root, "store")
			mustGit(t, root, "init", "-q", "--bare", "store")
			// git 2.39 takes a HEAD that links into refs/ (the old symlink
			// form of a symbolic ref).
			os.Remove(filepath.Join(b, "HEAD"))
			os.Symlink("refs/heads/main", filepath.Join(b, "HEAD"))
			appendFile(t, filepath.Join(b, "config"), "[alias]\n\tx = !touch "+m+"\n")
		}, func(t *testing.T, root string) { hostGit(t, filepath.Join(root, "store"), "x") }, "config store/config alias.x"},
		{"submodule's config under .git/modules", func(t *testing.T, root, m string) {
			gd := filepath.Join(root, ".git/modules/lib")
			mustGit(t, root, "init", "-q", "--bare", gd)
			appendFile(t, filepath.Join(gd, "config"), "[core]\n\tfsmonitor = touch "+m+"; false\n\tbare = false\n\tworktree = ../../../lib\n")
			write(t, filepath.Join(root, "lib/.git"), "gitdir: ../.git/modules/lib\n", 0o644)
		}, func(t *testing.T, root string) { hostGit(t, filepath.Join(root, "lib"), "status") }, "config .git/modules/lib/config core.fsmonitor"},
		{"commondir whose second line changes the target", func(t *testing.T, root, m string) {
			mustGit(t, root, "worktree", "add", "-q", "wt")
			// git reads "../..\nx": the directory "..\nx" beside wt.
			other := filepath.Join(root, ".git/worktrees", "..\nx")
			mustGit(t, root, "clone", "-q", "--bare", root, other)
			appendFile(t, filepath.Join(other, "config"), "[alias]\n\tx = !touch "+m+"\n")
			write(t, filepath.Join(root, ".git/worktrees/wt/commondir"), "../..\nx\n", 0o644)
		}, func(t *testing.T, root string) { hostGit(t, filepath.Join(root, "wt"), "x") }, "gitlink .git/worktrees/wt/commondir"},
		{"imap.tunnel", func(t *testing.T, root, m string) {
			appendFile(t, filepath.Join(root, ".git/config"), "[imap]\n\ttunnel = touch "+m+"\n\tfolder = x\n")
		}, func(t *testing.T, root string) {
			// git imap-send starts the tunnel before it talks IMAP: one
			// patch on its standard input is enough.
			patch := mustGit(t, root, "format-patch", "-1", "--stdout")
			cmd := exec.Command(needGit(t), "imap-send")
			cmd.Dir = root
			cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "HOME="+t.TempDir())
			cmd.Stdin = strings.NewReader(patch)
			cmd.Run() // fails after the tunnel ran: nothing speaks IMAP on it
		}, "config .git/config imap.tunnel"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			root, st := newRepo(t)
			marker := filepath.Join(t.TempDir(), "ran")
			if tc.plant == nil { // the hooksPath case: accept the key, then add a hook
				appendFile(t, filepath.Join(root, ".git/config"), "[core]\n\thooksPath = githooks\n")
				os.MkdirAll(filepath.Join(root, "githooks"), 0o755)
				st = scan(t, root).State(timeZero)
				write(t, filepath.Join(root, "githooks/post-commit"), "#!/bin/sh\ntouch "+marker+"\n", 0o755)
				tc.control = func(t *testing.T, root string) { hostGit(t, root, "commit", "-q", "--allow-empty", "-m", "x") }
			} else {
				tc.plant(t, root, marker)
			}
			got := changed(t, st, root)
			if !hasChange(got, tc.want) {
				t.Errorf("the audit does not name %q; changes: %q", tc.want, got)
			}
			if _, err := os.Stat(marker); err == nil {
				t.Fatal("the audit ran the plant")
			}
			if tc.control == nil {
				return
			}
			tc.control(t, root)
			if _, err := os.Stat(marker); err != nil {
				t.Errorf("control: git did not run the plant (so the case proves nothing)")
			}
		})
	}
}

func appendFile(t *testing.T, path, s string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(s); err != nil {
		t.Fatal(err)
	}
}

// TestPureData: what git writes in ordinary use is data and passes; the
// same names with content git would not write, and files off the data
// list, are reported.
func TestPureData(t *testing.T) {
	root, st := newRepo(t)
	oid := strings.TrimSpace(mustGit(t, root, "rev-parse", "HEAD"))
	gd := filepath.Join(root, ".git")
	write(t, filepath.Join(gd, "refs/heads/ok"), oid+"\n", 0o644)
	write(t, filepath.Join(gd, "MERGE_HEAD"), oid+"\n"+oid+"\n", 0o644)
	write(t, filepath.Join(gd, "objects/ab/"+strings.Repeat("c", 38)), "x", 0o444)
	write(t, filepath.Join(gd, "logs/refs/heads/ok"), "anything\n", 0o644)
	if got := changed(t, st, root); len(got) != 0 {
		t.Fatalf("data reported: %q", got)
	}
	write(t, filepath.Join(gd, "refs/heads/bad"), "exec evil\n", 0o644)
	write(t, filepath.Join(gd, "ORIG_HEAD"), oid+"\n"+oid+"\n", 0o644)
	write(t, filepath.Join(gd, "packed-refs"), "# pack-refs with: peeled\n"+oid+" refs/heads/x y\n", 0o644)
	write(t, filepath.Join(gd, "info/attributes"), "* filter=x\n", 0o644)
	write(t, filepath.Join(gd, "objects/info/alternates"), "/elsewhere/objects\n", 0o644)
	write(t, filepath.Join(gd, "hooks/pre-commit.sample"), "#!/bin/sh\nchanged\n", 0o755)
	write(t, filepath.Join(gd, "unknown"), "x", 0o644)
	os.Symlink("/elsewhere", filepath.Join(gd, "refs/heads/link"))
	got := changed(t, st, root)
	for _, want := range []string{"file .git/refs/heads/bad", "file .git/ORIG_HEAD", "file .git/packed-refs", "file .git/info/attributes",
		"file .git/objects/info/alternates", "file .git/hooks/pre-commit.sample", "file .git/unknown", "symlink .git/refs/heads/link"} {
		if !hasChange(got, want) {
			t.Errorf("%s not reported: %q", want, got)
		}
	}
}
