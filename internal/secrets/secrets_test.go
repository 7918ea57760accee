package secrets

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/devbox-dev/devbox/internal/devboxtest"
)

func TestCheckValue(t *testing.T) {
	if v, err := CheckValue([]byte("  sk-ant-api03-x\n")); err != nil || string(v) != "sk-ant-api03-x" {
		t.Errorf("CheckValue = %q, %v", v, err)
	}
	for _, bad := range []string{"", "\n", "a\nX-Evil: 1", "a\x00b", strings.Repeat("a", MaxSize+1)} {
		if _, err := CheckValue([]byte(bad)); err == nil {
			t.Errorf("CheckValue(%q) accepted", bad)
		}
	}
}

func TestStore(t *testing.T) {
	devboxtest.RequireRoot(t)
	dir := filepath.Join(t.TempDir(), "secrets")
	s := New(dir)
	if err := s.Set("../x", []byte("v")); err == nil {
		t.Error("Set accepted a name with a path")
	}
	if err := s.Set("anthropic", []byte("sk-ant-api03-secret\n")); err != nil {
		t.Fatal(err)
	}
	for _, p := range []struct {
		path string
		mode os.FileMode
	}{{dir, 0o750 | os.ModeDir}, {filepath.Join(dir, "anthropic"), 0o640}} {
		fi, err := os.Stat(p.path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode() != p.mode {
			t.Errorf("%s: mode %v, want %v", p.path, fi.Mode(), p.mode)
		}
		if st := statOwner(fi); st != [2]int{0, s.GID} {
			t.Errorf("%s: owner %v, want root:%d", p.path, st, s.GID)
		}
	}
	if v, err := s.Secret("anthropic"); err != nil || string(v) != "sk-ant-api03-secret" {
		t.Errorf("Secret = %q, %v", v, err)
	}
	list, err := s.List()
	if err != nil || len(list) != 1 || list[0].Name != "anthropic" || list[0].Fingerprint != Fingerprint([]byte("sk-ant-api03-secret")) {
		t.Errorf("List = %+v, %v", list, err)
	}
	if err := s.Check(); err != nil {
		t.Error(err)
	}
	// A file someone made readable by others is refused by Check, and
	// Prepare (run on every start) puts it right.
	os.Chmod(filepath.Join(dir, "anthropic"), 0o644)
	if err := s.Check(); err == nil {
		t.Error("Check accepted a world-readable secret")
	}
	if err := s.Prepare(); err != nil {
		t.Fatal(err)
	}
	if err := s.Check(); err != nil {
		t.Error(err)
	}
	if err := s.Remove("anthropic"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Secret("anthropic"); !errors.Is(err, ErrNotSet) {
		t.Errorf("after Remove: %v", err)
	}
	if err := s.Remove("anthropic"); !errors.Is(err, ErrNotSet) {
		t.Errorf("Remove of a missing secret: %v", err)
	}
}
