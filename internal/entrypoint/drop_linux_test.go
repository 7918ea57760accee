//go:build linux

package entrypoint

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/devbox-dev/devbox/internal/devboxtest"
)

// TestMain lets TestDropAndExec re-run this test binary as the process that
// drops privileges, since DropAndExec replaces the process it runs in.
func TestMain(m *testing.M) {
	if os.Getenv("DEVBOX_TEST_DROP") == "1" {
		err := DropAndExec(Account{Name: "nobody", UID: 65534, GID: 65534, Groups: []int{65533}, Home: "/"},
			[]string{"cat", "/proc/self/status"}, os.Environ())
		os.Stderr.WriteString(err.Error() + "\n")
		os.Exit(3)
	}
	os.Exit(m.Run())
}

func TestDropAndExec(t *testing.T) {
	devboxtest.RequireRoot(t)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "DEVBOX_TEST_DROP=1")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("drop and exec: %v: %s", err, err.(*exec.ExitError).Stderr)
	}
	ps, err := ParseProcStatus(string(out))
	if err != nil {
		t.Fatal(err)
	}
	if err := ps.Unprivileged(); err != nil {
		t.Errorf("after the drop: %v", err)
	}
	if ps.CapBnd != 0 {
		t.Errorf("bounding set = %s, want empty", CapNames(ps.CapBnd))
	}
	if ps.UID != [4]int{65534, 65534, 65534, 65534} || ps.GID != [4]int{65534, 65534, 65534, 65534} {
		t.Errorf("uid %v gid %v", ps.UID, ps.GID)
	}
	if !strings.Contains(string(out), "Groups:\t65533") {
		t.Errorf("supplementary groups not set:\n%s", out)
	}
}

func TestDropAndExecRefusesRoot(t *testing.T) {
	err := DropAndExec(Account{Name: "root"}, []string{"true"}, nil)
	if err == nil || !strings.Contains(err.Error(), "must not be root") {
		t.Fatalf("err = %v", err)
	}
}
