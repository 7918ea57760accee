//go:build linux

package entrypoint

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/devbox-dev/devbox/internal/devboxtest"
)

// home makes a home directory for dev under a temporary root and returns
// the account.
func home(t *testing.T) Account {
	t.Helper()
	h := filepath.Join(t.TempDir(), "home", "dev")
	if err := os.MkdirAll(h, 0o755); err != nil {
		t.Fatal(err)
	}
	return Account{Name: "dev", UID: 1000, GID: 1000, Home: h}
}

func owner(t *testing.T, path string) (uid, gid int, mode os.FileMode) {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	return int(st.Uid), int(st.Gid), fi.Mode().Perm()
}

func TestClaudeConfigDir(t *testing.T) {
	a := Account{Name: "dev", Home: "/home/dev"}
	if got := ClaudeConfigDir(a, ""); got != "/home/dev/.claude" {
		t.Errorf("unset: %q", got)
	}
	if got := ClaudeConfigDir(a, "/home/dev/.config/claude"); got != "/home/dev/.config/claude" {
		t.Errorf("set: %q", got)
	}
}

// TestRepairClaudeStateRefuses covers what is refused before anything is
// changed; it needs no root.
func TestRepairClaudeStateRefuses(t *testing.T) {
	a := home(t)
	outside := filepath.Join(filepath.Dir(filepath.Dir(a.Home)), "etc")
	os.Mkdir(outside, 0o755)
	os.Symlink(outside, filepath.Join(a.Home, "link"))
	os.Mkdir(filepath.Join(outside, "claude"), 0o755)
	os.WriteFile(filepath.Join(a.Home, "file"), nil, 0o644)
	for _, tc := range []struct{ dir, want string }{
		{outside, "is not a clean path inside dev's home"},
		{a.Home, "is not a clean path inside dev's home"},
		{a.Home + "/../../etc", "is not a clean path inside dev's home"},
		{"relative/.claude", "is not a clean path inside dev's home"},
		{a.Home + "/link", "is a symbolic link, not a directory: refused"},
		// A link in the middle of the path is not followed either.
		{a.Home + "/link/claude", "is a symbolic link, not a directory: refused"},
		{a.Home + "/file", "is a regular file, not a directory: refused"},
	} {
		did, err := RepairClaudeState(a, tc.dir)
		if err == nil || !strings.Contains(err.Error(), tc.want) || len(did) != 0 {
			t.Errorf("%s: did %v, err %v; want an error with %q", tc.dir, did, err, tc.want)
		}
	}
	if _, err := RepairClaudeState(Account{Name: "root", Home: "/root"}, "/root/.claude"); err == nil {
		t.Error("repair for root: no error")
	}
	if _, err := RepairClaudeState(Account{Name: "x", UID: 1000, GID: 1000, Home: "/"}, "/.claude"); err == nil {
		t.Error("home /: no error")
	}
	// Missing: Claude Code creates it; nothing to say.
	if did, err := RepairClaudeState(a, a.Home+"/.claude"); err != nil || did != nil {
		t.Errorf("missing directory: did %v, err %v", did, err)
	}
}

