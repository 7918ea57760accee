//go:build linux

package firewall

import (
	"errors"
	"syscall"

	"golang.org/x/sys/unix"
)

// The gate's data path: splice(2) from one socket into a pipe and from
// the pipe into the other socket, so the payload never enters user space.
// io.Copy between two *net.TCPConn does the same, but through the Go
// runtime's blocking-syscall path: every splice enters and leaves a
// syscall, which wakes the runtime's monitor thread whenever the gate had
// gone idle and keeps it polling every 20 µs. With one busy connection
// that was a sixth of the gate's CPU time on a 2-core machine. A splice
// on non-blocking descriptors never sleeps, so the gate issues it as a raw
// system call and waits for readiness through the poller itself
// (syscall.RawConn), as the standard library does.

// maxSplice bounds one splice, as in the standard library: 1 MiB, the
// default pipe-max-size and the pipe size the gate asks for.
const maxSplice = 1 << 20

// gatePipe is one pipe of the gate's pool.
type gatePipe struct{ r, w int }

// pipePool keeps a few empty pipes for the next chunk: a pipe is taken
// when data is ready and given back once the chunk is out, so an idle
// connection holds none.
type pipePool struct{ free chan gatePipe }

func newPipePool(n int) *pipePool { return &pipePool{free: make(chan gatePipe, n)} }

func (pp *pipePool) get() (gatePipe, error) {
	select {
	case p := <-pp.free:
		return p, nil
	default:
	}
	var fds [2]int
	if err := unix.Pipe2(fds[:], unix.O_CLOEXEC|unix.O_NONBLOCK); err != nil {
		return gatePipe{}, err
	}
	// Smaller works too (the kernel caps what an unprivileged user's
	// pipes may hold in total): more, smaller chunks.
	unix.FcntlInt(uintptr(fds[1]), unix.F_SETPIPE_SZ, maxSplice)
	return gatePipe{r: fds[0], w: fds[1]}, nil
}

// put returns an empty pipe; one that still holds data is closed.
func (pp *pipePool) put(p gatePipe, empty bool) {
	if empty {
		select {
		case pp.free <- p:
			return
		default:
		}
	}
	unix.Close(p.r)
	unix.Close(p.w)
}

// rawSplice moves up to n bytes from in to out without blocking.
func rawSplice(in, out, n int) (int, error) {
	return retryEINTR(func() (uintptr, unix.Errno) {
		r, _, e := unix.RawSyscall6(unix.SYS_SPLICE, uintptr(in), 0, uintptr(out), 0, uintptr(n), unix.SPLICE_F_NONBLOCK)
		return r, e
	})
}

// spliceCopy copies src to dst until src's end of stream (nil) or an
// error. When src has data it takes a pipe, splices what is there into
// it, then splices all of that into dst, waiting for dst to have room.
func (pp *pipePool) spliceCopy(wc, rc syscall.RawConn) error {
	if eof, err := copyFirst(wc, rc, copyFirstBytes); eof || err != nil {
		return err
	}
	for {
		var (
			p    gatePipe
			n    int
			serr error
		)
		err := rc.Read(func(fd uintptr) bool {
			if p, serr = pp.get(); serr != nil {
				return true
			}
			n, serr = rawSplice(int(fd), p.w, maxSplice)
			if serr == unix.EAGAIN {
				pp.put(p, true)
				p = gatePipe{}
				return false
			}
			return true
		})
		if err == nil {
			err = serr
		}
		if err != nil {
			if p != (gatePipe{}) {
				pp.put(p, true)
			}
			return err
		}
		if n == 0 {
			pp.put(p, true)
			return nil // end of stream
		}
		for n > 0 {
			var m int
			err := wc.Write(func(fd uintptr) bool {
				m, serr = rawSplice(p.r, int(fd), n)
				return serr != unix.EAGAIN
			})
			if err == nil {
				err = serr
			}
			if err == nil && m == 0 {
				err = errors.New("splice: no progress")
			}
			if err != nil {
				pp.put(p, false)
				return err
			}
			n -= m
		}
		pp.put(p, true)
	}
}

// copyFirstBytes is how much of each direction the gate copies through
// user space before it splices: a connection's first exchanges (the rest
// of a TLS handshake, a request, a short answer) are a few hundred bytes
// each, for which a read and a write cost less than splicing through a
// pipe (BenchmarkGateConn, docs/firewall.md).
const copyFirstBytes = 16 << 10

// copyFirst copies up to limit bytes from rc to wc through a pooled
// buffer, as they come, with raw reads and writes; eof reports that rc
// ended first.
func copyFirst(wc, rc syscall.RawConn, limit int) (eof bool, err error) {
	if limit <= 0 {
		return false, nil
	}
	buf := sniffBufs.Get().(*[sniffBuf]byte)
	defer sniffBufs.Put(buf)
	for done := 0; done < limit; {
		var n int
		var serr error
		err := rc.Read(func(fd uintptr) bool {
			n, serr = rawRead(int(fd), buf[:min(len(buf), limit-done)])
			return serr != unix.EAGAIN
		})
		if err == nil {
			err = serr
		}
		if err != nil {
			return false, err
		}
		if n == 0 {
			return true, nil
		}
		for w := 0; w < n; {
			err := wc.Write(func(fd uintptr) bool {
				var m int
				m, serr = rawWrite(int(fd), buf[w:n])
				w += m
				return serr != unix.EAGAIN
			})
			if err == nil {
				err = serr
			}
			if err != nil {
				return false, err
			}
		}
		done += n
	}
	return false, nil
}
