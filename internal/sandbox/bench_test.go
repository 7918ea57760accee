package sandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// benchWorkspace is the shape scripts/bench/sandbox.sh measures: a git
// repository of 50 directories of 100 files.
func benchWorkspace(b *testing.B) (home, ws string) {
	b.Helper()
	root := b.TempDir()
	home, ws = filepath.Join(root, "home"), filepath.Join(root, "ws")
	for _, d := range []string{home, filepath.Join(ws, ".git/hooks")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			b.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(ws, ".git/config"), []byte("[core]\n"), 0o644)
	for i := range 50 {
		d := filepath.Join(ws, fmt.Sprintf("d%d", i))
		if err := os.Mkdir(d, 0o755); err != nil {
			b.Fatal(err)
		}
		for j := range 100 {
			os.WriteFile(filepath.Join(d, fmt.Sprintf("f%d.txt", j)), []byte("x"), 0o644)
		}
	}
	return home, ws
}

// BenchmarkPlan5000Files plans a run with the default denyRead (two "**"
// walks) and the mandatory denies (one walk), all through one listing cache.
func BenchmarkPlan5000Files(b *testing.B) {
	home, ws := benchWorkspace(b)
	cfg := Config{Home: home, Workspace: ws, Command: []string{"true"},
		DenyRead: []string{"~/.ssh", "~/.aws", "**/.env", "**/.env.*"}}
	for b.Loop() {
		if _, err := Plan(cfg, OSFS{}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAudit5000Files is the run-end audit: one scan of the
// workspace, compared with the last completed audit's state and saved.
func BenchmarkAudit5000Files(b *testing.B) {
	home, ws := benchWorkspace(b)
	a, err := BeginAudit(ws, home, Watched{})
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := a.Finish(); err != nil {
			b.Fatal(err)
		}
	}
}
