//go:build linux

package firewall

import (
	"net/netip"
	"os"
	"runtime"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The gate's connections are served by one event loop over an epoll set
// of its own, as nginx serves them, and not by a goroutine per connection
// on the Go runtime's poller. A TLS connection through the gate wakes it
// about eight times on the client's critical path (the ClientHello, the
// destination's handshake, the server's flight, each exchange after); on
// the runtime's poller each wake-up went through the scheduler (a
// goroutine made ready, switched to, parked again, and an idle P releasing
// itself around two epoll_pwait calls), and each socket through os.File
// (fcntl, epoll_ctl, a finalizer; its close a blocking system call that
// wakes the runtime's monitor thread). Measured beside nginx in the same
// bench-peers run, a prototype loop on a raw epoll_wait added 0.03 ms less
// TLS setup p50 than nginx where the goroutine gate added 0.04–0.06 ms
// more, and the same loop blocking in epoll_wait through syscall.Syscall
// (the runtime's blocking-call path, its P handed off and the monitor
// thread polling every 20 µs) was as slow as the goroutine gate.
//
// So the loop blocks in epoll_wait as a raw system call: the runtime sees a
// goroutine running, keeps its P (the gate runs with two), and preempts it
// every 10 ms (a signal: epoll_wait returns EINTR and the loop yields).
// The loop never blocks otherwise: its sockets are non-blocking, and what
// needs a round trip or an unusual path (a bindings lookup the recent
// cache cannot answer, a refusal and its log line, a HelloRetryRequest, a
// write that would block, a health query, long transfers past the first
// copyFirstBytes each way) goes to a goroutine with the connection, as
// gateConns on the runtime's poller, through the same code as before.

// loopState is where a loop connection stands.
type loopState uint8

const (
	// loopSniff: reading the client's first bytes.
	loopSniff loopState = iota
	// loopDial: connecting to the destination; first bytes not all out.
	loopDial
	// loopHello: a ClientHello passed and sent, the server's answer not
	// yet read far enough to tell a HelloRetryRequest.
	loopHello
	// loopRelay: copying both ways.
	loopRelay
)

// loopConn is one client connection in the loop, and its destination's.
type loopConn struct {
	state  loopState
	c, up  int // descriptors; up is -1 before the dial
	remote netip.AddrPort
	orig   netip.AddrPort
	sc     sniffConn
	first  firstBytes
	pend   []byte // first bytes still to write to the destination (loopDial)
	seen   []byte // the server's first bytes so far (loopHello)
	due    int64  // nanotime deadline of the state (loopSniff, loopDial, loopHello)
	copied [2]int // bytes relayed client→destination, destination→client
	eof    [2]bool
	// pending records, per side (0 the client, 1 the destination), bytes
	// that may wait in the kernel without a new report coming: a
	// readiness report the loop did not act on (the client's bytes wait
	// while the server answers a hello), or a read that filled its buffer.
	pending [2]bool
	// hup records, per side, a report of its end or an error (FIN, RST):
	// then a short read does not mean the queue is drained, the end
	// after the data gets no report of its own.
	hup     [2]bool
	noDelay bool // TCP_NODELAY set on the destination's socket (EPOLLOUT asked too, when that came before the first bytes were all out)
	closed  bool
}

// dueEntry is a deadline in a queue: every entry of a queue has the same
// lifetime, so a FIFO is ordered by time. A connection whose state (or
// deadline) changed since is skipped when its entry comes up.
type dueEntry struct {
	lc  *loopConn
	due int64
}

type dueQueue struct{ q []dueEntry }

func (d *dueQueue) push(lc *loopConn, due int64) { d.q = append(d.q, dueEntry{lc, due}) }

// gateLoop serves the gate's listeners.
type gateLoop struct {
	g      *gate
	ep     int
	ls     map[int]*gateListener
	conns  map[int]*loopConn // by descriptor, both of a connection's
	sniffQ dueQueue          // loopSniff, sniffTimeout
	destQ  dueQueue          // loopDial and loopHello, dialTimeout = serverHelloTimeout
	buf    [sniffBuf]byte
}

func monotime() int64 { return int64(time.Since(loopEpoch)) }

var loopEpoch = time.Now()

func newGateLoop(g *gate, ls []*gateListener) (*gateLoop, error) {
	ep, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, err
	}
	l := &gateLoop{g: g, ep: ep, ls: map[int]*gateListener{}, conns: map[int]*loopConn{}}
	for _, gl := range ls {
		fd, err := gl.takeFD()
		if err == nil {
			// Level-triggered: one accept per readiness report is enough.
			err = unix.EpollCtl(ep, unix.EPOLL_CTL_ADD, fd, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(fd)})
		}
		if err != nil {
			l.close()
			return nil, err
		}
		l.ls[fd] = gl
	}
	return l, nil
}

