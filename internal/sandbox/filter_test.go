package sandbox

import (
	"encoding/binary"
	"syscall"
	"testing"
)

// runFilter interprets the classic BPF program for one system call: the
// subset of instructions seccompFilter emits.
func runFilter(t *testing.T, prog []byte, arch, nr uint32) uint32 {
	t.Helper()
	var acc uint32
	for pc := 0; pc*8 < len(prog); pc++ {
		in := prog[pc*8:]
		code, jt, jf, k := binary.NativeEndian.Uint16(in), in[2], in[3], binary.NativeEndian.Uint32(in[4:])
		switch code {
		case bpfLdWAbs:
			acc = map[uint32]uint32{0: nr, 4: arch}[k]
		case bpfJeqK, bpfJgeK:
			if code == bpfJeqK && acc == k || code == bpfJgeK && acc >= k {
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
	for goarch, arch := range auditArch {
		prog, err := seccompFilter(goarch)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range deniedSyscalls {
			if got := runFilter(t, prog, arch, d.nr[goarch]); got != retErrno|uint32(d.errno) {
				t.Errorf("%s %s: %#x, want errno %d", goarch, d.name, got, d.errno)
			}
		}
		for _, nr := range []uint32{0, 1, 59, 56, 435, 424, 428} { // read, write, execve, clone, clone3, ...
			if got := runFilter(t, prog, arch, nr); got != retAllow {
				t.Errorf("%s syscall %d: %#x, want allow", goarch, nr, got)
			}
		}
		if got := runFilter(t, prog, arch^1, 0); got != retErrno|uint32(syscall.EPERM) {
			t.Errorf("%s: another architecture's call: %#x, want EPERM", goarch, got)
		}
		if got := runFilter(t, prog, arch, x32Bit|1); got != retErrno|uint32(syscall.EPERM) {
			t.Errorf("%s: an x32 call: %#x, want EPERM", goarch, got)
		}
	}
	if _, err := seccompFilter("mips"); err == nil {
		t.Error("a filter for an architecture without numbers")
	}
}
