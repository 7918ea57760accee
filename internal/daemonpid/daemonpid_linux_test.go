//go:build linux

package daemonpid

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestMain(m *testing.M) {
	// Unprivileged runs write their pidfiles as themselves.
	trustedOwner = os.Geteuid()
	switch os.Getenv(helperEnv) {
	case "":
		os.Exit(m.Run())
	default:
		os.Exit(helper(os.Getenv(helperEnv), os.Args[1:]))
	}
}

// TestDaemonPID: a pidfile that survived a container restart names a pid of
// the new start; only the (pid, start time, uid) of the filter itself may
// count as the running filter, or StopDNS signals an innocent process (in
// practice a thread of the entrypoint, which then dies).
func TestDaemonPID(t *testing.T) {
	proc := t.TempDir()
	stat := func(pid int, state string, start uint64, uid int) {
		dir := filepath.Join(proc, fmt.Sprint(pid))
		os.MkdirAll(dir, 0o755)
		// The command name holds a space and a parenthesis, as names may.
		line := fmt.Sprintf("%d (dev box) x) %s 1 1 1 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 %d 0 0\n", pid, state, start)
		if err := os.WriteFile(filepath.Join(dir, "stat"), []byte(line), 0o644); err != nil {
			t.Fatal(err)
		}
		status := fmt.Sprintf("Name:\tdevbox\nUid:\t%d\t%d\t%d\t%d\n", uid, uid, uid, uid)
		if err := os.WriteFile(filepath.Join(dir, "status"), []byte(status), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	stat(30, "S", 5000, 998) // the filter, started at tick 5000
	stat(7, "S", 9000, 0)    // the new start's entrypoint, where a stale pidfile points
	stat(40, "Z", 5000, 998) // a dead filter not yet reaped
	stat(50, "S", 5000, 1000)
	rec := func(pid int, start uint64) string {
		b, _ := json.Marshal(Record{PID: pid, Start: start, UID: 998})
		return string(b)
	}
	for _, tc := range []struct {
		name, content string
		mode          os.FileMode
		wantAlive     bool
	}{
		{"the filter", rec(30, 5000), 0o644, true},
		{"stale: same pid, another process", rec(7, 5000), 0o644, false},
		{"zombie", rec(40, 5000), 0o644, false},
		{"gone", rec(41, 5000), 0o644, false},
		{"same pid and start, another uid", rec(50, 5000), 0o644, false},
		{"writable by others", rec(30, 5000), 0o666, false},
		{"writable by its group", rec(30, 5000), 0o664, false},
		{"old format: pid and start only", "30 5000\n", 0o644, false},
		{"garbage", "x y\n", 0o644, false},
		{"negative", `{"pid":-1,"start":5000,"uid":998}`, 0o644, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pidfile := filepath.Join(t.TempDir(), "dns.pid")
			os.WriteFile(pidfile, []byte(tc.content), 0o644)
			os.Chmod(pidfile, tc.mode)
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
	pidfile := filepath.Join(t.TempDir(), "dns.pid")
	if err := Write(pidfile, Record{PID: self, UID: os.Geteuid()}); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(pidfile); fi.Mode().Perm() != 0o644 {
		t.Errorf("pidfile mode %v, want 0644", fi.Mode())
	}
	if _, alive := Read(pidfile, "/proc"); !alive {
		t.Error("this process, recorded with its start time, is not alive")
	}
	r, _ := Load(pidfile)
	r.Start++
	b, _ := json.Marshal(r)
	os.WriteFile(pidfile, b, 0o644)
	if _, alive := Read(pidfile, "/proc"); alive {
		t.Error("a pid recorded with another start time counts as the filter")
	}
	if _, err := Load(pidfile); err != nil {
		t.Fatal(err)
	}
	trustedOwner = os.Geteuid() + 1
	defer func() { trustedOwner = os.Geteuid() }()
	if _, err := Load(pidfile); err == nil || !strings.Contains(err.Error(), "not trusted") {
		t.Errorf("a pidfile of another owner: %v", err)
	}
}
