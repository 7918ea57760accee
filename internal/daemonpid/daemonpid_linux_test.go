//go:build linux

package daemonpid

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// TestDaemonPID: a pidfile that survived a container restart names a pid of
// the new start; only the (pid, start time) pair of the filter itself may
// count as the running filter, or StopDNS signals an innocent process (in
// practice a thread of the entrypoint, which then dies).
func TestDaemonPID(t *testing.T) {
	proc := t.TempDir()
	stat := func(pid int, state string, start uint64) {
		dir := filepath.Join(proc, fmt.Sprint(pid))
		os.MkdirAll(dir, 0o755)
		// The command name holds a space and a parenthesis, as names may.
		line := fmt.Sprintf("%d (dev box) x) %s 1 1 1 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 %d 0 0\n", pid, state, start)
		if err := os.WriteFile(filepath.Join(dir, "stat"), []byte(line), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	stat(30, "S", 5000) // the filter, started at tick 5000
	stat(7, "S", 9000)  // the new start's entrypoint, where a stale pidfile points
	stat(40, "Z", 5000) // a dead filter not yet reaped
	for _, tc := range []struct {
		name, content string
		wantAlive     bool
	}{
		{"the filter", "30 5000\n", true},
		{"stale: same pid, another process", "7 5000\n", false},
		{"zombie", "40 5000\n", false},
		{"gone", "41 5000\n", false},
		{"pid only (no start time)", "7\n", false},
		{"garbage", "x y\n", false},
		{"negative", "-1 5000\n", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pidfile := filepath.Join(t.TempDir(), "dns.pid")
			os.WriteFile(pidfile, []byte(tc.content), 0o644)
			if _, alive := Read(pidfile, proc); alive != tc.wantAlive {
				t.Errorf("alive = %v, want %v", alive, tc.wantAlive)
			}
		})
	}
	if _, alive := Read(filepath.Join(proc, "none"), proc); alive {
		t.Error("a missing pidfile counts as a running filter")
	}

	// The real /proc: this process is what its own pidfile names, and only
	// with its own start time.
	self := os.Getpid()
	start, err := StartTime("/proc", self)
	if err != nil {
		t.Fatal(err)
	}
	pidfile := filepath.Join(t.TempDir(), "dns.pid")
	os.WriteFile(pidfile, []byte(fmt.Sprintf("%d %d\n", self, start)), 0o644)
	if _, alive := Read(pidfile, "/proc"); !alive {
		t.Error("this process, recorded with its start time, is not alive")
	}
	os.WriteFile(pidfile, []byte(fmt.Sprintf("%d %d\n", self, start+1)), 0o644)
	if _, alive := Read(pidfile, "/proc"); alive {
		t.Error("a pid recorded with another start time counts as the filter")
	}
}
