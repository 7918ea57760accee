//go:build linux

package sandbox

import (
	"bytes"
	"encoding/json"
	"slices"
	"testing"

	"github.com/moby/profiles/seccomp"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/devbox-dev/devbox/internal/golden"
)

// bwrapCalls are the calls bubblewrap needs to build a sandbox as a user
// with no capability, which Docker's default profile allows only with
// CAP_SYS_ADMIN (clone only without namespace flags).
var bwrapCalls = []string{"clone", "unshare", "setns", "mount", "umount2", "pivot_root"}

// seccompProfile builds seccomp.json: Docker's default profile, typed, from
// github.com/moby/profiles/seccomp (the version pinned in go.mod), plus
// bwrapCalls unconditionally.
func seccompProfile(t *testing.T) []byte {
	prof := seccomp.DefaultProfile()
	var kept []*seccomp.Syscall
	for _, s := range prof.Syscalls {
		// The default allows clone only without namespace flags, for
		// containers without CAP_SYS_ADMIN; the unconditional rule below
		// replaces it (two rules for one call confuse some runtimes).
		if slices.Equal(s.Names, []string{"clone"}) && len(s.Args) > 0 {
			continue
		}
		kept = append(kept, s)
	}
	kept = append(kept, &seccomp.Syscall{
		LinuxSyscall: specs.LinuxSyscall{Names: bwrapCalls, Action: specs.ActAllow},
		Comment:      "devbox: bubblewrap creates user, mount, PID, IPC, UTS and network namespaces and builds its mount tree as an unprivileged user. These calls only act inside namespaces the caller owns; allowing them exposes the kernel's user-namespace code to the container.",
	})
	prof.Syscalls = kept
	typed, err := json.Marshal(prof)
	if err != nil {
		t.Fatal(err)
	}
	// Written with sorted keys, as `docker` and diff readers expect of a
	// file that changes only when the pinned profile does.
	var generic any
	if err := json.Unmarshal(typed, &generic); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetIndent("", "\t")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(generic); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// TestSeccompProfileGolden regenerates the embedded profile; go test
// ./internal/sandbox -run TestSeccompProfile -update rewrites it after a
// change of the pinned moby/profiles.
func TestSeccompProfileGolden(t *testing.T) {
	got := seccompProfile(t)
	golden.Check(t, "seccomp.json", got)
}
