package sandbox

import (
	"os"
	"path/filepath"
	"testing"
)

func TestAuditChanges(t *testing.T) {
	ws, home := t.TempDir(), t.TempDir()
	write := func(rel, content string) {
		t.Helper()
		p := filepath.Join(ws, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(".git/HEAD", "ref: refs/heads/main\n")
	write(".git/refs/heads/main", "0123456789012345678901234567890123456789\n")
	write(".git/config", "[core]\n\tbare = false\n")
	write(".git/objects/ab/cdef", "blob")
	write("sub/.vscode/settings.json", "{}")
	write("sub/.bashrc", "# rc\n")
	write("a/.claude/settings.json", "{}")
	write("src/main.go", "package main\n")
	write("old/.mcp.json", "{}")
	big := make([]byte, 2<<20)
	write("b/.envrc", string(big))

	a, err := BeginAudit(ws, home, Watched{})
	if err != nil || !a.Baseline {
		t.Fatalf("BeginAudit: %v, baseline %v", err, a.Baseline)
	}
	// What a command could do where no mount stops it.
	write("clone/.git/HEAD", "ref: refs/heads/main\n") // a new repository
	os.MkdirAll(filepath.Join(ws, "clone/.git/objects"), 0o755)
	os.MkdirAll(filepath.Join(ws, "clone/.git/refs"), 0o755)
	write("clone/.git/hooks/post-checkout", "#!/bin/sh\nevil\n")
	write("clone/.git/config", "[core]\nhooksPath = x\n")
	write(".git/commondir", "../elsewhere\n")
	write("sub/.vscode/settings.json", `{"evil": true}`) // a change
	write("new/deep/.mcp.json", "{}")
	write("a/.claude/agents/x.md", "evil")
	write("a/.envrc", "evil")
	write("x/.pre-commit-config.yaml", "repos: []\n")
	write("x/.cursor/mcp.json", "{}")
	write("mod/.git", "gitdir: /tmp/evil\n")
	big[1<<20+7] = 'x' // same size; the mtime is put back below
	fi, _ := os.Stat(filepath.Join(ws, "b/.envrc"))
	write("b/.envrc", string(big))
	os.Chtimes(filepath.Join(ws, "b/.envrc"), fi.ModTime(), fi.ModTime())
	if err := os.Symlink("/tmp/evil", filepath.Join(ws, "new/.zshrc")); err != nil {
		t.Fatal(err)
	}
	// What it may do: ordinary files, git's objects and refs,
	// node_modules, removals.
	write("src/main.go", "package main // edited\n")
	write(".git/objects/12/3456", "blob")
	write(".git/refs/heads/topic", "0123456789012345678901234567890123456789\n")
	write("node_modules/pkg/.bashrc", "ignored")
	if err := os.Remove(filepath.Join(ws, "old/.mcp.json")); err != nil {
		t.Fatal(err)
	}
	d, err := a.Finish()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range d.Changes {
		got = append(got, string(c.Status)+" "+c.ID())
	}
	want := []string{
		"new config clone/.git/config core.hookspath",
		"new gitdir clone/.git",
		"new gitlink .git/commondir",
		"new gitlink mod/.git",
		"new file clone/.git/hooks/post-checkout", // not executable: a file, still watched
		"new runlater a/.claude/agents/x.md",
		"new runlater a/.envrc",
		"changed runlater b/.envrc",
		"changed runlater sub/.vscode/settings.json",
		"new runlater x/.cursor/mcp.json",
		"new runlater x/.pre-commit-config.yaml",
		"new runlater new/deep/.mcp.json",
		"new symlink new/.zshrc",
	}
	if !sameSet(got, want) {
		t.Errorf("changes:\n got %q\nwant %q", got, want)
	}

	// The state advanced: a second audit reports nothing new.
	a2, err := BeginAudit(ws, home, Watched{})
	if err != nil || a2.Baseline {
		t.Fatalf("second BeginAudit: %v, baseline %v", err, a2.Baseline)
	}
	// A run whose audit never completes (devbox killed) leaves the
	// change for the next one.
	write("killed/.envrc", "evil")
	a3, _ := BeginAudit(ws, home, Watched{})
	_ = a3 // killed: no Finish
	a4, _ := BeginAudit(ws, home, Watched{})
	d4, err := a4.Finish()
	if err != nil || len(d4.Changes) != 1 || d4.Changes[0].Path != "killed/.envrc" {
		t.Errorf("after a killed run: %+v, %v", d4.Changes, err)
	}
}

func sameSet(a, b []string) bool {
	m := map[string]int{}
	for _, s := range a {
		m[s]++
	}
	for _, s := range b {
		m[s]--
	}
	for _, n := range m {
		if n != 0 {
			return false
		}
	}
	return true
}

// The placeholders a run started in a new sub-directory makes (devbox's,
// not the command's) are not reported; what the command writes beside
// them is.
func TestAuditAcceptPlaceholders(t *testing.T) {
	ws, home := t.TempDir(), t.TempDir()
	a, err := BeginAudit(ws, home, Watched{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Finish(); err != nil {
		t.Fatal(err)
	}
	var created []string
	for _, rel := range []string{"sub/.bashrc", "sub/.git/config", "sub/.claude/settings.json"} {
		p := filepath.Join(ws, rel)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		created = append(created, p)
	}
	os.Mkdir(filepath.Join(ws, "sub/.git/hooks"), 0o755)
	created = append(created, filepath.Join(ws, "sub/.git/hooks"))
	a, err = BeginAudit(ws, home, Watched{})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.AcceptPlaceholders(created); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(ws, "sub/.envrc"), []byte("evil"), 0o644)             // the command's
	os.WriteFile(filepath.Join(ws, "sub/.git/hooks/pre-commit"), []byte("x"), 0o755) // into a placeholder
	d, err := a.Finish()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range d.Changes {
		got = append(got, c.ID())
	}
	if want := []string{"hook sub/.git/hooks/pre-commit pre-commit", "runlater sub/.envrc"}; !sameSet(got, want) {
		t.Errorf("changes %q, want %q", got, want)
	}
}
