// Package devboxtest holds helpers shared by devbox's tests: the gate for
// privileged and daemon tests, and the addresses of the daemons scripts/test
// starts.
package devboxtest

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// E2EVar is the environment variable that turns on tests needing root,
// namespaces or daemons. scripts/test sets it after starting every daemon;
// with it set, a missing prerequisite is a failure, never a skip.
const E2EVar = "DEVBOX_E2E"

// E2E reports whether privileged and daemon tests are on.
func E2E() bool { return os.Getenv(E2EVar) != "" }

// RequireE2E skips t unless DEVBOX_E2E is set.
func RequireE2E(tb testing.TB) {
	tb.Helper()
	if !E2E() {
		tb.Skipf("set %s=1 (scripts/test does) to run this test: it needs root, namespaces or daemons", E2EVar)
	}
}

// RequireRoot gates t on DEVBOX_E2E and then fails it unless it runs as root.
func RequireRoot(tb testing.TB) {
	tb.Helper()
	RequireE2E(tb)
	if os.Geteuid() != 0 {
		tb.Fatalf("%s is set but the test is not running as root", E2EVar)
	}
}

// RequireBinary gates t on DEVBOX_E2E and returns the path of name, failing
// the test when it is not installed.
func RequireBinary(tb testing.TB, name string) string {
	tb.Helper()
	RequireE2E(tb)
	p, err := exec.LookPath(name)
	if err != nil {
		tb.Fatalf("%s is set but %s is not installed: %v", E2EVar, name, err)
	}
	return p
}

// LookBinary returns the path of name for a test that needs no root but
// does need the program (git, the docker CLI): without it the test fails
// under DEVBOX_E2E, where scripts/test installed it, and skips elsewhere.
func LookBinary(tb testing.TB, name string) string {
	tb.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if E2E() {
			tb.Fatalf("%s is set but %s is not installed (scripts/test installs it): %v", E2EVar, name, err)
		}
		tb.Skipf("%s is not installed", name)
	}
	return p
}

// Env returns the value of an environment variable that scripts/test exports
// (DEVBOX_BUILDKIT_HOST, DEVBOX_REGISTRY, …), gating on DEVBOX_E2E and
// failing when it is empty.
func Env(tb testing.TB, name string) string {
	tb.Helper()
	RequireE2E(tb)
	v := os.Getenv(name)
	if v == "" {
		tb.Fatalf("%s is set but %s is empty: run the tests through scripts/test", E2EVar, name)
	}
	return v
}

// WantErr checks err against a table case's expected error: with want
// empty, err must be nil (else tb fails at once); otherwise err must
// contain want. It returns true when an error was wanted, i.e. the case
// has nothing more to check.
func WantErr(tb testing.TB, err error, want string) bool {
	tb.Helper()
	if want == "" {
		if err != nil {
			tb.Fatal(err)
		}
		return false
	}
	if err == nil || !strings.Contains(err.Error(), want) {
		tb.Fatalf("err = %v, want %q", err, want)
	}
	return true
}
