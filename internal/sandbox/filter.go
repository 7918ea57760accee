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
//
// It also refuses new user namespaces: unshare and clone with
// CLONE_NEWUSER fail with EPERM, and clone3 with ENOSYS, because its flags
// are in memory seccomp cannot read (glibc and Docker's default profile
// agree on that answer: glibc then falls back to clone, whose flags the
// filter sees). bwrap's --disable-userns does the same where it can; in a
// container devbox run falls back to the weaker mode without it (Probe),
// and the filter holds there too. bwrap installs the filter just before it
// runs the command, after its own namespaces are made, so bwrap itself is
// not affected.

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

// newUserNSCalls are the calls whose first argument holds namespace flags
// (unshare's flags, clone's flags on both architectures): with
// CLONE_NEWUSER set they fail with EPERM.
var newUserNSCalls = []deniedSyscall{
	{"unshare", map[string]uint32{"amd64": 272, "arm64": 97}, syscall.EPERM},
	{"clone", map[string]uint32{"amd64": 56, "arm64": 220}, syscall.EPERM},
}

// clone3 takes its flags in a struct in memory, which seccomp cannot read:
// it fails whole, with ENOSYS, so that callers fall back to clone.
var clone3 = deniedSyscall{"clone3", map[string]uint32{"amd64": 435, "arm64": 435}, syscall.ENOSYS}

// cloneNewUser is CLONE_NEWUSER.
const cloneNewUser = 0x10000000

// DeniedSyscalls names the calls the filter refuses, for the docs and
// --explain.
func DeniedSyscalls() []string {
	var out []string
	for _, d := range deniedSyscalls {
		out = append(out, d.name)
	}
	out = append(out, clone3.name)
	for _, d := range newUserNSCalls {
		out = append(out, d.name+" with CLONE_NEWUSER")
	}
	return out
}

// auditArch is the AUDIT_ARCH_* value of each supported GOARCH.
var auditArch = map[string]uint32{"amd64": 0xc000003e, "arm64": 0xc00000b7}

const (
	bpfLdWAbs = 0x20 // BPF_LD | BPF_W | BPF_ABS
	bpfJeqK   = 0x15 // BPF_JMP | BPF_JEQ | BPF_K
	bpfJgeK   = 0x35 // BPF_JMP | BPF_JGE | BPF_K
	bpfJsetK  = 0x45 // BPF_JMP | BPF_JSET | BPF_K
	bpfRetK   = 0x06 // BPF_RET | BPF_K

	retAllow = 0x7fff0000 // SECCOMP_RET_ALLOW
	retErrno = 0x00050000 // SECCOMP_RET_ERRNO | errno
	x32Bit   = 0x40000000 // __X32_SYSCALL_BIT

	// Offsets in struct seccomp_data: nr, arch, then (after the 64-bit
	// instruction pointer) the 64-bit arguments. Both architectures are
	// little-endian, so an argument's low word is at its offset.
	offNr   = 0
	offArch = 4
	offArg0 = 16
)

type insn struct {
	code   uint16
	jt, jf uint8
	k      uint32
}

// program assembles classic BPF with named jump targets: a jump names the
// labels it goes to when true and when false ("" falls through), and
// label marks the next instruction. Every jump goes forward.
type program struct {
	insns  []insn
	labels map[string]int
	jumps  map[int][2]string // instruction → its true and false targets
}

func (p *program) add(code uint16, k uint32) { p.insns = append(p.insns, insn{code: code, k: k}) }

func (p *program) jump(code uint16, k uint32, ifTrue, ifFalse string) {
	p.jumps[len(p.insns)] = [2]string{ifTrue, ifFalse}
	p.add(code, k)
}

func (p *program) label(name string) { p.labels[name] = len(p.insns) }

// ret is a return of errno e, labelled by it.
func (p *program) ret(e syscall.Errno) {
	p.label(errnoLabel(e))
	p.add(bpfRetK, retErrno|uint32(e))
}

func errnoLabel(e syscall.Errno) string { return fmt.Sprintf("errno %d", int(e)) }

// bytes resolves the jumps and encodes the program as struct sock_filter
// in native byte order.
func (p *program) bytes() ([]byte, error) {
	for at, to := range p.jumps {
		for i, name := range to {
			if name == "" {
				continue
			}
			dest, ok := p.labels[name]
			off := dest - at - 1
			if !ok || off < 0 || off > 255 {
				return nil, fmt.Errorf("sandbox: seccomp filter: jump from %d to %q (%d)", at, name, dest)
			}
			if i == 0 {
				p.insns[at].jt = uint8(off)
			} else {
				p.insns[at].jf = uint8(off)
			}
		}
	}
	b := make([]byte, 0, 8*len(p.insns))
	for _, in := range p.insns {
		b = binary.NativeEndian.AppendUint16(b, in.code)
		b = append(b, in.jt, in.jf)
		b = binary.NativeEndian.AppendUint32(b, in.k)
	}
	return b, nil
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
	p := &program{labels: map[string]int{}, jumps: map[int][2]string{}}
	eperm := errnoLabel(syscall.EPERM)
	// Another architecture's call (32-bit compat): EPERM whole.
	p.add(bpfLdWAbs, offArch)
	p.jump(bpfJeqK, arch, "", eperm)
	p.add(bpfLdWAbs, offNr)
	// x32 (only on amd64; harmless elsewhere): EPERM whole.
	p.jump(bpfJgeK, x32Bit, eperm, "")
	for _, d := range append(append([]deniedSyscall(nil), deniedSyscalls...), clone3) {
		p.jump(bpfJeqK, d.nr[goarch], errnoLabel(d.errno), "")
	}
	for _, d := range newUserNSCalls {
		p.jump(bpfJeqK, d.nr[goarch], "namespace flags", "")
	}
	p.add(bpfRetK, retAllow)
	p.label("namespace flags")
	p.add(bpfLdWAbs, offArg0)
	p.jump(bpfJsetK, cloneNewUser, eperm, "")
	p.add(bpfRetK, retAllow)
	seen := map[syscall.Errno]bool{}
	for _, d := range append(append([]deniedSyscall{{errno: syscall.EPERM}}, deniedSyscalls...), clone3) {
		if !seen[d.errno] {
			seen[d.errno] = true
			p.ret(d.errno)
		}
	}
	return p.bytes()
}
