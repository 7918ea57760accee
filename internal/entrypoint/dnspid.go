package entrypoint

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
)

// ClearStaleDNSPID removes the DNS filter's pidfile unless it names a live
// DNS filter: a process (not a thread of one), not a zombie, whose real uid
// is uid. It returns why it removed the file ("" when it kept it or there
// was none).
//
// The pidfile lives in /run/devbox, which Docker keeps across a container
// restart, while pids start again from 1 in the new PID namespace. The
// firewall stops "the earlier filter" by signalling the pid in the file, so
// a stale number can name anything of the new start — in practice a thread
// of the entrypoint itself, which then dies of SIGTERM and the container
// exits with the fence half-installed (the ~1 in 6 restart failure). Only
// the filter runs as its uid, and the agent's user cannot take that uid,
// so the uid check cannot be fooled from inside the container.
func ClearStaleDNSPID(pidfile string, uid int) (string, error) {
	return clearStaleDNSPID(pidfile, uid, "/proc")
}

func clearStaleDNSPID(pidfile string, uid int, proc string) (string, error) {
	raw, err := os.ReadFile(pidfile)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("DNS filter pidfile: %w", err)
	}
	why := ""
	pid, perr := strconv.Atoi(strings.TrimSpace(string(raw)))
	if perr != nil || pid <= 0 {
		why = fmt.Sprintf("%q is not a pid", strings.TrimSpace(string(raw)))
	} else if b, err := os.ReadFile(fmt.Sprintf("%s/%d/status", proc, pid)); err != nil {
		why = fmt.Sprintf("pid %d is not running", pid)
	} else if ps, err := ParseProcStatus(string(b)); err != nil {
		why = fmt.Sprintf("pid %d: %v", pid, err)
	} else if ps.Tgid != pid {
		why = fmt.Sprintf("pid %d is a thread of process %d, not the DNS filter", pid, ps.Tgid)
	} else if ps.Zombie() {
		why = fmt.Sprintf("pid %d is a zombie", pid)
	} else if ps.UID[0] != uid {
		why = fmt.Sprintf("pid %d runs as uid %d, not the DNS filter's %d", pid, ps.UID[0], uid)
	}
	if why == "" {
		return "", nil
	}
	if err := os.Remove(pidfile); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("stale DNS filter pidfile (%s): %w", why, err)
	}
	return why, nil
}
