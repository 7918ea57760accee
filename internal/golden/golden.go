// Package golden compares test output with golden files, and rewrites them
// when the test binary runs with -update (go test ./pkg -update).
package golden

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite golden files with what the tests produce")

// Check compares got with the file at path, failing tb with both texts when
// they differ. Under -update it writes got to path instead: read the diff
// (git diff) before committing it.
func Check(tb testing.TB, path string, got []byte) {
	tb.Helper()
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			tb.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		tb.Fatalf("%v (go test -update writes it)", err)
	}
	if !bytes.Equal(got, want) {
		tb.Errorf("%s differs from the output (go test -update rewrites it; check the diff):\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

// ForEach runs run as a subtest of t for each file that matches pattern
// (filepath.Glob), named after the file without its directory and
// extension. It fails t when nothing matches, so that a moved or empty
// testdata directory does not pass unnoticed.
func ForEach(t *testing.T, pattern string, run func(t *testing.T, path, name string)) {
	t.Helper()
	paths, err := filepath.Glob(pattern)
	if err != nil || len(paths) == 0 {
		t.Fatalf("no inputs %s: %v", pattern, err)
	}
	for _, p := range paths {
		name := strings.TrimSuffix(filepath.Base(p), filepath.Ext(p))
		t.Run(name, func(t *testing.T) { run(t, p, name) })
	}
}
