package sandbox

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// plainFS is OSFS without ReadDirKinds: the Lstat-per-entry path.
type plainFS struct{ OSFS }

// ReadDirKinds shadows OSFS.ReadDirKinds with another signature, so plainFS
// is not a kindLister.
func (plainFS) ReadDirKinds() {}

// TestGlobKindsMatchLstat: the d_type fast path of a "**" walk finds
// exactly what the Lstat-per-entry path finds, symlinks to directories
// included (never descended), .git and node_modules skipped.
func TestGlobKindsMatchLstat(t *testing.T) {
	root := t.TempDir()
	for _, f := range []string{".env", "a/.env", "a/b/c/.env", "a/b/.env.local", ".git/.env", "node_modules/x/.env", "elsewhere/.env", "a/file"} {
		p := filepath.Join(root, "ws", f)
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.WriteFile(p, []byte("x"), 0o644)
	}
	os.Symlink(filepath.Join(root, "ws", "elsewhere"), filepath.Join(root, "ws", "a", "link"))
	os.Symlink(filepath.Join(root, "ws", "elsewhere", ".env"), filepath.Join(root, "ws", "a", "b", ".env.link"))
	var _ kindLister = OSFS{}
	if _, ok := any(plainFS{}).(kindLister); ok {
		t.Fatal("plainFS must not be a kindLister")
	}
	for _, pat := range []string{"ws/**/.env", "ws/**/.env.*", "ws/**"} {
		pat = filepath.Join(root, pat)
		fast, err := glob(OSFS{}, pat)
		if err != nil {
			t.Fatal(err)
		}
		slow, err := glob(plainFS{}, pat)
		if err != nil {
			t.Fatal(err)
		}
		if len(fast) == 0 || !slices.Equal(fast, slow) {
			t.Errorf("%s:\n d_type %q\n lstat  %q", pat, fast, slow)
		}
	}
	got, _ := glob(OSFS{}, filepath.Join(root, "ws/**/.env"))
	want := []string{"ws/.env", "ws/a/.env", "ws/a/b/c/.env", "ws/elsewhere/.env"}
	for i := range want {
		want[i] = filepath.Join(root, want[i])
	}
	if !slices.Equal(got, want) {
		t.Errorf("ws/**/.env = %q, want %q", got, want)
	}
}
