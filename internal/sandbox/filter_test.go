package sandbox

import (
	"encoding/binary"
	"syscall"
	"testing"
)

// call is one system call as seccomp sees it: struct seccomp_data's
// number, architecture and first argument.
type call struct {
	arch, nr uint32
	arg0     uint64
}

// runFilter interprets the classic BPF program for one system call: the
// subset of instructions seccompFilter emits, loads from seccomp_data as
// the kernel lays it out on a little-endian machine.
func runFilter(t *testing.T, prog []byte, c call) uint32 {
	t.Helper()
	var acc uint32
	for pc := 0; pc*8 < len(prog); pc++ {
		in := prog[pc*8:]
		code, jt, jf, k := binary.NativeEndian.Uint16(in), in[2], in[3], binary.NativeEndian.Uint32(in[4:])
		switch code {
		case bpfLdWAbs:
			// struct seccomp_data { int nr; __u32 arch; __u64
			// instruction_pointer; __u64 args[6]; }, written out here
			// rather than taken from the filter's constants.
			words := map[uint32]uint32{0: c.nr, 4: c.arch, 16: uint32(c.arg0), 20: uint32(c.arg0 >> 32)}
			v, ok := words[k]
			if !ok {
				t.Fatalf("load of seccomp_data offset %d at %d", k, pc)
			}
			acc = v
		case bpfJeqK, bpfJgeK, bpfJsetK:
			if code == bpfJeqK && acc == k || code == bpfJgeK && acc >= k || code == bpfJsetK && acc&k != 0 {
				pc += int(jt)
			} else {
				pc += int(jf)
			}
		case bpfRetK:
			return k
		default:
			t.Fatalf("unknown instruction %#x at %d", code, pc)
		}
	}
	t.Fatal("fell off the end of the program")
	return 0
}

func TestSeccompFilter(t *testing.T) {
	eperm, enosys := retErrno|uint32(syscall.EPERM), retErrno|uint32(syscall.ENOSYS)
	for goarch, arch := range auditArch {
		prog, err := seccompFilter(goarch)
		if err != nil {
			t.Fatal(err)
		}
		check := func(what string, c call, want uint32) {
			t.Helper()
			c.arch = arch
			if got := runFilter(t, prog, c); got != want {
				t.Errorf("%s %s: %#x, want %#x", goarch, what, got, want)
			}
		}
		for _, d := range deniedSyscalls {
			check(d.name, call{nr: d.nr[goarch]}, retErrno|uint32(d.errno))
		}
		// read, write, execve on amd64 (other calls on arm64), and calls
		// next to the denied numbers.
		for _, nr := range []uint32{0, 1, 59, 63, 221, 424, 428, 434, 436} {
			check("an ordinary call", call{nr: nr}, retAllow)
		}
		unshare, clone := newUserNSCalls[0].nr[goarch], newUserNSCalls[1].nr[goarch]
		const (
			newNS   = 0x00020000 // CLONE_NEWNS
			newPID  = 0x20000000 // CLONE_NEWPID
			newNet  = 0x40000000 // CLONE_NEWNET
			threads = 0x003d0f00 // what pthread_create passes: CLONE_VM|FS|FILES|SIGHAND|THREAD|SYSVSEM|SETTLS|PARENT_SETTID|CHILD_CLEARTID
			fork    = 0x01200011 // what fork passes: CLONE_CHILD_SETTID|CHILD_CLEARTID|SIGCHLD
		)
		check("unshare(CLONE_NEWUSER)", call{nr: unshare, arg0: cloneNewUser}, eperm)
		check("unshare(CLONE_NEWUSER|CLONE_NEWNS|CLONE_NEWPID)", call{nr: unshare, arg0: cloneNewUser | newNS | newPID}, eperm)
		check("unshare(CLONE_NEWUSER) with high bits set", call{nr: unshare, arg0: 0xffffffff_00000000 | cloneNewUser}, eperm)
		check("unshare(CLONE_NEWNS)", call{nr: unshare, arg0: newNS}, retAllow)
		check("unshare(CLONE_NEWNET)", call{nr: unshare, arg0: newNet}, retAllow)
		check("unshare(0)", call{nr: unshare}, retAllow)
		check("clone(CLONE_NEWUSER|SIGCHLD)", call{nr: clone, arg0: cloneNewUser | 17}, eperm)
		check("clone of a thread", call{nr: clone, arg0: threads}, retAllow)
		check("clone of fork", call{nr: clone, arg0: fork}, retAllow)
		check("clone3", call{nr: clone3.nr[goarch]}, enosys)
		check("clone3 with any argument", call{nr: clone3.nr[goarch], arg0: 0x7ffc0000}, enosys)
		// Another call whose first argument happens to carry the bit.
		check("call 0 with the bit in its first argument", call{nr: 0, arg0: cloneNewUser}, retAllow)

		if got := runFilter(t, prog, call{arch: arch ^ 1, nr: 1}); got != eperm {
			t.Errorf("%s: another architecture's call: %#x, want EPERM", goarch, got)
		}
		check("an x32 call", call{nr: x32Bit | 1}, eperm)
		check("x32 unshare", call{nr: x32Bit | unshare, arg0: newNS}, eperm)
	}
	if _, err := seccompFilter("mips"); err == nil {
		t.Error("a filter for an architecture without numbers")
	}
}