// close closes the loop's epoll set and listeners (the connections it
// holds are not its caller's concern: the gate is ending).
func (l *gateLoop) close() {
	for fd := range l.ls {
		closeRaw(fd)
	}
	closeRaw(l.ep)
}

// edge is the interest of every connection socket: edge-triggered, so a
// socket is registered once and never modified; the loop reads until a
// short read (the kernel's queue drained) and remembers readiness it did
// not act on.
// The destination's socket reports when it can take the first bytes only
// once a write had to wait (its handshake not done, or no room): asked
// from the start, that report came right after every first write, a wake
// for nothing.
const (
	edgeIn    = unix.EPOLLIN | unix.EPOLLRDHUP | unix.EPOLLET
	edgeInOut = edgeIn | unix.EPOLLOUT
)

// ended is what a report says when a side's end or error has come.
const ended = unix.EPOLLRDHUP | unix.EPOLLHUP | unix.EPOLLERR

// run serves until the loop's epoll set fails (it does not, short of a
// bug); the listeners' sockets stay the gate's.
func (l *gateLoop) run() error {
	var evs [64]unix.EpollEvent
	for {
		n, err := retryEINTR(func() (uintptr, unix.Errno) {
			r, _, e := unix.RawSyscall6(unix.SYS_EPOLL_PWAIT, uintptr(l.ep), uintptr(unsafe.Pointer(&evs[0])), uintptr(len(evs)), uintptr(l.timeout()), 0, 0)
			if e == unix.EINTR {
				// The runtime's preemption signal (or another): let the
				// scheduler run what waits, then go on.
				runtime.Gosched()
			}
			return r, e
		})
		if err != nil {
			return err
		}
		for _, e := range evs[:n] {
			fd := int(e.Fd)
			if gl, ok := l.ls[fd]; ok {
				if err := l.accept(gl, fd); err != nil {
					return err
				}
				continue
			}
			lc := l.conns[fd]
			if lc == nil || lc.closed {
				continue
			}
			side := 0
			if fd != lc.c {
				side = 1
			}
			if e.Events&ended != 0 {
				lc.hup[side] = true
			}
			if side == 0 {
				l.clientReady(lc, e.Events)
			} else {
				l.destReady(lc, e.Events)
			}
		}
		l.expire()
	}
}

// maxWait bounds each epoll_wait: the runtime stops the loop for a
// garbage collection by a signal (EINTR), and should signals be off
// (GODEBUG=asyncpreemptoff=1) the loop still comes back this often.
const maxWait = 500 // ms

// timeout is epoll_wait's: until the first deadline, in milliseconds
// (rounded up), at most maxWait.
func (l *gateLoop) timeout() int {
	next := int64(-1)
	for _, q := range []*dueQueue{&l.sniffQ, &l.destQ} {
		for len(q.q) > 0 && (q.q[0].lc.closed || q.q[0].lc.due != q.q[0].due) {
			q.q = q.q[1:]
		}
		if len(q.q) > 0 && (next < 0 || q.q[0].due < next) {
			next = q.q[0].due
		}
	}
	if next < 0 {
		return maxWait
	}
	ms := (next - monotime() + int64(time.Millisecond) - 1) / int64(time.Millisecond)
	return int(min(max(ms, 0), maxWait))
}

