//go:build linux

// Package daemonpid starts and stops devbox's detached daemons (the DNS
// filter, the name gate, the credential gateway), and keeps their pidfiles:
// a pid together with the process's start time, so that a stale file never
// names another process.
//
// The pidfiles live in layout.RunDir, which Docker keeps across a container
// restart, while pids start again from 1 in the new PID namespace: the
// recorded number can then name anything of the new start — a thread of the
// entrypoint itself, which a stop would kill. A pid alone cannot tell; the
// pair (pid, start time in clock ticks since boot) names one process.
package daemonpid

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Write records pid and its start time in path.
func Write(path string, pid int) error {
	start, err := StartTime("/proc", pid)
	if err != nil {
		return fmt.Errorf("pid %d: %w", pid, err)
	}
	return os.WriteFile(path, []byte(fmt.Sprintf("%d %d\n", pid, start)), 0o644)
}

// Read returns the pid in path and whether that process, under proc
// (normally /proc), is the one recorded: alive and started when the file
// says.
func Read(path, proc string) (int, bool) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	var pid int
	var start uint64
	if n, _ := fmt.Sscanf(string(raw), "%d %d", &pid, &start); n != 2 || pid <= 0 {
		return 0, false
	}
	got, err := StartTime(proc, pid)
	if err != nil || got != start {
		return pid, false
	}
	return pid, true
}

// Stop stops the process recorded in path, if it runs: SIGTERM, two
// seconds to exit, then SIGKILL.
func Stop(path string) error {
	pid, alive := Read(path, "/proc")
	if !alive {
		return nil
	}
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
