//go:build linux

package daemonpid

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
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
		name, head, record string
		headMode, recMode  os.FileMode
		wantAlive          bool
	}{
		{"the filter", "30 5000\n", rec(30, 5000), 0o644, 0o644, true},
		{"stale: same pid, another process", "7 5000\n", rec(7, 5000), 0o644, 0o644, false},
		// What a restart leaves when a shell rewrote the pid (the e2e
		// stale-pidfile test): the two files disagree.
		{"the record names another pid", "7 5000\n", rec(30, 5000), 0o644, 0o644, false},
		{"zombie", "40 5000\n", rec(40, 5000), 0o644, 0o644, false},
		{"gone", "41 5000\n", rec(41, 5000), 0o644, 0o644, false},
		{"same pid and start, another uid", "50 5000\n", rec(50, 5000), 0o644, 0o644, false},
		{"pidfile writable by others", "30 5000\n", rec(30, 5000), 0o666, 0o644, false},
		{"record writable by its group", "30 5000\n", rec(30, 5000), 0o644, 0o664, false},
		{"no record", "30 5000\n", "", 0o644, 0o644, false},
		{"pid only (no start time)", "30\n", rec(30, 5000), 0o644, 0o644, false},
		{"garbage", "x y\n", rec(30, 5000), 0o644, 0o644, false},
		{"negative", "-1 5000\n", `{"pid":-1,"start":5000,"uid":998}`, 0o644, 0o644, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pidfile := filepath.Join(t.TempDir(), "dns.pid")
			os.WriteFile(pidfile, []byte(tc.head), 0o644)
			os.Chmod(pidfile, tc.headMode)
			if tc.record != "" {
				os.WriteFile(pidfile+".json", []byte(tc.record), 0o644)
				os.Chmod(pidfile+".json", tc.recMode)
			}
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
	if head, _ := os.ReadFile(pidfile); !regexp.MustCompile(`^[0-9]+ [0-9]+\n$`).Match(head) {
		t.Errorf("pidfile holds %q, want \"PID START\" alone (shell scripts read it)", head)
	}
	r, _ := Load(pidfile)
	r.Start++
	os.WriteFile(pidfile, fmt.Appendf(nil, "%d %d\n", r.PID, r.Start), 0o644)
	b, _ := json.Marshal(r)
	os.WriteFile(pidfile+".json", b, 0o644)
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
