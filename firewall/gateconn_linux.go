//go:build linux

package firewall

import (
	"errors"
	"io"
	"net"
	"net/netip"
	"os"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The sockets of the connections the gate's loop hands to goroutines
// (gateloop_linux.go) are gateConns: descriptors of the gate's own,
// registered with the runtime's poller through os.NewFile, not
// net.TCPConns, and every system call on them (connect, read, write,
// shutdown, the socket options) is issued raw, inside syscall.RawConn's
// callbacks, as the splices are (gatesplice_linux.go). Measured with
// BenchmarkGateConn when every connection went this way (docs/firewall.md,
// "Connection setup"):
//
//   - The runtime's monitor thread sleeps while the gate is idle, and the
//     first ordinary system call after an idle spell wakes it (a futex)
//     and sets it polling every 20 µs for the next millisecond. A TLS
//     connection through the gate has about seven idle spells (waiting
//     for the accept, the ClientHello, the server's first flight, the
//     client's Finished, the answer, each end's close): raw calls never
//     wake it; only closing a descriptor and os.NewFile still do.
//   - net.TCPConn asked for both addresses of both sockets (the gate
//     needs the accepted one's local address) and set keep-alive probes
//     on the client's loopback socket too (only the destination's side
//     needs them).
//   - net.Dialer's call chain grew each connection's goroutine stack
//     (copied twice); a raw connect needs a few hundred bytes.
//
// A raw call never blocks: the descriptors are non-blocking, and a call
// that would block returns EAGAIN, after which the callback says "wait"
// and the poller parks the goroutine until the descriptor is ready.

// gateConn is one TCP socket of the gate.
type gateConn struct {
	f  *os.File
	rc syscall.RawConn
	// remote is the peer's address (the client's, for an accepted socket).
	remote netip.AddrPort
	// dialing is set until the first write to a destination succeeds:
	// the gate does not wait for the handshake before writing (see dialGate).
	dialing bool
}

// newGateConn takes over a non-blocking socket descriptor.
func newGateConn(fd int, remote netip.AddrPort) (*gateConn, error) {
	return gateConnOf(os.NewFile(uintptr(fd), "tcp"), remote)
}

// gateConnOf wraps a socket file (non-blocking, so the poller takes it).
func gateConnOf(f *os.File, remote netip.AddrPort) (*gateConn, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, err
	}
	return &gateConn{f: f, rc: rc, remote: remote}, nil
}

func retryEINTR(fn func() (uintptr, unix.Errno)) (int, error) {
	for {
		r, e := fn()
		switch e {
		case 0:
			return int(r), nil
		case unix.EINTR:
			continue
		}
		return 0, e
	}
}

func rawRead(fd int, p []byte) (int, error)  { return rawIO(unix.SYS_READ, fd, p) }
func rawWrite(fd int, p []byte) (int, error) { return rawIO(unix.SYS_WRITE, fd, p) }