// expire ends the connections whose deadline passed.
func (l *gateLoop) expire() {
	now := monotime()
	for len(l.sniffQ.q) > 0 && l.sniffQ.q[0].due <= now {
		e := l.sniffQ.q[0]
		l.sniffQ.q = l.sniffQ.q[1:]
		if lc := e.lc; !lc.closed && lc.due == e.due && lc.state == loopSniff {
			l.refuse(lc, sniffEnd(&lc.sc, os.ErrDeadlineExceeded))
		}
	}
	for len(l.destQ.q) > 0 && l.destQ.q[0].due <= now {
		e := l.destQ.q[0]
		l.destQ.q = l.destQ.q[1:]
		lc := e.lc
		if lc.closed || lc.due != e.due {
			continue
		}
		switch lc.state {
		case loopDial:
			l.dialFailed(lc, os.ErrDeadlineExceeded)
		case loopHello:
			l.reset(lc)
		}
	}
}

// accept takes one connection from a listener.
func (l *gateLoop) accept(gl *gateListener, lfd int) error {
	var sa unix.RawSockaddrAny
	sl := uint32(unix.SizeofSockaddrAny)
	fd, err := retryEINTR(func() (uintptr, unix.Errno) {
		r, _, e := unix.RawSyscall6(unix.SYS_ACCEPT4, uintptr(lfd), uintptr(unsafe.Pointer(&sa)), uintptr(unsafe.Pointer(&sl)), unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0, 0)
		return r, e
	})
	switch err {
	case nil:
	case unix.EAGAIN, unix.ECONNABORTED:
		return nil // taken by another report, or the client gave up in the queue
	default:
		return err
	}
	remote, _ := sockaddrAddrPort(&sa)
	orig, err := originalDstFD(fd, gl.addr.Addr().Is6())
	if err != nil || orig.Addr().Unmap().IsLoopback() || orig == gl.addr {
		// Not redirected: a direct connection to the gate's port is a
		// health query.
		c, err := newGateConn(fd, remote)
		if err != nil {
			return nil
		}
		l.g.active.Add(1)
		go func() {
			defer l.g.active.Add(-1)
			l.g.serveHealth(c)
		}()
		return nil
	}
	l.g.accepted.Add(1)
	l.g.active.Add(1)
	lc := &loopConn{c: fd, up: -1, remote: remote, orig: netip.AddrPortFrom(orig.Addr().Unmap(), orig.Port())}
	lc.sc.fd = fd
	if err := unix.EpollCtl(l.ep, unix.EPOLL_CTL_ADD, fd, &unix.EpollEvent{Events: edgeIn, Fd: int32(fd)}); err != nil {
		closeRaw(fd)
		l.g.active.Add(-1)
		return nil
	}
	l.conns[fd] = lc
	lc.due = monotime() + int64(sniffTimeout)
	l.sniffQ.push(lc, lc.due)
	return nil
}

func (l *gateLoop) clientReady(lc *loopConn, ev uint32) {
	switch lc.state {
	case loopSniff:
		l.sniff(lc)
	case loopRelay:
		l.copy(lc, 0)
	default:
		// Its bytes wait until the destination's answer is judged.
		lc.pending[0] = true
	}
}

func (l *gateLoop) destReady(lc *loopConn, ev uint32) {
	switch lc.state {
	case loopDial:
		if ev&(unix.EPOLLIN|ended) != 0 {
			lc.pending[1] = true
		}
		l.writeFirst(lc)
	case loopHello:
		if ev&(unix.EPOLLIN|ended) != 0 {
			l.serverHello(lc)
		}
	case loopRelay:
		if ev&(unix.EPOLLIN|ended) != 0 {
			l.copy(lc, 1)
		}
	}
}

// sniff reads the client's first bytes, and judges them once complete.
func (l *gateLoop) sniff(lc *loopConn) {
	for {
		if f, ok := sniffed(&lc.sc); ok {
			lc.pending[0] = !lc.sc.short
			l.judge(lc, f)
			return
		}
		err := lc.sc.more()
		if err == unix.EAGAIN {
			return
		}
		if err != nil {
			l.refuse(lc, sniffEnd(&lc.sc, err))
			return
		}
	}
}

