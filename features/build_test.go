package features

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBuild packages the repository's own feature: the same sources give
// the same bytes, the default Claude lock is picked up, and a binary that
// is not a Linux executable is refused naming its architecture.
func TestBuild(t *testing.T) {
	elf := filepath.Join(t.TempDir(), "devbox")
	if err := os.WriteFile(elf, []byte("\x7fELF fake devbox"), 0o755); err != nil {
		t.Fatal(err)
	}
	o := BuildOptions{Source: "..", Binaries: map[string]string{"amd64": elf}}
	p1, err := Build(o)
	if err != nil {
		t.Fatal(err)
	}
	p2, err := Build(o)
	if err != nil {
		t.Fatal(err)
	}
	if p1.Manifest.ID != "devbox" || len(p1.Tarball) == 0 || !bytes.Equal(p1.Tarball, p2.Tarball) || !bytes.Equal(p1.Collection, p2.Collection) {
		t.Errorf("Build is not reproducible or empty: id %q, %d/%d bytes", p1.Manifest.ID, len(p1.Tarball), len(p2.Tarball))
	}
	// Without the default lock the claudeCode pins differ.
	o.ClaudeLocks = nil
	src := t.TempDir()
	for _, f := range []string{ManifestFile, InstallFile} {
		b, err := os.ReadFile(filepath.Join("..", f))
		if err != nil {
			t.Fatal(err)
		}
		os.MkdirAll(filepath.Dir(filepath.Join(src, f)), 0o755)
		os.WriteFile(filepath.Join(src, f), b, 0o644)
	}
	o.Source = src
	p3, err := Build(o)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(p1.Tarball, p3.Tarball) {
		t.Error("the default features/claude-code.lock.json was not read")
	}

	o.Binaries["arm64"] = filepath.Join("..", ManifestFile)
	if _, err := Build(o); err == nil || !strings.Contains(err.Error(), "--binary arm64") || !strings.Contains(err.Error(), "not a Linux executable") {
		t.Errorf("a JSON file as the arm64 binary: %v", err)
	}
}