// rawIO is read(2) or write(2) (trap) of p on fd.
func rawIO(trap uintptr, fd int, p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	return retryEINTR(func() (uintptr, unix.Errno) {
		r, _, e := unix.RawSyscall(trap, uintptr(fd), uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
		return r, e
	})
}

func rawSetsockoptInt(fd, level, opt, v int) error {
	v32 := int32(v)
	_, err := retryEINTR(func() (uintptr, unix.Errno) {
		_, _, e := unix.RawSyscall6(unix.SYS_SETSOCKOPT, uintptr(fd), uintptr(level), uintptr(opt), uintptr(unsafe.Pointer(&v32)), 4, 0)
		return 0, e
	})
	return err
}

// Read reads what has come, waiting for something (or the end, io.EOF).
func (c *gateConn) Read(p []byte) (int, error) {
	var n int
	var serr error
	err := c.rc.Read(func(fd uintptr) bool {
		n, serr = rawRead(int(fd), p)
		return serr != unix.EAGAIN
	})
	if err == nil {
		err = serr
	}
	if err == nil && n == 0 && len(p) > 0 {
		err = io.EOF
	}
	return n, err
}

// Write writes all of p, waiting for room as needed (and, on a new
// connection to a destination, for its handshake).
func (c *gateConn) Write(p []byte) (int, error) {
	if c.dialing {
		return c.firstWrite(p)
	}
	return c.write(p)
}

func (c *gateConn) write(p []byte) (int, error) {
	var done int
	var serr error
	err := c.rc.Write(func(fd uintptr) bool {
		for done < len(p) {
			n, err := rawWrite(int(fd), p[done:])
			if err == unix.EAGAIN {
				return false
			}
			if err != nil {
				serr = err
				return true
			}
			done += n
		}
		return true
	})
	if err == nil {
		err = serr
	}
	return done, err
}

// control runs one raw call on the descriptor.
func (c *gateConn) control(call func(fd int) error) error {
	var serr error
	if err := c.rc.Control(func(fd uintptr) { serr = call(int(fd)) }); err != nil {
		return err
	}
	return serr
}

// CloseWrite sends the end of stream (FIN) and keeps reading.
func (c *gateConn) CloseWrite() error { return c.control(shutdownWrite) }

// Reset closes the socket with a RST (SO_LINGER 0) instead of a FIN.
func (c *gateConn) Reset() {
	c.control(lingerZero)
	c.Close()
}

// shutdownWrite sends fd's end of stream (FIN).
func shutdownWrite(fd int) error {
	_, err := retryEINTR(func() (uintptr, unix.Errno) {
		_, _, e := unix.RawSyscall(unix.SYS_SHUTDOWN, uintptr(fd), unix.SHUT_WR, 0)
		return 0, e
	})
	return err
}

// lingerZero makes fd's close a reset (RST) instead of an end (FIN).
func lingerZero(fd int) error {
	l := unix.Linger{Onoff: 1, Linger: 0}
	_, _, e := unix.RawSyscall6(unix.SYS_SETSOCKOPT, uintptr(fd), unix.SOL_SOCKET, unix.SO_LINGER, uintptr(unsafe.Pointer(&l)), unsafe.Sizeof(l), 0)
	if e != 0 {
		return e
	}
	return nil
}

func (c *gateConn) SetReadDeadline(t time.Time) error  { return c.f.SetReadDeadline(t) }
func (c *gateConn) SetWriteDeadline(t time.Time) error { return c.f.SetWriteDeadline(t) }
func (c *gateConn) Close() error                       { return c.f.Close() }

// sockaddrAddrPort converts an IPv4 or IPv6 socket address.
func sockaddrAddrPort(sa *unix.RawSockaddrAny) (netip.AddrPort, error) {
	switch sa.Addr.Family {
	case unix.AF_INET:
		s := (*unix.RawSockaddrInet4)(unsafe.Pointer(sa))
		p := (*[2]byte)(unsafe.Pointer(&s.Port))
		return netip.AddrPortFrom(netip.AddrFrom4(s.Addr), uint16(p[0])<<8|uint16(p[1])), nil
	case unix.AF_INET6:
		s := (*unix.RawSockaddrInet6)(unsafe.Pointer(sa))
		p := (*[2]byte)(unsafe.Pointer(&s.Port))
		return netip.AddrPortFrom(netip.AddrFrom16(s.Addr), uint16(p[0])<<8|uint16(p[1])), nil
	}
	return netip.AddrPort{}, errors.New("not an IP socket address")
}

// gateListener accepts the gate's connections with raw accept4 calls.
type gateListener struct {
	f  *os.File
	rc syscall.RawConn
	// addr is the address it is bound to, every accepted socket's own.
	addr netip.AddrPort
}

// newGateListener takes over a listener root handed to the gate (its own
// descriptor, a duplicate; l is closed).
func newGateListener(l *net.TCPListener) (*gateListener, error) {
	f, err := l.File()
	l.Close()
	if err != nil {
		return nil, err
	}
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, err
	}
	// Accepted sockets inherit TCP_NODELAY from their listener (Linux
	// copies the listener's socket): one system call here instead of one
	// per connection (TestGateListenerNoDelay).
	var serr error
	if err := rc.Control(func(fd uintptr) { serr = rawSetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_NODELAY, 1) }); err != nil || serr != nil {
		f.Close()
		return nil, os.NewSyscallError("setsockopt TCP_NODELAY", errors.Join(err, serr))
	}
	addr, _ := netip.ParseAddrPort(l.Addr().String())
	return &gateListener{f: f, rc: rc, addr: netip.AddrPortFrom(addr.Addr().Unmap(), addr.Port())}, nil
}

func (l *gateListener) Close() error { return l.f.Close() }

// takeFD returns the listener's socket as a descriptor of its own, out of
// the runtime's poller (the gate's loop polls it), and closes l's file.
func (l *gateListener) takeFD() (int, error) {
	fd := -1
	var serr error
	if err := l.rc.Control(func(f uintptr) { fd, serr = unix.FcntlInt(f, unix.F_DUPFD_CLOEXEC, 0) }); err != nil {
		return -1, err
	}
	if serr != nil {
		return -1, serr
	}
	l.f.Close()
	return fd, nil
}