// judge gives the verdict on complete first bytes: from the recent
// bindings when they know the destination, else on a goroutine.
func (l *gateLoop) judge(lc *loopConn, f firstBytes) {
	lc.first = f
	if f.refus != "" {
		l.refuse(lc, f)
		return
	}
	bound, ok := l.g.recentNames(lc.orig.Addr())
	if !ok {
		c, sc, ok := l.handOff(lc)
		if !ok {
			return
		}
		go func() {
			defer l.g.active.Add(-1)
			l.g.decide(c, sc, f, lc.orig)
		}()
		return
	}
	if reason := l.g.cfg.gateVerdict(f.kind, f.name, f.ech, lc.orig.Port(), bound); reason != "" {
		f.refus = reason
		l.refuse(lc, f)
		return
	}
	l.dial(lc)
}

// dial connects to the destination and writes the first bytes without
// waiting for the handshake (see dialGate).
func (l *gateLoop) dial(lc *loopConn) {
	fd, err := connectRaw(lc.orig)
	if err != nil {
		l.dialFailed(lc, err)
		return
	}
	if err := unix.EpollCtl(l.ep, unix.EPOLL_CTL_ADD, fd, &unix.EpollEvent{Events: edgeIn, Fd: int32(fd)}); err != nil {
		closeRaw(fd)
		l.dialFailed(lc, err)
		return
	}
	lc.up = fd
	l.conns[fd] = lc
	sc, f := &lc.sc, lc.first
	if f.kind == streamHTTP {
		// One request per connection: see closeAfterFirst.
		lc.pend = append(closeAfterFirst(sc.buf[sc.off:sc.off+f.n]), sc.buf[sc.off+f.n:]...)
		sc.off = len(sc.buf)
	} else {
		lc.pend = sc.buf[sc.off : sc.off+f.n]
		sc.off += f.n
	}
	lc.state = loopDial
	lc.due = monotime() + int64(dialTimeout)
	l.destQ.push(lc, lc.due)
	l.writeFirst(lc)
}

// writeFirst writes what waits for the destination, once it can take it.
//
// TCP_NODELAY goes on the destination's socket after the first bytes: a
// first write has nothing unacknowledged before it for Nagle's algorithm
// to wait on, and the option's system call is off the way to the SYN and
// the first bytes. A first write that does not go out whole gets it at
// once.
func (l *gateLoop) writeFirst(lc *loopConn) {
	for len(lc.pend) > 0 {
		n, err := rawWrite(lc.up, lc.pend)
		if err != nil && err != unix.EAGAIN {
			l.dialFailed(lc, err)
			return
		}
		lc.pend = lc.pend[max(n, 0):]
		if len(lc.pend) > 0 && !lc.noDelay {
			rawSetsockoptInt(lc.up, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1)
			unix.EpollCtl(l.ep, unix.EPOLL_CTL_MOD, lc.up, &unix.EpollEvent{Events: edgeInOut, Fd: int32(lc.up)})
			lc.noDelay = true
		}
		if err == unix.EAGAIN {
			return // still connecting, or no room: the next report
		}
	}
	lc.pend = nil
	if !lc.noDelay {
		rawSetsockoptInt(lc.up, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1)
		lc.noDelay = true
	}
	if lc.first.kind == streamHTTP {
		l.startRelay(lc)
		return
	}
	lc.state = loopHello
	lc.due = monotime() + int64(serverHelloTimeout)
	l.destQ.push(lc, lc.due)
	if lc.pending[1] {
		// The server spoke before its hello was sent: read it now, no
		// new report will come for it.
		l.serverHello(lc)
	}
}

// What the server's first bytes say so far.
const (
	helloMore  = iota // not enough to tell
	helloRetry        // a HelloRetryRequest
	helloDone         // any other ServerHello
)

