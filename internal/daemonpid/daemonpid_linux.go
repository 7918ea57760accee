//go:build linux

// Package daemonpid starts and stops devbox's detached daemons (the DNS
// filter, the name gate, the credential gateway), makes the sockets they
// serve on, and keeps their pidfiles: a pid together with the process's
// start time, its uid and the inodes of its sockets, so that a stale or
// foreign file never names another process and a port someone else took
// is never counted as the daemon's.
//
// The pidfiles live in layout.RunDir, which Docker keeps across a container
// restart, while pids start again from 1 in the new PID namespace: the
// recorded number can then name anything of the new start — a thread of the
// entrypoint itself, which a stop would kill. A pid alone cannot tell; the
// pair (pid, start time in clock ticks since boot) names one process.
package daemonpid

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Record is what a pidfile holds.
type Record struct {
	PID int `json:"pid"`
	// Start is the process's start time in clock ticks since boot.
	Start uint64 `json:"start"`
	// UID is the uid it was started as: a process at PID running as
	// another uid is not the daemon.
	UID int `json:"uid"`
	// Sockets are the sockets root made and handed to it (Listen).
	Sockets []Socket `json:"sockets,omitempty"`
	// Notes say which sockets were left out and why (IPv6 off).
	Notes []string `json:"notes,omitempty"`
	// Holder is the process that keeps the daemon's ports while it is
	// down (see Listen), and HolderStart its start time; 0 for none.
	Holder      int    `json:"holder,omitempty"`
	HolderStart uint64 `json:"holderStart,omitempty"`
	HolderUID   int    `json:"holderUid,omitempty"`
}

// Write records r, with r.PID's start time, in path and path+".json",
// root's files (0644; owner and mode checked by Load), each written
// atomically. path holds "PID START" alone, as it always has, for shell
// scripts and older readers; the .json file holds the whole record, and
// is written first.
func Write(path string, r Record) error {
	start, err := StartTime("/proc", r.PID)
	if err != nil {
		return fmt.Errorf("pid %d: %w", r.PID, err)
	}
	r.Start = start
	if r.Holder != 0 {
		if r.HolderStart, err = StartTime("/proc", r.Holder); err != nil {
			return fmt.Errorf("holder pid %d: %w", r.Holder, err)
		}
	}
	raw, _ := json.Marshal(r)
	if err := writeFile(path+".json", append(raw, '\n')); err != nil {
		return err
	}
	return writeFile(path, fmt.Appendf(nil, "%d %d\n", r.PID, r.Start))
}

