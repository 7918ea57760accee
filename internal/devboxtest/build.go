package devboxtest

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// builds holds one build per target per test binary ("" for the host,
// else a linux GOARCH).
var builds struct {
	sync.Mutex
	byArch map[string]*build
}

type build struct {
	once sync.Once
	path string
	err  error
}

// BuildDevbox builds ./cmd/devbox for the host once per test binary and
// returns its path. It is built as a release is (static, CGO off,
// -trimpath), so it can be baked into images or run in namespaces.
//
// The binary goes to one fixed directory per module checkout under the
// system temp dir, replaced atomically by rename, so test binaries running in
// parallel share it safely and repeated runs leave no pile of copies behind.
// Go's build cache makes the rebuild cheap: scripts/test runs
// TestBuildDevbox before the other tests so that the cache is warm.
func BuildDevbox(tb testing.TB) string {
	tb.Helper()
	return buildOnce(tb, "")
}

// BuildDevboxFor is BuildDevbox for linux/goarch, with the same flags
// (e2e/multiarch's arm64 image; TestBuildDevboxArm64 warms its cache).
func BuildDevboxFor(tb testing.TB, goarch string) string {
	tb.Helper()
	return buildOnce(tb, goarch)
}

func buildOnce(tb testing.TB, goarch string) string {
	tb.Helper()
	builds.Lock()
	if builds.byArch == nil {
		builds.byArch = map[string]*build{}
	}
	b := builds.byArch[goarch]
	if b == nil {
		b = &build{}
		builds.byArch[goarch] = b
	}
	builds.Unlock()
	b.once.Do(func() { b.path, b.err = buildDevbox(goarch) })
	if b.err != nil {
		tb.Fatalf("building ./cmd/devbox: %v", b.err)
	}
	return b.path
}

func buildDevbox(goarch string) (string, error) {
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
	env := append(os.Environ(), "CGO_ENABLED=0")
	target := runtime.GOOS + "/" + runtime.GOARCH
	if goarch != "" {
		final += "-linux-" + goarch
		env = append(env, "GOOS=linux", "GOARCH="+goarch)
		target = "linux/" + goarch
	}
	tmp := fmt.Sprintf("%s.%d.tmp", final, os.Getpid())
	cmd := exec.Command("go", "build", "-trimpath", "-o", tmp, "./cmd/devbox")
	cmd.Dir = root
	cmd.Env = env
	if out, err := cmd.CombinedOutput(); err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("go build ./cmd/devbox for %s: %w\n%s", target, err, out)
	}
	if err := os.Rename(tmp, final); err != nil {
		os.Remove(tmp)
		return "", err
	}
	return final, nil
}
