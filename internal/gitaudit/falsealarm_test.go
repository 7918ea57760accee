package gitaudit

import (
	"os"
	"path/filepath"
	"testing"
)

// TestFalseAlarms: a host session of ordinary git commands between two
// audits (commit, fetch, pull, branch, tag, stash, remote add with an
// https URL, config user.email, submodule update, merge, rebase,
// cherry-pick, gc, ...) changes nothing the audit reports.
func TestFalseAlarms(t *testing.T) {
	needGit(t)
	base := t.TempDir()
	up, lib, root := filepath.Join(base, "up.git"), filepath.Join(base, "lib"), filepath.Join(base, "ws")
	os.MkdirAll(lib, 0o755)
	mustGit(t, base, "init", "-q", "--bare", "-b", "main", up)
	mustGit(t, lib, "init", "-q", "-b", "main")
	mustGit(t, lib, "commit", "-q", "--allow-empty", "-m", "lib")
	mustGit(t, base, "clone", "-q", up, root)
	write(t, filepath.Join(root, "a.txt"), "a\n", 0o644)
	mustGit(t, root, "add", ".")
	mustGit(t, root, "commit", "-qm", "one")
	mustGit(t, root, "push", "-q", "origin", "HEAD:main")
	mustGit(t, root, "-c", "protocol.file.allow=always", "submodule", "-q", "add", lib, "lib")
	mustGit(t, root, "commit", "-qm", "submodule")
	st := scan(t, root).State(timeZero)

	edit := func(s string) func() { return func() { appendFile(t, filepath.Join(root, "a.txt"), s+"\n") } }
	session := []any{
		[]string{"status"}, []string{"log", "--oneline"}, []string{"diff"}, edit("two"), []string{"commit", "-qam", "two"},
		[]string{"push", "-q", "origin", "HEAD:main"}, []string{"fetch", "-q"}, []string{"fetch", "-q", "--prune", "origin"},
		[]string{"pull", "-q", "--no-rebase", "origin", "main"}, []string{"branch", "topic"}, []string{"branch", "-m", "topic", "feature"},
		[]string{"checkout", "-q", "feature"}, edit("three"), []string{"commit", "-qam", "three"}, []string{"checkout", "-q", "main"},
		[]string{"merge", "-q", "--no-edit", "feature"}, []string{"tag", "v1"}, []string{"tag", "-a", "-m", "v2", "v2"},
		edit("four"), []string{"stash", "-q"}, []string{"stash", "list"}, []string{"stash", "pop", "-q"}, []string{"commit", "-qam", "four"},
		[]string{"remote", "add", "mirror", "https://x.test/mirror.git"}, []string{"config", "user.email", "me@x.test"},
		[]string{"config", "user.name", "Me"}, []string{"-c", "protocol.file.allow=always", "submodule", "-q", "update", "--init"},
		[]string{"submodule", "status"}, []string{"checkout", "-q", "-b", "rb"}, edit("five"), []string{"commit", "-qam", "five"},
		[]string{"rebase", "-q", "feature"}, []string{"checkout", "-q", "main"}, []string{"cherry-pick", "rb"},
		[]string{"revert", "--no-edit", "HEAD"}, []string{"reset", "-q", "--hard", "HEAD~1"}, []string{"branch", "-D", "rb"},
		[]string{"gc", "-q"}, []string{"pack-refs", "--all"}, []string{"reflog", "expire", "--expire=now", "--all"},
		[]string{"fsck", "--no-progress"}, []string{"branch", "--set-upstream-to=origin/main"}, []string{"pull", "-q", "--rebase"},
		[]string{"tag", "-d", "v1"}, []string{"notes", "add", "-m", "n"}, []string{"describe", "--always"},
		[]string{"shortlog", "-s", "HEAD"}, []string{"blame", "a.txt"}, []string{"show", "--stat"}, []string{"clean", "-fdq"},
		[]string{"remote", "-v"}, []string{"ls-remote", "origin"}, []string{"push", "-q", "origin", "main"},
		[]string{"commit", "-q", "--amend", "--no-edit"}, []string{"push", "-q", "-f", "origin", "main"}, []string{"maintenance", "run", "--task=gc", "--quiet"},
	}
	n := 0
	for _, step := range session {
		switch s := step.(type) {
		case func():
			s()
		case []string:
			mustGit(t, root, s...)
			n++
		}
	}
	if n < 50 {
		t.Fatalf("%d git commands, want ≥ 50", n)
	}
	d := Compare(st, scan(t, root))
	for _, c := range d.Changes {
		t.Errorf("false alarm: %s", c)
	}
	t.Logf("%d git commands between two audits: %d reported", n, len(d.Changes))
}
