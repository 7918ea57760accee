package sandbox

import (
	"encoding/binary"
	"fmt"
	"runtime"
	"syscall"
)

// devbox run's own seccomp filter, installed by bwrap (--seccomp) in the
// sandboxed command on top of whatever the container has. It refuses the
// system calls a confined command has no use for and that widen the
// kernel's attack surface or reach other processes: io_uring (its
// operations bypass seccomp and many LSM hooks; sandbox-runtime blocks it
// too), ptrace and process_vm_readv/writev (another process's memory;
// sandbox-runtime blocks ptrace), userfaultfd (the usual tool to win
// kernel races), perf_event_open, and the kernel keyring (keyctl, add_key,
// request_key: keys shared with other processes of the user). io_uring
// and userfaultfd fail with ENOSYS, so that runtimes fall back as on a
// kernel without them; the rest with EPERM. System calls of another
// architecture (32-bit compat, x32) are refused whole: their numbers
// differ, so a list in one numbering would not hold.

// deniedSyscall is one refused call: its number per GOARCH, and the errno.
type deniedSyscall struct {
	name  string
	nr    map[string]uint32
	errno syscall.Errno
}

var deniedSyscalls = []deniedSyscall{
	{"io_uring_setup", map[string]uint32{"amd64": 425, "arm64": 425}, syscall.ENOSYS},
	{"io_uring_enter", map[string]uint32{"amd64": 426, "arm64": 426}, syscall.ENOSYS},
	{"io_uring_register", map[string]uint32{"amd64": 427, "arm64": 427}, syscall.ENOSYS},
	{"userfaultfd", map[string]uint32{"amd64": 323, "arm64": 282}, syscall.ENOSYS},
	{"ptrace", map[string]uint32{"amd64": 101, "arm64": 117}, syscall.EPERM},
	{"process_vm_readv", map[string]uint32{"amd64": 310, "arm64": 270}, syscall.EPERM},
	{"process_vm_writev", map[string]uint32{"amd64": 311, "arm64": 271}, syscall.EPERM},
	{"perf_event_open", map[string]uint32{"amd64": 298, "arm64": 241}, syscall.EPERM},
	{"keyctl", map[string]uint32{"amd64": 250, "arm64": 219}, syscall.EPERM},
	{"add_key", map[string]uint32{"amd64": 248, "arm64": 217}, syscall.EPERM},
	{"request_key", map[string]uint32{"amd64": 249, "arm64": 218}, syscall.EPERM},
}

// DeniedSyscalls names the calls the filter refuses, for the docs and
// --explain.
func DeniedSyscalls() []string {
	var out []string
	for _, d := range deniedSyscalls {
		out = append(out, d.name)
	}
	return out
}

// auditArch is the AUDIT_ARCH_* value of each supported GOARCH.
var auditArch = map[string]uint32{"amd64": 0xc000003e, "arm64": 0xc00000b7}

const (
	bpfLdWAbs = 0x20 // BPF_LD | BPF_W | BPF_ABS
	bpfJeqK   = 0x15 // BPF_JMP | BPF_JEQ | BPF_K
	bpfJgeK   = 0x35 // BPF_JMP | BPF_JGE | BPF_K
	bpfRetK   = 0x06 // BPF_RET | BPF_K

	retAllow = 0x7fff0000 // SECCOMP_RET_ALLOW
	retErrno = 0x00050000 // SECCOMP_RET_ERRNO | errno
	x32Bit   = 0x40000000 // __X32_SYSCALL_BIT
)

type insn struct {
	code   uint16
	jt, jf uint8
	k      uint32
}

// SeccompFilter returns the filter as the classic BPF program bwrap's
// --seccomp reads (struct sock_filter, native byte order), for the
// architecture devbox runs on; an error on an architecture it has no
// numbers for.
func SeccompFilter() ([]byte, error) { return seccompFilter(runtime.GOARCH) }

func seccompFilter(goarch string) ([]byte, error) {
	arch, ok := auditArch[goarch]
	if !ok {
		return nil, fmt.Errorf("sandbox: no seccomp filter for %s", goarch)
	}
	// Layout: check the architecture, load the number, refuse x32, then
	// one comparison per denied call jumping to its return; allow.
	n := len(deniedSyscalls)
	var p []insn
	p = append(p, insn{bpfLdWAbs, 0, 0, 4}) // seccomp_data.arch
	// Foreign architecture: jump to the EPERM return at the very end.
	p = append(p, insn{bpfJeqK, 0, uint8(2 + n + 1 + n), arch})
	p = append(p, insn{bpfLdWAbs, 0, 0, 0}) // seccomp_data.nr
	// x32 (only on amd64; harmless elsewhere): also EPERM.
	p = append(p, insn{bpfJgeK, uint8(n + 1 + n), 0, x32Bit})
	for i, d := range deniedSyscalls {
		// From instruction 4+i, its return is at 4+n+1+i: skip the
		// remaining comparisons and the allow.
		_ = i
		p = append(p, insn{bpfJeqK, uint8(n), 0, d.nr[goarch]})
	}
	p = append(p, insn{bpfRetK, 0, 0, retAllow})
	for _, d := range deniedSyscalls {
		p = append(p, insn{bpfRetK, 0, 0, retErrno | uint32(d.errno)})
	}
	p = append(p, insn{bpfRetK, 0, 0, retErrno | uint32(syscall.EPERM)})
	b := make([]byte, 0, 8*len(p))
	for _, in := range p {
		b = binary.NativeEndian.AppendUint16(b, in.code)
		b = append(b, in.jt, in.jf)
		b = binary.NativeEndian.AppendUint32(b, in.k)
	}
	return b, nil
}
