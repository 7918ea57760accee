package sandbox

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func TestAuditChanges(t *testing.T) {
	ws := t.TempDir()
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
	write(".git/config", "[core]\n")
	write(".git/objects/ab/cdef", "blob")
	write("sub/.vscode/settings.json", "{}")
	write("sub/.bashrc", "# rc\n")
	write("a/.claude/settings.json", "{}")
	write("src/main.go", "package main\n")
	write("old/.mcp.json", "{}")

	before, err := TakeSnapshot(ws)
	if err != nil {
		t.Fatal(err)
	}
	// What a command could do where no mount stops it.
	write("clone/.git/hooks/post-checkout", "#!/bin/sh\nevil\n") // a new repository
	write("clone/.git/config", "[core]\nhooksPath = x\n")
	write("sub/.vscode/settings.json", `{"evil": true}`) // a change
	write("new/deep/.mcp.json", "{}")
	write("a/.claude/agents/x.md", "evil")
	write("a/.envrc", "evil")
	write("mod/.git", "gitdir: /tmp/evil\n")
	if err := os.Symlink("/tmp/evil", filepath.Join(ws, "new/.zshrc")); err != nil {
		t.Fatal(err)
	}
	// What it may do: ordinary files, git's objects, node_modules, removals.
	write("src/main.go", "package main // edited\n")
	write(".git/objects/12/3456", "blob")
	write("node_modules/pkg/.bashrc", "ignored")
	if err := os.Remove(filepath.Join(ws, "old/.mcp.json")); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(ws, "sub/.bashrc"), 0o755); err != nil {
		t.Fatal(err)
	}

	after, err := TakeSnapshot(ws)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range before.Changes(after) {
		rel, _ := filepath.Rel(ws, c.Path)
		got = append(got, c.What+" "+rel)
	}
	want := []string{
		"created a/.claude/agents",
		"created a/.claude/agents/x.md",
		"created a/.envrc",
		"created clone/.git/config",
		"created clone/.git/hooks",
		"created clone/.git/hooks/post-checkout",
		"created mod/.git",
		"created new/.zshrc",
		"created new/deep/.mcp.json",
		"changed sub/.bashrc",
		"changed sub/.vscode/settings.json",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("changes:\n got %q\nwant %q", got, want)
	}
	if c := before.Changes(before); len(c) != 0 {
		t.Errorf("a snapshot compared with itself: %v", c)
	}
}