// dialGate starts a connection to dst (non-blocking, TCP_NODELAY) and
// returns without waiting for the handshake: the first Write waits for it,
// at most dialTimeout, and reports its failure as a dialError. Over a veth
// the handshake is done by the time connect returns (the SYN-ACK is
// processed as connect releases the socket), so the first write goes out
// at once; asking whether it was connected cost two system calls.
func dialGate(dst netip.AddrPort) (*gateConn, error) {
	fd, err := connectRaw(dst)
	if err != nil {
		return nil, dialError{err}
	}
	rawSetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1)
	c, err := newGateConn(fd, dst)
	if err != nil {
		return nil, dialError{err}
	}
	c.dialing = true
	return c, nil
}

// connectRaw starts a connection to dst: a non-blocking socket, its
// handshake under way (or done).
func connectRaw(dst netip.AddrPort) (int, error) {
	family := unix.AF_INET
	var sa unix.RawSockaddrAny
	var sl uintptr
	port := [2]byte{byte(dst.Port() >> 8), byte(dst.Port())} // network order
	if dst.Addr().Is4() {
		s := (*unix.RawSockaddrInet4)(unsafe.Pointer(&sa))
		s.Family = unix.AF_INET
		*(*[2]byte)(unsafe.Pointer(&s.Port)) = port
		s.Addr = dst.Addr().As4()
		sl = unsafe.Sizeof(*s)
	} else {
		family = unix.AF_INET6
		s := (*unix.RawSockaddrInet6)(unsafe.Pointer(&sa))
		s.Family = unix.AF_INET6
		*(*[2]byte)(unsafe.Pointer(&s.Port)) = port
		s.Addr = dst.Addr().As16()
		sl = unsafe.Sizeof(*s)
	}
	fd, err := unix.Socket(family, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, unix.IPPROTO_TCP)
	if err != nil {
		return -1, os.NewSyscallError("socket", err)
	}
	_, err = retryEINTR(func() (uintptr, unix.Errno) {
		_, _, e := unix.RawSyscall(unix.SYS_CONNECT, uintptr(fd), uintptr(unsafe.Pointer(&sa)), sl)
		return 0, e
	})
	if err != nil && err != unix.EINPROGRESS {
		unix.Close(fd)
		return -1, os.NewSyscallError("connect", err)
	}
	return fd, nil
}

// dialError is a failure to connect to the destination.
type dialError struct{ err error }

func (e dialError) Error() string { return e.err.Error() }
func (e dialError) Unwrap() error { return e.err }

// firstWrite writes to a destination whose handshake may still be under
// way: a write then fails with EAGAIN, and the gate waits at most
// dialTimeout for the socket to take it. A failure before any byte is out
// is the connection's (refused, unreachable, timed out): a dialError.
func (c *gateConn) firstWrite(p []byte) (int, error) {
	var n int
	var serr error
	if err := c.control(func(fd int) error {
		n, serr = rawWrite(fd, p)
		return nil
	}); err != nil {
		return 0, dialError{err}
	}
	if serr == unix.EAGAIN {
		c.SetWriteDeadline(time.Now().Add(dialTimeout))
		n, serr = c.write(p)
		c.SetWriteDeadline(time.Time{})
	}
	if n == 0 && serr != nil {
		return 0, dialError{os.NewSyscallError("connect", serr)}
	}
	c.dialing = false
	if serr == nil && n < len(p) {
		m, err := c.write(p[n:])
		return n + m, err
	}
	return n, serr
}

// keepAlive turns on keep-alive probes, as net.Dialer's defaults (15 s
// idle, 15 s apart, 9 unanswered): the client's own probes stop at the
// gate, so only the gate can notice a destination that went away without
// a word, and then close the client's connection too. The gate sets them
// once the client's first bytes are on their way, while the server works
// on its answer: four system calls that need not delay the connection.
func (c *gateConn) keepAlive() {
	c.control(func(fd int) error {
		keepAliveFD(fd)
		return nil
	})
}

func keepAliveFD(fd int) {
	rawSetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_KEEPALIVE, 1)
	rawSetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_KEEPIDLE, 15)
	rawSetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_KEEPINTVL, 15)
	rawSetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_KEEPCNT, 9)
}