// serverHello forwards the server's first bytes to the client until they
// say whether the server asks for a second ClientHello.
func (l *gateLoop) serverHello(lc *loopConn) {
	for {
		n, err := rawRead(lc.up, l.buf[:])
		if err == unix.EAGAIN {
			return
		}
		if err != nil || n == 0 || len(lc.seen)+n > maxFirstBytes {
			l.reset(lc) // the server went away mid-handshake, or said too much
			return
		}
		// Forwarded first, read after: the client has them as soon as
		// it can, and no bytes are held whatever they say (a refused
		// second hello is the client's, read and judged later).
		data := l.buf[:n]
		w, err := rawWrite(lc.c, data)
		if err != nil && err != unix.EAGAIN {
			l.reset(lc)
			return
		}
		whole := data
		if lc.seen != nil {
			lc.seen = append(lc.seen, data...)
			whole = lc.seen
		}
		said := helloDone
		if hrr, perr := serverHelloIsHRR(whole); perr != nil {
			said = helloMore
			if lc.seen == nil {
				lc.seen = append([]byte(nil), data...)
			}
		} else if hrr {
			said = helloRetry
		}
		if w < n || said == helloRetry {
			// A HelloRetryRequest, or a client that cannot take the
			// server's bytes at once: the goroutine path goes on.
			l.resumeHello(lc, data[max(w, 0):], said)
			return
		}
		if said == helloDone {
			lc.seen = nil
			lc.pending[1] = n == len(l.buf)
			l.startRelay(lc)
			return
		}
	}
}

// resumeHello hands a TLS connection to the goroutine path in the middle
// of the server's first records: rest is what the client has still to get
// of them, said what they say.
func (l *gateLoop) resumeHello(lc *loopConn, rest []byte, said int) {
	rest = append([]byte(nil), rest...)
	seen := lc.seen
	c, sc, ok := l.handOff(lc)
	if !ok {
		return
	}
	upc, err := newGateConn(lc.up, lc.orig)
	if err != nil {
		c.Reset()
		sc.release()
		l.g.active.Add(-1)
		return
	}
	f, orig := lc.first, lc.orig
	go func() {
		defer l.g.active.Add(-1)
		if len(rest) > 0 {
			if _, err := c.Write(rest); err != nil {
				sc.release()
				upc.Reset()
				c.Reset()
				return
			}
		}
		switch said {
		case helloMore:
			l.g.helloSent(c, upc, sc, f, orig, seen)
		case helloRetry:
			reason, name, err := l.g.afterHRR(sc, upc, f)
			if reason != "" || err != nil {
				sc.release()
				l.g.helloFailed(c, upc, f, orig, reason, name, err)
				return
			}
			l.g.relay(c, upc, sc, f, orig)
		default:
			l.g.relay(c, upc, sc, f, orig)
		}
	}()
}

// startRelay sends the destination what the client sent after its first
// bytes, then copies both ways.
func (l *gateLoop) startRelay(lc *loopConn) {
	sc := &lc.sc
	rest := sc.buf[sc.off:]
	n, err := rawWrite(lc.up, rest)
	if err != nil && err != unix.EAGAIN {
		l.reset(lc)
		return
	}
	lc.state = loopRelay
	l.g.passed.Add(1)
	if n < len(rest) {
		l.spliceOff(lc, 0, rest[max(n, 0):])
		return
	}
	sc.release()
	for side := range lc.pending {
		if (lc.pending[side] || lc.hup[side]) && !lc.closed {
			lc.pending[side] = false
			l.copy(lc, side)
		}
	}
	if !lc.closed && lc.state == loopRelay {
		// Last, once the client has the server's answer and works on it.
		keepAliveFD(lc.up)
	}
}

// copy relays what has come from one side (0: the client, 1: the
// destination) to the other. Past copyFirstBytes either way, or when the
// other side cannot take it all at once, the connection goes to the
// goroutines that splice.
func (l *gateLoop) copy(lc *loopConn, from int) {
	src, dst := lc.c, lc.up
	if from == 1 {
		src, dst = lc.up, lc.c
	}
	for !lc.eof[from] {
		n, err := rawRead(src, l.buf[:])
		if err == unix.EAGAIN {
			return
		}
		if err != nil {
			l.closeBoth(lc)
			return
		}
		if n == 0 {
			lc.eof[from] = true
			shutdownWrite(dst)
			if lc.eof[1-from] {
				l.closeBoth(lc)
			}
			return
		}
		w, err := rawWrite(dst, l.buf[:n])
		if err != nil && err != unix.EAGAIN {
			l.closeBoth(lc)
			return
		}
		lc.copied[from] += n
		if w < n || lc.copied[from] >= copyFirstBytes {
			l.spliceOff(lc, from, l.buf[max(w, 0):n])
			return
		}
		if n < len(l.buf) && !lc.hup[from] {
			return // drained: the next report brings more
		}
	}
}

