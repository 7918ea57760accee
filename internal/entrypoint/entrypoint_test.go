package entrypoint

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/devbox-dev/devbox/internal/fence"
)

// fakeFence records the calls the sequence makes and fails where told.
type fakeFence struct {
	failAt string
	calls  []string
}

func (f *fakeFence) step(name string) error {
	f.calls = append(f.calls, name)
	if f.failAt == name {
		return errors.New(name + " broke")
	}
	return nil
}

func (f *fakeFence) Steps() []fence.Step {
	return []fence.Step{
		{Name: "apply", Run: func(context.Context) (string, error) { return "2 names", f.step("apply") }},
		{Name: "dns", Run: func(context.Context) (string, error) { return "", f.step("dns") }},
		{Name: "verify", Run: func(context.Context) (string, error) { return "", f.step("verify") }},
	}
}
func (f *fakeFence) DenyAll(context.Context) error { return f.step("denyall") }

func TestRun(t *testing.T) {
	for _, tc := range []struct {
		failAt    string
		wantState State
		wantCalls string
		wantErr   string
	}{
		{"", Fenced, "apply dns verify", ""},
		{"apply", Failed, "apply denyall", "apply: apply broke"},
		{"dns", Failed, "apply dns denyall", "dns: dns broke"},
		{"verify", Failed, "apply dns verify denyall", "verify: verify broke"},
	} {
		t.Run("fail="+tc.failAt, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "run", "devbox", "status")
			// A stale success from the previous start must be replaced.
			if err := WriteStatus(path, Status{State: Fenced}); err != nil {
				t.Fatal(err)
			}
			f := &fakeFence{failAt: tc.failAt}
			var out, errb bytes.Buffer
			st, err := Run(context.Background(), Options{Fence: f, StatusPath: path, Policy: "/p.json", User: "dev", Stdout: &out, Stderr: &errb})
			if got := strings.Join(f.calls, " "); got != tc.wantCalls {
				t.Errorf("calls = %q, want %q", got, tc.wantCalls)
			}
			if st.State != tc.wantState {
				t.Errorf("state = %q, want %q", st.State, tc.wantState)
			}
			disk, rerr := ReadStatus(path)
			if rerr != nil {
				t.Fatal(rerr)
			}
			if disk.State != tc.wantState || disk.User != "dev" || disk.Policy != "/p.json" {
				t.Errorf("status on disk = %+v", disk)
			}
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("Run: %v", err)
				}
				if !strings.HasPrefix(out.String(), "devbox: fenced and verified in ") || !strings.Contains(out.String(), "2 names") {
					t.Errorf("summary = %q", out.String())
				}
				if errb.Len() != 0 {
					t.Errorf("stderr on success: %q", errb.String())
				}
				if len(disk.Steps) != 3 {
					t.Errorf("steps = %+v", disk.Steps)
				}
				return
			}
			if err == nil || err.Error() != tc.wantErr {
				t.Fatalf("err = %v, want %q", err, tc.wantErr)
			}
			if disk.Reason != tc.wantErr {
				t.Errorf("reason on disk = %q", disk.Reason)
			}
			if !strings.Contains(errb.String(), "THE FENCE IS NOT UP") || !strings.Contains(errb.String(), tc.wantErr) {
				t.Errorf("stderr = %q", errb.String())
			}
			if out.Len() != 0 {
				t.Errorf("success line printed on failure: %q", out.String())
			}
		})
	}
}

func TestRunDenyAllFails(t *testing.T) {
	f := &fakeFence{failAt: "denyall"}
	// Apply succeeds, DenyAll is only reached through a failure: make the
	// status unwritable by putting a file where its directory should be.
	blocker := filepath.Join(t.TempDir(), "file")
	os.WriteFile(blocker, nil, 0o644)
	_, err := Run(context.Background(), Options{Fence: f, StatusPath: filepath.Join(blocker, "status")})
	if err == nil || !strings.Contains(err.Error(), "deny-all fallback also failed") || !strings.Contains(err.Error(), "record status") {
		t.Fatalf("err = %v", err)
	}
	if got := strings.Join(f.calls, " "); got != "denyall" {
		t.Errorf("calls = %q: nothing may be applied when the status cannot be recorded", got)
	}
}

func TestReadStatusMissing(t *testing.T) {
	_, err := ReadStatus(filepath.Join(t.TempDir(), "nope"))
	if !errors.Is(err, ErrNoStatus) {
		t.Fatalf("err = %v, want ErrNoStatus", err)
	}
}

func TestStatusFileMode(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "devbox")
	os.MkdirAll(dir, 0o777)
	os.Chmod(dir, 0o777)
	path := filepath.Join(dir, "status")
	if err := WriteStatus(path, Status{State: Fenced}); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]os.FileMode{dir: 0o755 | os.ModeDir, path: 0o644} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode() != want {
			t.Errorf("%s mode = %v, want %v", p, fi.Mode(), want)
		}
	}
}

func TestFencedThisStart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "status")
	if _, ok := FencedThisStart(path, "boot/1"); ok {
		t.Fatal("fenced without a status file")
	}
	f := &fakeFence{}
	if _, err := Run(context.Background(), Options{Fence: f, StatusPath: path, StartID: "boot/1"}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		id   string
		want bool
	}{{"boot/1", true}, {"boot/2", false}, {"", false}} {
		if _, ok := FencedThisStart(path, tc.id); ok != tc.want {
			t.Errorf("FencedThisStart(%q) = %v, want %v", tc.id, ok, tc.want)
		}
	}
	f.failAt = "verify"
	Run(context.Background(), Options{Fence: f, StatusPath: path, StartID: "boot/1"})
	if _, ok := FencedThisStart(path, "boot/1"); ok {
		t.Error("a failed start still counts as fenced")
	}
}

func TestStartID(t *testing.T) {
	id := StartID()
	if id == "" || !strings.Contains(id, "/") {
		t.Fatalf("StartID() = %q", id)
	}
	if again := StartID(); again != id {
		t.Errorf("StartID changed within one start: %q then %q", id, again)
	}
}