func TestRepairClaudeState(t *testing.T) {
	devboxtest.RequireRoot(t)

	t.Run("root-owned volume", func(t *testing.T) {
		a := home(t)
		dir := filepath.Join(a.Home, ".claude")
		os.Mkdir(dir, 0o755) // what Docker makes of a volume the image has no directory for
		os.WriteFile(filepath.Join(dir, ClaudeStateFile), []byte("{}"), 0o600)
		os.Mkdir(filepath.Join(dir, "projects"), 0o755)
		did, err := RepairClaudeState(a, dir)
		if err != nil || len(did) != 2 {
			t.Fatalf("did %v, err %v; want the directory and the state file", did, err)
		}
		t.Logf("repaired: %v", did)
		if u, g, m := owner(t, dir); u != 1000 || g != 1000 || m != 0o700 {
			t.Errorf("%s: %d:%d %o, want 1000:1000 700", dir, u, g, m)
		}
		if u, g, _ := owner(t, filepath.Join(dir, ClaudeStateFile)); u != 1000 || g != 1000 {
			t.Errorf(".claude.json: %d:%d, want 1000:1000", u, g)
		}
		// Not recursive: only the two inodes.
		if u, _, _ := owner(t, filepath.Join(dir, "projects")); u != 0 {
			t.Errorf("projects/ was changed to uid %d", u)
		}
		if did, err := RepairClaudeState(a, dir); err != nil || len(did) != 0 {
			t.Errorf("second start: did %v, err %v; want nothing", did, err)
		}
	})

	t.Run("uid remapped", func(t *testing.T) {
		a := home(t)
		dir := filepath.Join(a.Home, ".claude")
		os.Mkdir(dir, 0o700)
		os.Chown(dir, 1000, 1000)
		a.UID, a.GID = 1001, 1002 // updateRemoteUserUID gave the user another uid
		if did, err := RepairClaudeState(a, dir); err != nil || len(did) != 1 {
			t.Fatalf("did %v, err %v", did, err)
		}
		if u, g, _ := owner(t, dir); u != 1001 || g != 1002 {
			t.Errorf("%d:%d, want 1001:1002", u, g)
		}
	})

	t.Run("configured elsewhere in the home", func(t *testing.T) {
		a := home(t)
		dir := filepath.Join(a.Home, ".config", "claude")
		os.MkdirAll(dir, 0o755)
		if did, err := RepairClaudeState(a, dir); err != nil || len(did) != 1 {
			t.Fatalf("did %v, err %v", did, err)
		}
		if u, _, _ := owner(t, filepath.Join(a.Home, ".config")); u != 0 {
			t.Errorf("the parent was changed to uid %d", u)
		}
	})

	// The state file: only a regular file with one link is handed over.
	target := filepath.Join(t.TempDir(), "shadow")
	os.WriteFile(target, []byte("root's"), 0o600)
	for _, tc := range []struct {
		name  string
		plant func(path string) error
		want  string
	}{
		{"symbolic link", func(p string) error { return os.Symlink(target, p) }, "is not a regular file (symbolic link)"},
		{"hard link", func(p string) error { return os.Link(target, p) }, "has 2 hard links"},
		{"FIFO", func(p string) error { return syscall.Mkfifo(p, 0o600) }, "is not a regular file (FIFO)"},
		{"directory", func(p string) error { return os.Mkdir(p, 0o755) }, "is not a regular file (directory)"},
	} {
		t.Run("state file is a "+tc.name, func(t *testing.T) {
			a := home(t)
			dir := filepath.Join(a.Home, ".claude")
			os.Mkdir(dir, 0o755)
			if err := tc.plant(filepath.Join(dir, ClaudeStateFile)); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			did, err := RepairClaudeState(a, dir)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err %v, want %q", err, tc.want)
			}
			if len(did) != 1 {
				t.Errorf("did %v: the directory itself is still repaired", did)
			}
			if u, _, m := owner(t, target); u != 0 || m != 0o600 {
				t.Errorf("the target became uid %d mode %o", u, m)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("took %v", d)
			}
		})
	}

	t.Run("symbolic link to a root directory", func(t *testing.T) {
		a := home(t)
		victim := filepath.Join(t.TempDir(), "etc")
		os.Mkdir(victim, 0o755)
		os.Symlink(victim, filepath.Join(a.Home, ".claude"))
		if _, err := RepairClaudeState(a, filepath.Join(a.Home, ".claude")); err == nil || !strings.Contains(err.Error(), "symbolic link") {
			t.Errorf("err %v", err)
		}
		if u, _, _ := owner(t, victim); u != 0 {
			t.Errorf("the link's target became uid %d", u)
		}
	})
}
