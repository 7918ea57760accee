package devboxtest

import (
	"io"
	"os"
	"path/filepath"
	"testing"
)

// SharedTempDir makes a temporary directory other uids can enter (0755),
// removed when the test ends: t.TempDir's parent is 0700, closed to the
// daemons' and the agent's uids.
func SharedTempDir(tb testing.TB, prefix string) string {
	tb.Helper()
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		tb.Fatal(err)
	}
	return dir
}

// CopyFile copies src to dst, mode 0755 (a binary to run).
func CopyFile(tb testing.TB, src, dst string) {
	tb.Helper()
	in, err := os.Open(src)
	if err != nil {
		tb.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		tb.Fatal(err)
	}
	_, err = io.Copy(out, in)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		tb.Fatal(err)
	}
}

// CopyTestBinary copies the running test binary to dir/name and returns
// its path, for running it as another uid: go test's own work directory
// is private to root.
func CopyTestBinary(tb testing.TB, dir, name string) string {
	tb.Helper()
	self, err := os.Executable()
	if err != nil {
		tb.Fatal(err)
	}
	bin := filepath.Join(dir, name)
	CopyFile(tb, self, bin)
	return bin
}
