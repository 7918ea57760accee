//go:build linux

package daemonpid

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestStart(t *testing.T) {
	dir := t.TempDir()
	out, err := os.Create(filepath.Join(dir, "out"))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	spec := func(argv ...string) Spec {
		return Spec{Name: "test daemon", Argv: argv, UID: -1, Output: out,
			PIDFile: filepath.Join(dir, "pid"), Wait: 300 * time.Millisecond,
			Tail: func() string { b, _ := os.ReadFile(out.Name()); return strings.TrimSpace(string(b)) }}
	}

	// Answers: Start returns its pid, recorded in the pidfile.
	s := spec("sleep", "30")
	s.Ready = func(context.Context, int) error { return nil }
	pid, err := Start(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	if got, alive := Read(s.PIDFile, "/proc"); got != pid || !alive {
		t.Errorf("pidfile names %d (alive %v), want %d", got, alive, pid)
	}
	if err := Stop(s.PIDFile); err != nil {
		t.Fatal(err)
	}

	// Exits before it answers: the error says so, with its output.
	s = spec("sh", "-c", "echo bad config >&2; exit 3")
	s.Ready = func(context.Context, int) error { return errors.New("not yet") }
	if _, err := Start(context.Background(), s); err == nil || !strings.Contains(err.Error(), "test daemon exited (exit status 3): bad config") {
		t.Errorf("exiting daemon: %v", err)
	}

	// Never answers: an error after Wait, and the process is killed.
	s = spec("sleep", "30")
	var seen int
	s.Ready = func(_ context.Context, pid int) error { seen = pid; return errors.New("no answer") }
	if _, err := Start(context.Background(), s); err == nil || !strings.Contains(err.Error(), "test daemon did not answer within 300ms: no answer") {
		t.Errorf("silent daemon: %v", err)
	}
	for i := 0; ; i++ {
		if _, err := StartTime("/proc", seen); err != nil {
			break // gone (or a reaped zombie)
		}
		if i == 100 {
			t.Fatalf("silent daemon %d still runs", seen)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
