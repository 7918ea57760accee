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

// The gate's sockets are descriptors of its own, registered with the
// runtime's poller through os.NewFile, not net.TCPConns, and every system
// call on them (accept, connect, read, write, shutdown, the socket
// options) is issued raw, inside syscall.RawConn's callbacks, as the
// splices already were (gatesplice_linux.go). Measured with
// BenchmarkGateConn (docs/firewall.md, "Connection setup"):
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

// Write writes all of p, waiting for room as needed.
func (c *gateConn) Write(p []byte) (int, error) {
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
func (c *gateConn) CloseWrite() error {
	return c.control(func(fd int) error {
		_, err := retryEINTR(func() (uintptr, unix.Errno) {
			_, _, e := unix.RawSyscall(unix.SYS_SHUTDOWN, uintptr(fd), unix.SHUT_WR, 0)
			return 0, e
		})
		return err
	})
}

// Reset closes the socket with a RST (SO_LINGER 0) instead of a FIN.
func (c *gateConn) Reset() {
	c.control(func(fd int) error {
		l := unix.Linger{Onoff: 1, Linger: 0}
		_, _, e := unix.RawSyscall6(unix.SYS_SETSOCKOPT, uintptr(fd), unix.SOL_SOCKET, unix.SO_LINGER, uintptr(unsafe.Pointer(&l)), unsafe.Sizeof(l), 0)
		if e != 0 {
			return e
		}
		return nil
	})
	c.Close()
}

func (c *gateConn) SetReadDeadline(t time.Time) error  { return c.f.SetReadDeadline(t) }
func (c *gateConn) SetWriteDeadline(t time.Time) error { return c.f.SetWriteDeadline(t) }
func (c *gateConn) Close() error                       { return c.f.Close() }

// localAddr is the socket's own address (getsockname).
func (c *gateConn) localAddr() (netip.AddrPort, error) {
	var ap netip.AddrPort
	err := c.control(func(fd int) error {
		var sa unix.RawSockaddrAny
		l := uint32(unix.SizeofSockaddrAny)
		_, err := retryEINTR(func() (uintptr, unix.Errno) {
			_, _, e := unix.RawSyscall(unix.SYS_GETSOCKNAME, uintptr(fd), uintptr(unsafe.Pointer(&sa)), uintptr(unsafe.Pointer(&l)))
			return 0, e
		})
		if err == nil {
			ap, err = sockaddrAddrPort(&sa)
		}
		return err
	})
	return ap, err
}

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
	return &gateListener{f: f, rc: rc}, nil
}

// accept waits for the next connection: a non-blocking socket with
// TCP_NODELAY (the gate relays handshakes and requests as they come, and
// Nagle's algorithm would hold back a small write behind an unacknowledged
// one).
func (l *gateListener) accept() (*gateConn, error) {
	for {
		var nfd int
		var sa unix.RawSockaddrAny
		var serr error
		err := l.rc.Read(func(fd uintptr) bool {
			sl := uint32(unix.SizeofSockaddrAny)
			nfd, serr = retryEINTR(func() (uintptr, unix.Errno) {
				r, _, e := unix.RawSyscall6(unix.SYS_ACCEPT4, fd, uintptr(unsafe.Pointer(&sa)), uintptr(unsafe.Pointer(&sl)), unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0, 0)
				return r, e
			})
			return serr != unix.EAGAIN
		})
		if err == nil {
			err = serr
		}
		if err == unix.ECONNABORTED {
			continue // the client gave up while it waited in the queue
		}
		if err != nil {
			return nil, err
		}
		remote, _ := sockaddrAddrPort(&sa)
		rawSetsockoptInt(nfd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1)
		return newGateConn(nfd, remote)
	}
}

func (l *gateListener) Close() error { return l.f.Close() }

// dialGate connects to dst (non-blocking, TCP_NODELAY), waiting at most
// timeout for the handshake.
func dialGate(dst netip.AddrPort, timeout time.Duration) (*gateConn, error) {
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
		return nil, os.NewSyscallError("socket", err)
	}
	rawSetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1)
	// Keep-alive probes toward the destination, as net.Dialer's defaults
	// (15 s idle, 15 s apart, 9 unanswered): the client's own probes stop
	// at the gate, so only the gate can notice a destination that went
	// away without a word, and then close the client's connection too.
	rawSetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_KEEPALIVE, 1)
	rawSetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_KEEPIDLE, 15)
	rawSetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_KEEPINTVL, 15)
	rawSetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_KEEPCNT, 9)
	_, err = retryEINTR(func() (uintptr, unix.Errno) {
		_, _, e := unix.RawSyscall(unix.SYS_CONNECT, uintptr(fd), uintptr(unsafe.Pointer(&sa)), sl)
		return 0, e
	})
	if err != nil && err != unix.EINPROGRESS {
		unix.Close(fd)
		return nil, os.NewSyscallError("connect", err)
	}
	c, err := newGateConn(fd, dst)
	if err != nil {
		return nil, err
	}
	if c.connected() == nil {
		// Over a veth the handshake is often done by now: the SYN-ACK
		// was processed as connect released the socket.
		return c, nil
	}
	c.SetWriteDeadline(time.Now().Add(timeout))
	var serr error
	err = c.rc.Write(func(fd uintptr) bool {
		serr = c.connectedFD(int(fd))
		return serr != unix.EINPROGRESS
	})
	if err == nil {
		err = serr
	}
	if err != nil {
		c.Close()
		return nil, os.NewSyscallError("connect", err)
	}
	c.SetWriteDeadline(time.Time{})
	return c, nil
}

func (c *gateConn) connected() error { return c.control(c.connectedFD) }

// connectedFD reports a non-blocking connect's outcome: nil once
// connected, EINPROGRESS while under way, else why it failed.
func (c *gateConn) connectedFD(fd int) error {
	var v int32
	l := uint32(4)
	_, _, e := unix.RawSyscall6(unix.SYS_GETSOCKOPT, uintptr(fd), unix.SOL_SOCKET, unix.SO_ERROR, uintptr(unsafe.Pointer(&v)), uintptr(unsafe.Pointer(&l)), 0)
	if e != 0 {
		return e
	}
	if v != 0 {
		return unix.Errno(v)
	}
	// No error yet: connected, or still connecting (the poller may wake
	// a waiter early).
	var sa unix.RawSockaddrAny
	sl := uint32(unix.SizeofSockaddrAny)
	_, _, e = unix.RawSyscall(unix.SYS_GETPEERNAME, uintptr(fd), uintptr(unsafe.Pointer(&sa)), uintptr(unsafe.Pointer(&sl)))
	if e == unix.ENOTCONN {
		return unix.EINPROGRESS
	}
	if e != 0 {
		return e
	}
	return nil
}