// spliceOff hands a relayed connection to the splicing goroutines, with
// rest still to write in the direction from.
func (l *gateLoop) spliceOff(lc *loopConn, from int, rest []byte) {
	rest = append([]byte(nil), rest...)
	keepAliveFD(lc.up)
	c, sc, ok := l.handOff(lc)
	if !ok {
		return
	}
	sc.release()
	upc, err := newGateConn(lc.up, lc.orig)
	if err != nil {
		c.Reset()
		l.g.active.Add(-1)
		return
	}
	go func() {
		defer l.g.active.Add(-1)
		if len(rest) > 0 {
			dst := upc
			if from == 1 {
				dst = c
			}
			if _, err := dst.Write(rest); err != nil {
				c.Close()
				upc.Close()
				return
			}
		}
		l.g.splice(c, upc)
	}()
}

// handOff takes a connection out of the loop: its client socket (and the
// first-bytes record) become the goroutine path's; the destination's, if
// any, is out of the loop's set too, for the caller to wrap.
func (l *gateLoop) handOff(lc *loopConn) (*gateConn, *sniffConn, bool) {
	l.forget(lc)
	unix.EpollCtl(l.ep, unix.EPOLL_CTL_DEL, lc.c, nil)
	if lc.up >= 0 {
		unix.EpollCtl(l.ep, unix.EPOLL_CTL_DEL, lc.up, nil)
	}
	c, err := newGateConn(lc.c, lc.remote)
	if err != nil {
		if lc.up >= 0 {
			closeRaw(lc.up)
		}
		lc.sc.release()
		l.g.active.Add(-1)
		return nil, nil, false
	}
	sc := lc.sc
	sc.gateConn = c
	return c, &sc, true
}

// refuse hands a refused connection to a goroutine: the refusal's log line
// goes to the DNS filter, and the client gets its alert or reset.
func (l *gateLoop) refuse(lc *loopConn, f firstBytes) {
	c, sc, ok := l.handOff(lc)
	if !ok {
		return
	}
	sc.release()
	go func() {
		defer l.g.active.Add(-1)
		l.g.refuse(c, f.kind, f.name, f.refus, lc.orig)
	}()
}

// dialFailed counts and logs a destination that could not be reached,
// and resets the client.
func (l *gateLoop) dialFailed(lc *loopConn, err error) {
	orig, name := lc.orig, lc.first.name
	l.reset(lc)
	go l.g.dialFailed(orig, name, dialError{err})
}

// reset ends both sides with a reset.
func (l *gateLoop) reset(lc *loopConn) {
	lingerZero(lc.c)
	if lc.up >= 0 {
		lingerZero(lc.up)
	}
	l.closeBoth(lc)
}

// closeBoth closes the connection's sockets (which leaves the epoll set).
func (l *gateLoop) closeBoth(lc *loopConn) {
	l.forget(lc)
	closeRaw(lc.c)
	if lc.up >= 0 {
		closeRaw(lc.up)
	}
	lc.sc.release()
	l.g.active.Add(-1)
}

// forget takes the connection out of the loop's tables.
func (l *gateLoop) forget(lc *loopConn) {
	lc.closed = true
	delete(l.conns, lc.c)
	if lc.up >= 0 {
		delete(l.conns, lc.up)
	}
}

// closeRaw closes a descriptor the loop owns, as a raw system call: the
// runtime's blocking-call path (syscall.Close) would count it as the
// loop's P entering a system call.
func closeRaw(fd int) {
	unix.RawSyscall(unix.SYS_CLOSE, uintptr(fd), 0, 0)
}
