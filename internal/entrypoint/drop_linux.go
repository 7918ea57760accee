//go:build linux

package entrypoint

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// DropAndExec turns the calling process into acct with no capability of any
// kind and no_new_privs set, then replaces it with argv. It returns only on
// failure. The order matters:
//  1. no_new_privs first, so nothing exec'd later can regain privileges
//     through setuid or file capabilities;
//  2. empty the bounding set while still root (needs CAP_SETPCAP), so no
//     later exec can ever be granted a capability;
//  3. clear the ambient set;
//  4. setgroups, setgid, setuid: leaving uid 0 clears the permitted and
//     effective sets;
//  5. empty the inheritable set, which setuid keeps;
//  6. check /proc/self/status says all of that before exec'ing.
//
// Capabilities, no_new_privs and the bounding set are per thread, so the
// goroutine stays locked to one OS thread from the first prctl to exec.
// setuid/setgid/setgroups apply to all threads (Go does that for us).
func DropAndExec(acct Account, argv []string, env []string) error {
	if len(argv) == 0 {
		return fmt.Errorf("drop privileges: no command to run")
	}
	if acct.UID == 0 || acct.GID == 0 {
		return fmt.Errorf("drop privileges: refusing to run %q as %s (uid %d gid %d): the agent's user must not be root", argv[0], acct.Name, acct.UID, acct.GID)
	}
	path, err := exec.LookPath(argv[0])
	if err != nil {
		return fmt.Errorf("command %q: %w", argv[0], err)
	}
	runtime.LockOSThread()
	// Never unlocked: on success the process is replaced; on failure the
	// thread's privileges are in an unknown state and must not be reused.
	if err := dropPrivileges(acct); err != nil {
		return err
	}
	if err := checkDropped(acct); err != nil {
		return err
	}
	if acct.Home != "" {
		if err := os.Chdir(acct.Home); err != nil {
			// Keep the image's WORKDIR when home is missing.
			_ = err
		}
	}
	return fmt.Errorf("exec %s: %w", path, syscall.Exec(path, argv, userEnv(env, acct)))
}

func dropPrivileges(acct Account) error {
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("drop privileges: set no_new_privs: %w", err)
	}
	last, err := lastCap()
	if err != nil {
		return err
	}
	for c := 0; c <= last; c++ {
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil && err != unix.EINVAL {
			return fmt.Errorf("drop privileges: drop capability %d from the bounding set: %w", c, err)
		}
	}
	// EINVAL: kernel without ambient capabilities, so there are none to clear.
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil && err != unix.EINVAL {
		return fmt.Errorf("drop privileges: clear ambient capabilities: %w", err)
	}
	groups := acct.Groups
	if groups == nil {
		groups = []int{}
	}
	if err := syscall.Setgroups(groups); err != nil {
		return fmt.Errorf("drop privileges: setgroups: %w", err)
	}
	if err := syscall.Setresgid(acct.GID, acct.GID, acct.GID); err != nil {
		return fmt.Errorf("drop privileges: setgid %d: %w", acct.GID, err)
	}
	if err := syscall.Setresuid(acct.UID, acct.UID, acct.UID); err != nil {
		return fmt.Errorf("drop privileges: setuid %d: %w", acct.UID, err)
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("drop privileges: clear capability sets: %w", err)
	}
	return nil
}

func lastCap() (int, error) {
	b, err := os.ReadFile("/proc/sys/kernel/cap_last_cap")
	if err != nil {
		// Old kernels: 40 is CAP_CHECKPOINT_RESTORE, PR_CAPBSET_DROP
		// returns EINVAL for numbers past the kernel's last.
		return 63, nil
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0, fmt.Errorf("/proc/sys/kernel/cap_last_cap: %w", err)
	}
	return n, nil
}

// checkDropped reads this thread's status back: the kernel's word, not ours.
func checkDropped(acct Account) error {
	tid := unix.Gettid()
	b, err := os.ReadFile(fmt.Sprintf("/proc/self/task/%d/status", tid))
	if err != nil {
		return fmt.Errorf("drop privileges: check: %w", err)
	}
	ps, err := ParseProcStatus(string(b))
	if err != nil {
		return fmt.Errorf("drop privileges: check: %w", err)
	}
	if err := ps.Unprivileged(); err != nil {
		return fmt.Errorf("drop privileges: check: %w", err)
	}
	if ps.CapBnd != 0 {
		return fmt.Errorf("drop privileges: check: bounding set still holds %s", CapNames(ps.CapBnd))
	}
	for _, id := range append(ps.UID[:], ps.GID[:]...) {
		if id == 0 {
			return fmt.Errorf("drop privileges: check: still uid/gid 0 (Uid %v Gid %v)", ps.UID, ps.GID)
		}
	}
	if ps.UID[0] != acct.UID {
		return fmt.Errorf("drop privileges: check: uid %d, want %d", ps.UID[0], acct.UID)
	}
	return nil
}

// userEnv returns env with HOME, USER, LOGNAME and SHELL set for acct.
func userEnv(env []string, acct Account) []string {
	set := map[string]string{"USER": acct.Name, "LOGNAME": acct.Name}
	if acct.Home != "" {
		set["HOME"] = acct.Home
	}
	if acct.Shell != "" {
		set["SHELL"] = acct.Shell
	}
	out := make([]string, 0, len(env)+len(set))
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if _, ok := set[k]; ok {
			continue
		}
		out = append(out, kv)
	}
	for _, k := range []string{"HOME", "USER", "LOGNAME", "SHELL"} {
		if v, ok := set[k]; ok {
			out = append(out, k+"="+v)
		}
	}
	return out
}
