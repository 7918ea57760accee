package entrypoint

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/devbox-dev/devbox/internal/devboxtest"
	"github.com/devbox-dev/devbox/internal/secrets"
)

func TestSupervise(t *testing.T) {
	// A failing check ends it with the check's error.
	n := 0
	dead := errors.New("DNS filter: not running")
	err := Supervise(context.Background(), time.Millisecond, func() error {
		if n++; n == 3 {
			return dead
		}
		return nil
	})
	if !errors.Is(err, dead) || n != 3 {
		t.Fatalf("err = %v after %d checks, want the third check's error", err, n)
	}
	// A stopped container ends it cleanly.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := Supervise(ctx, time.Millisecond, func() error { return nil }); err != nil {
		t.Fatal(err)
	}
}

func TestImportSecrets(t *testing.T) {
	// The store gives its files to root and the gateway's group.
	devboxtest.RequireRoot(t)
	// A Secret volume's layout: keys are symbolic links into ..data.
	src := t.TempDir()
	data := filepath.Join(src, "..2026_12_02_03_00_00.000000001")
	if err := os.Mkdir(data, 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(data, "anthropic"), []byte("sk-ant-api-test\n"), 0o400)
	os.WriteFile(filepath.Join(data, "git"), []byte("token"), 0o400)
	os.Symlink(filepath.Base(data), filepath.Join(src, "..data"))
	for _, k := range []string{"anthropic", "git"} {
		os.Symlink(filepath.Join("..data", k), filepath.Join(src, k))
	}
	store := secrets.New(filepath.Join(t.TempDir(), "secrets"))
	names, err := ImportSecrets(src, store)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(names, []string{"anthropic", "git"}) {
		t.Fatalf("imported %v", names)
	}
	if v, err := store.Secret("anthropic"); err != nil || string(v) != "sk-ant-api-test" {
		t.Errorf("anthropic = %q, %v", v, err)
	}
	if err := store.Check(); err != nil {
		t.Error(err)
	}
	// A key that is no secret name is refused, not copied under another.
	os.WriteFile(filepath.Join(src, "bad name"), []byte("x"), 0o400)
	if _, err := ImportSecrets(src, store); err == nil {
		t.Error("a key with a space was imported")
	}
}
