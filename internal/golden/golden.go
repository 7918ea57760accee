// Package golden compares test output with golden files, and rewrites them
// when the test binary runs with -update (go test ./pkg -update).
package golden

import (
	"bytes"
	"flag"
	"os"
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
