package entrypoint

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func fakeStatus(tgid, uid int, state string) string {
	return fmt.Sprintf("Name:\tdevbox\nState:\t%s\nTgid:\t%d\nUid:\t%d\t%d\t%d\t%d\nGid:\t%d\t%d\t%d\t%d\n"+
		"CapInh:\t0000000000000000\nCapPrm:\t0000000000001000\nCapEff:\t0000000000001000\nCapBnd:\t00000000a80435fb\nCapAmb:\t0000000000001000\n",
		state, tgid, uid, uid, uid, uid, uid, uid, uid, uid)
}

// TestClearStaleDNSPID: a pidfile surviving a container restart must only
// be trusted when it names the DNS filter; anything else is removed so the
// firewall never signals a process of the new start.
func TestClearStaleDNSPID(t *testing.T) {
	proc := t.TempDir()
	for pid, text := range map[int]string{
		30: fakeStatus(30, 998, "S (sleeping)"), // the filter
		31: fakeStatus(7, 0, "S (sleeping)"),    // a thread of the entrypoint (pid 7)
		7:  fakeStatus(7, 0, "S (sleeping)"),    // the entrypoint itself
		40: fakeStatus(40, 998, "Z (zombie)"),   // a dead filter
		41: fakeStatus(41, 1000, "S (sleeping)"),
	} {
		os.MkdirAll(filepath.Join(proc, strconv.Itoa(pid)), 0o755)
		os.WriteFile(filepath.Join(proc, strconv.Itoa(pid), "status"), []byte(text), 0o644)
	}
	for _, tc := range []struct {
		name, content string // content "-" means no pidfile
		wantWhy       string // "" means kept
	}{
		{"no pidfile", "-", ""},
		{"the running filter", "30\n", ""},
		{"a thread of the entrypoint", "31\n", "pid 31 is a thread of process 7"},
		{"the entrypoint", "7\n", "pid 7 runs as uid 0, not the DNS filter's 998"},
		{"a zombie filter", "40\n", "pid 40 is a zombie"},
		{"the agent's process", "41\n", "runs as uid 1000"},
		{"gone", "55\n", "pid 55 is not running"},
		{"garbage", "x\n", `"x" is not a pid`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pidfile := filepath.Join(t.TempDir(), "dns.pid")
			if tc.content != "-" {
				os.WriteFile(pidfile, []byte(tc.content), 0o644)
			}
			why, err := clearStaleDNSPID(pidfile, 998, proc)
			if err != nil {
				t.Fatal(err)
			}
			_, statErr := os.Stat(pidfile)
			if tc.wantWhy == "" {
				if why != "" || (tc.content != "-" && statErr != nil) {
					t.Errorf("removed (%q, %v), want the pidfile kept", why, statErr)
				}
				return
			}
			if !strings.Contains(why, tc.wantWhy) || statErr == nil {
				t.Errorf("why %q (file still there: %v), want %q and the file removed", why, statErr == nil, tc.wantWhy)
			}
		})
	}
}

// TestClearStaleDNSPIDRealThread uses the real /proc: a pidfile naming a
// thread of this very process (what a restarted entrypoint's threads look
// like to a stale pidfile) is removed, and this process is not signalled.
func TestClearStaleDNSPIDRealThread(t *testing.T) {
	// Two goroutines locked to their own threads: at most one of them
	// can be on the main thread, whose id is the process id.
	tids := make(chan int)
	release := make(chan struct{})
	defer close(release)
	for range 2 {
		go func() {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			tids <- unix.Gettid()
			<-release
		}()
	}
	tid := <-tids
	if other := <-tids; tid == os.Getpid() {
		tid = other
	}
	pidfile := filepath.Join(t.TempDir(), "dns.pid")
	os.WriteFile(pidfile, []byte(strconv.Itoa(tid)+"\n"), 0o644)
	why, err := ClearStaleDNSPID(pidfile, 998)
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("pid %d is a thread of process %d,", tid, os.Getpid()); !strings.HasPrefix(why, want) {
		t.Errorf("why %q, want %q", why, want)
	}
	if _, err := os.Stat(pidfile); err == nil {
		t.Error("the pidfile naming a thread was kept")
	}
}
