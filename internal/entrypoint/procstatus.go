package entrypoint

import (
	"fmt"
	"strconv"
	"strings"
)

// ProcStatus is what /proc/<pid>/status says about a process's privileges.
type ProcStatus struct {
	// State is the one-letter state ("R", "S", "Z" for a zombie, ...).
	State    string
	UID, GID [4]int // real, effective, saved, filesystem
	// Capability sets as bit masks.
	CapInh, CapPrm, CapEff, CapBnd, CapAmb uint64
	NoNewPrivs                             bool
	// Seccomp is the mode: 0 off, 1 strict, 2 filter.
	Seccomp int
}

// ParseProcStatus parses the text of /proc/<pid>/status. Missing
// capability lines are an error: a kernel too old to report them cannot be
// checked, and "could not check" must not read as "no capabilities".
func ParseProcStatus(text string) (ProcStatus, error) {
	var ps ProcStatus
	seen := map[string]bool{}
	for _, line := range strings.Split(text, "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		v = strings.TrimSpace(v)
		var err error
		switch k {
		case "Uid", "Gid":
			f := strings.Fields(v)
			if len(f) != 4 {
				return ps, fmt.Errorf("status: %s: want 4 ids, got %q", k, v)
			}
			dst := &ps.UID
			if k == "Gid" {
				dst = &ps.GID
			}
			for i := range f {
				if dst[i], err = strconv.Atoi(f[i]); err != nil {
					return ps, fmt.Errorf("status: %s: %w", k, err)
				}
			}
		case "CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb":
			n, err := strconv.ParseUint(v, 16, 64)
			if err != nil {
				return ps, fmt.Errorf("status: %s: %w", k, err)
			}
			switch k {
			case "CapInh":
				ps.CapInh = n
			case "CapPrm":
				ps.CapPrm = n
			case "CapEff":
				ps.CapEff = n
			case "CapBnd":
				ps.CapBnd = n
			case "CapAmb":
				ps.CapAmb = n
			}
		case "State":
			if f := strings.Fields(v); len(f) > 0 {
				ps.State = f[0]
			}
		case "NoNewPrivs":
			ps.NoNewPrivs = v == "1"
		case "Seccomp":
			if ps.Seccomp, err = strconv.Atoi(v); err != nil {
				return ps, fmt.Errorf("status: Seccomp: %w", err)
			}
		default:
			continue
		}
		seen[k] = true
	}
	for _, k := range []string{"Uid", "Gid", "CapInh", "CapPrm", "CapEff", "CapBnd"} {
		if !seen[k] {
			return ps, fmt.Errorf("status: no %s line", k)
		}
	}
	return ps, nil
}

// Zombie reports whether the process has exited and waits to be reaped:
// it holds no socket and does nothing, whatever its uid.
func (ps ProcStatus) Zombie() bool { return ps.State == "Z" }

// Unprivileged reports why the process is not unprivileged: any capability
// in its effective, permitted, inheritable or ambient set, or no_new_privs
// off. The bounding set is not checked here: with no_new_privs on, nothing
// the process execs can draw from it (`docker exec -u` leaves it as the
// container's); DropAndExec empties it as well.
func (ps ProcStatus) Unprivileged() error {
	var bad []string
	for _, c := range []struct {
		name string
		v    uint64
	}{{"effective", ps.CapEff}, {"permitted", ps.CapPrm}, {"inheritable", ps.CapInh}, {"ambient", ps.CapAmb}} {
		if c.v != 0 {
			bad = append(bad, fmt.Sprintf("%s capabilities %s", c.name, CapNames(c.v)))
		}
	}
	if !ps.NoNewPrivs {
		bad = append(bad, "no_new_privs off")
	}
	if len(bad) > 0 {
		return fmt.Errorf("%s", strings.Join(bad, "; "))
	}
	return nil
}

var capNames = []string{
	"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_DAC_READ_SEARCH", "CAP_FOWNER", "CAP_FSETID",
	"CAP_KILL", "CAP_SETGID", "CAP_SETUID", "CAP_SETPCAP", "CAP_LINUX_IMMUTABLE",
	"CAP_NET_BIND_SERVICE", "CAP_NET_BROADCAST", "CAP_NET_ADMIN", "CAP_NET_RAW", "CAP_IPC_LOCK",
	"CAP_IPC_OWNER", "CAP_SYS_MODULE", "CAP_SYS_RAWIO", "CAP_SYS_CHROOT", "CAP_SYS_PTRACE",
	"CAP_SYS_PACCT", "CAP_SYS_ADMIN", "CAP_SYS_BOOT", "CAP_SYS_NICE", "CAP_SYS_RESOURCE",
	"CAP_SYS_TIME", "CAP_SYS_TTY_CONFIG", "CAP_MKNOD", "CAP_LEASE", "CAP_AUDIT_WRITE",
	"CAP_AUDIT_CONTROL", "CAP_SETFCAP", "CAP_MAC_OVERRIDE", "CAP_MAC_ADMIN", "CAP_SYSLOG",
	"CAP_WAKE_ALARM", "CAP_BLOCK_SUSPEND", "CAP_AUDIT_READ", "CAP_PERFMON", "CAP_BPF",
	"CAP_CHECKPOINT_RESTORE",
}

// Capability numbers the fence cares about by name.
const (
	CapNetAdmin = 12
	CapNetRaw   = 13
	CapSetPCap  = 8
)

// Has reports whether capability number c is in mask.
func Has(mask uint64, c int) bool { return mask&(1<<uint(c)) != 0 }

// CapNames renders a capability mask as names ("CAP_NET_ADMIN,CAP_NET_RAW").
func CapNames(mask uint64) string {
	var out []string
	for i := 0; i < 64; i++ {
		if mask&(1<<uint(i)) == 0 {
			continue
		}
		if i < len(capNames) {
			out = append(out, capNames[i])
		} else {
			out = append(out, fmt.Sprintf("cap_%d", i))
		}
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, ",")
}
