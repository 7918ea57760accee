package devboxtest

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

var devbox struct {
	once sync.Once
	path string
	err  error
}

// BuildDevbox builds ./cmd/devbox once per test binary (static, CGO off, so it
// can be baked into images or run in namespaces) and returns its path.
//
// The binary goes to one fixed directory per module checkout under the
// system temp dir, replaced atomically by rename, so test binaries running in
// parallel share it safely and repeated runs leave no pile of copies behind.
// Go's build cache makes the rebuild cheap.
func BuildDevbox(tb testing.TB) string {
	tb.Helper()
	devbox.once.Do(func() { devbox.path, devbox.err = buildDevbox() })
	if devbox.err != nil {
		tb.Fatalf("building ./cmd/devbox: %v", devbox.err)
	}
	return devbox.path
}

func buildDevbox() (string, error) {
	gomod, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	root := filepath.Dir(strings.TrimSpace(string(gomod)))
	if root == "." || root == "" {
		return "", fmt.Errorf("not inside the devbox module (go env GOMOD printed %q)", gomod)
	}
	sum := sha256.Sum256([]byte(root))
	dir := filepath.Join(os.TempDir(), "devboxtest-"+hex.EncodeToString(sum[:6]))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	final := filepath.Join(dir, "devbox")
	tmp := fmt.Sprintf("%s.%d.tmp", final, os.Getpid())
	cmd := exec.Command("go", "build", "-trimpath", "-o", tmp, "./cmd/devbox")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("go build ./cmd/devbox: %w\n%s", err, out)
	}
	if err := os.Rename(tmp, final); err != nil {
		os.Remove(tmp)
		return "", err
	}
	return final, nil
}
