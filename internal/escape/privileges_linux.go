//go:build linux

package escape

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"

	"github.com/devbox-dev/devbox/internal/entrypoint"
	"github.com/vishvananda/netlink"
)

func ownStatus() (entrypoint.ProcStatus, error) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return entrypoint.ProcStatus{}, err
	}
	return entrypoint.ParseProcStatus(string(b))
}

// ownPrivileges checks one aspect of the suite's own process: holding any
// capability, running without no_new_privs, or any uid 0 is an escape.
func ownPrivileges(what string) error {
	ps, err := ownStatus()
	if err != nil {
		return invalid("%v", err)
	}
	switch what {
	case "caps":
		if m := ps.CapEff | ps.CapPrm | ps.CapAmb | ps.CapInh; m != 0 {
			return escaped("holds %s", entrypoint.CapNames(m))
		}
		return fmt.Errorf("no effective, permitted, inheritable or ambient capability")
	case "nnp":
		if !ps.NoNewPrivs {
			return escaped("no_new_privs is off: setuid and file-capability binaries can raise privileges")
		}
		return fmt.Errorf("no_new_privs is on")
	default:
		for _, id := range ps.UID {
			if id == 0 {
				return escaped("uid %v", ps.UID)
			}
		}
		return fmt.Errorf("uid %d", ps.UID[0])
	}
}

// setuidBinaries looks for setuid/setgid executables; one is an escape only
// while no_new_privs is off, since no_new_privs makes the kernel ignore the
// bits.
func setuidBinaries(context.Context) error {
	var found []string
	for _, dir := range []string{"/bin", "/sbin", "/usr/bin", "/usr/sbin", "/usr/local/bin"} {
		filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() && p != dir {
				if d != nil && d.IsDir() {
					return filepath.SkipDir
				}
				return nil
			}
			fi, err := d.Info()
			if err == nil && fi.Mode()&(fs.ModeSetuid|fs.ModeSetgid) != 0 {
				found = append(found, p)
			}
			return nil
		})
	}
	ps, err := ownStatus()
	if err != nil {
		return invalid("%v", err)
	}
	if len(found) > 0 && !ps.NoNewPrivs {
		return escaped("no_new_privs off and setuid/setgid binaries present: %s", strings.Join(found, " "))
	}
	if len(found) == 0 {
		return errors.New("none found")
	}
	return fmt.Errorf("no_new_privs on, so these are inert: %s", strings.Join(found, " "))
}

func ptraceUID(uid int) error {
	pids, err := uidProcesses(uid)
	if err != nil {
		return invalid("%v", err)
	}
	if len(pids) == 0 {
		return invalid("no process with uid %d: the DNS filter is not running", uid)
	}
	// ptrace is per thread: attach and detach from the same one.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var errs []string
	for _, pid := range pids {
		if err := syscall.PtraceAttach(pid); err == nil {
			var ws syscall.WaitStatus
			syscall.Wait4(pid, &ws, syscall.WALL, nil)
			syscall.PtraceDetach(pid)
			return escaped("attached to pid %d", pid)
		} else {
			errs = append(errs, fmt.Sprintf("pid %d: %v", pid, err))
		}
	}
	return errors.New(strings.Join(errs, "; "))
}

func netlinkIpsetFlush(context.Context) error {
	sets, err := netlink.IpsetListAll()
	if err != nil {
		// Listing is refused too; try flushing a name devbox could use.
		if ferr := netlink.IpsetFlush("devbox-allow4"); ferr == nil {
			return escaped("flushed devbox-allow4")
		} else {
			return fmt.Errorf("list: %v; flush: %v", err, ferr)
		}
	}
	var errs []string
	for _, s := range sets {
		if err := netlink.IpsetFlush(s.SetName); err == nil {
			return escaped("flushed %s", s.SetName)
		} else {
			errs = append(errs, s.SetName+": "+err.Error())
		}
	}
	if len(errs) == 0 {
		return invalid("listed no sets, so none could be flushed")
	}
	return errors.New(strings.Join(errs, "; "))
}

// netlinkSetMTU sets lo's MTU to the value it already has: harmless if it
// succeeds, and it needs CAP_NET_ADMIN like any other change.
func netlinkSetMTU(context.Context) error {
	lo, err := netlink.LinkByName("lo")
	if err != nil {
		return invalid("%v", err)
	}
	if err := netlink.LinkSetMTU(lo, lo.Attrs().MTU); err != nil {
		return err
	}
	return escaped("changed lo's MTU")
}