func writeFile(path string, b []byte) error {
	tmp := path + ".tmp"
	os.Remove(tmp)
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	// WriteFile keeps the mode of a file that exists; the umask may
	// narrow a new one. Either way, exactly 0644.
	if err := os.Chmod(tmp, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// trustedOwner is the uid a pidfile must belong to: root, which starts
// every daemon. Tests that run unprivileged replace it.
var trustedOwner = 0

// Load reads the record in path and path+".json", and refuses files that
// root did not write alone (owned by another uid, or writable by group
// or others) or that disagree on the pid and start time. A record whose
// pid runs something else is no error here; Alive says.
func Load(path string) (Record, error) {
	var r Record
	head, err := readTrusted(path)
	if err != nil {
		return r, err
	}
	var pid int
	var start uint64
	if n, _ := fmt.Sscanf(string(head), "%d %d", &pid, &start); n != 2 || pid <= 0 {
		return r, fmt.Errorf("%s: not a devbox pidfile", path)
	}
	raw, err := readTrusted(path + ".json")
	if err != nil {
		return r, err
	}
	if err := json.Unmarshal(raw, &r); err != nil || r.PID != pid || r.Start != start {
		return Record{}, fmt.Errorf("%s.json: not the record of pid %d started at %d", path, pid, start)
	}
	return r, nil
}

// readTrusted reads path when it is a regular file of trustedOwner that
// no one else may write.
func readTrusted(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || int(st.Uid) != trustedOwner || fi.Mode().Perm()&0o022 != 0 || !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not trusted: owner uid %d, mode %v (want a regular file of uid %d, writable by it alone)", path, st.Uid, fi.Mode(), trustedOwner)
	}
	return io.ReadAll(io.LimitReader(f, 64<<10))
}

// Alive reports whether r's process, under proc (normally /proc), is the
// one recorded: alive, not a zombie, started when the record says and
// running as its uid. The error says which of these does not hold.
func (r Record) Alive(proc string) error {
	return alive(proc, r.PID, r.Start, r.UID)
}

// HolderAlive is Alive for the record's holder (nil when it has none).
func (r Record) HolderAlive(proc string) error {
	if r.Holder == 0 {
		return nil
	}
	if err := alive(proc, r.Holder, r.HolderStart, r.HolderUID); err != nil {
		return fmt.Errorf("the holder of its ports: %w", err)
	}
	return nil
}

func alive(proc string, pid int, start uint64, wantUID int) error {
	got, err := StartTime(proc, pid)
	if err != nil {
		return fmt.Errorf("pid %d is not running: %w", pid, err)
	}
	if got != start {
		return fmt.Errorf("pid %d is another process (started at tick %d, the recorded one at %d)", pid, got, start)
	}
	uid, err := procUID(proc, pid)
	if err != nil {
		return fmt.Errorf("pid %d: %w", pid, err)
	}
	if uid != wantUID {
		return fmt.Errorf("pid %d runs as uid %d, not the recorded uid %d", pid, uid, wantUID)
	}
	return nil
}

// Read returns the pid in path and whether that process, under proc
// (normally /proc), is the one recorded (Load, then Alive).
func Read(path, proc string) (int, bool) {
	r, err := Load(path)
	if err != nil {
		return 0, false
	}
	return r.PID, r.Alive(proc) == nil
}

// Stop stops the process recorded in path, if it runs, then its holder:
// SIGTERM, two seconds to exit, then SIGKILL.
func Stop(path string) error {
	r, err := Load(path)
	if err != nil {
		return nil
	}
	if r.Alive("/proc") == nil {
		if err := kill(r.PID); err != nil {
			return err
		}
	}
	if r.Holder != 0 && r.HolderAlive("/proc") == nil {
		return kill(r.Holder)
	}
	return nil
}

func kill(pid int) error {
	unix.Kill(pid, unix.SIGTERM)
	for i := 0; i < 40; i++ {
		if unix.Kill(pid, 0) != nil {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := unix.Kill(pid, unix.SIGKILL); err != nil && !errors.Is(err, unix.ESRCH) {
		return fmt.Errorf("stop pid %d: %w", pid, err)
	}
	return nil
}

// StartTime returns field 22 of PROC/PID/stat, the process's start time in
// clock ticks since boot, or an error when pid is gone or a zombie.
func StartTime(proc string, pid int) (uint64, error) {
	raw, err := os.ReadFile(filepath.Join(proc, strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) is in parentheses and may hold spaces or
	// parentheses itself: the fields that follow start after the last ")".
	i := strings.LastIndexByte(string(raw), ')')
	if i < 0 {
		return 0, fmt.Errorf("%s/%d/stat: no command name", proc, pid)
	}
	f := strings.Fields(string(raw[i+1:]))
	// f[0] is field 3 (state), so field 22 is f[19]. A thread id also has
	// a /proc/TID/stat, with the thread's own start time, so it never
	// matches a recorded process start.
	if len(f) < 20 {
		return 0, fmt.Errorf("%s/%d/stat: %d fields", proc, pid, len(f)+2)
	}
	if f[0] == "Z" || f[0] == "X" {
		return 0, fmt.Errorf("pid %d is a zombie", pid)
	}
	return strconv.ParseUint(f[19], 10, 64)
}

// procUID returns the real uid in PROC/PID/status, failing when the
// effective uid differs (a daemon never changes uid once started).
func procUID(proc string, pid int) (int, error) {
	raw, err := os.ReadFile(filepath.Join(proc, strconv.Itoa(pid), "status"))
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(string(raw), "\n") {
		v, ok := strings.CutPrefix(l, "Uid:")
		if !ok {
			continue
		}
		f := strings.Fields(v)
		if len(f) < 2 || f[0] != f[1] {
			return 0, fmt.Errorf("status: Uid line %q", l)
		}
		return strconv.Atoi(f[0])
	}
	return 0, errors.New("status: no Uid line")
}
