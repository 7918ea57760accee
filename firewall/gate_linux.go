//go:build linux

package firewall

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// sniffTimeout bounds how long the gate waits for a client's first bytes:
// a ClientHello or request line comes at once; a protocol in which the
// server speaks first never sends one and is refused when it runs out.
const sniffTimeout = 5 * time.Second

type gate struct {
	cfg     Config
	binds   *bindClient
	pipes   *pipePool
	errw    io.Writer
	workers workers

	accepted, passed, refused, active, dialErrors atomic.Int64
	reasons                                       sync.Map // reason → *atomic.Int64

	// recent keeps the filter's non-empty answers for bindCacheFor, so a
	// burst of connections to one address costs one round trip. A binding
	// lives at least 2×MinTTL, and the set entry the gate's own dial needs
	// expires with it: a stale hit is still refused by the kernel.
	recent sync.Map // netip.Addr → recentNames
}

type recentNames struct {
	names []string
	until time.Time
}

const bindCacheFor = 2 * time.Second

// recentNames returns the names the filter said resolved to a, when they
// are recent enough to use without asking again.
func (g *gate) recentNames(a netip.Addr) ([]string, bool) {
	if r, ok := g.recent.Load(a); ok && time.Now().Before(r.(recentNames).until) {
		return r.(recentNames).names, true
	}
	return nil, false
}

// boundNames returns the names the filter says resolved to a.
func (g *gate) boundNames(a netip.Addr) ([]string, error) {
	if names, ok := g.recentNames(a); ok {
		return names, nil
	}
	names, err := g.binds.names(a)
	if err == nil && len(names) > 0 {
		g.recent.Store(a, recentNames{names, time.Now().Add(bindCacheFor)})
	}
	return names, err
}

// RunGate runs the name gate in the foreground until ctx is done: it
// accepts the connections the nat table redirects to cfg.GatePort on
// 127.0.0.1 and ::1, reads each one's SNI or Host, asks the DNS filter
// which names resolved to its original destination, and either splices it
// there or refuses it and logs why. It needs no capability: it runs as the
// gate's uid, which the rules alone let reach name-derived addresses.
func RunGate(ctx context.Context, cfg Config) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	cfg = cfg.WithDefaults()
	if os.Getenv("GOGC") == "" {
		// The live heap is about 1 MB; at the runtime's 4 MB floor a
		// collection came every ~180 TLS connections, and the connection
		// it overlapped was among the slowest 1 %. Twice the floor: one
		// every ~700, for about 4 MB more resident memory.
		debug.SetGCPercent(200)
	}
	if os.Getenv("GOMAXPROCS") == "" {
		// Two scheduler slots: the loop (gateloop_linux.go) holds one
		// while it waits in epoll_wait; the other runs what the loop hands
		// to goroutines (refusals and their logs, bindings lookups, health
		// queries, long transfers' splices).
		runtime.GOMAXPROCS(2)
	}
	g := &gate{
		cfg:     cfg,
		binds:   newBindClient(bindSocketPath(cfg)),
		pipes:   newPipePool(32),
		workers: workers{jobs: make(chan func()), max: 64},
		errw:    boundedStderr(),
	}
	nls, err := gateListeners()
	if err != nil {
		return err
	}
	var ls []*gateListener
	for _, nl := range nls {
		l, err := newGateListener(nl)
		if err != nil {
			for _, l := range ls {
				l.Close()
			}
			return fmt.Errorf("firewall gate: %w", err)
		}
		ls = append(ls, l)
	}
	go sweepEveryMinute(ctx, func(now time.Time) {
		g.recent.Range(func(k, v any) bool {
			if !now.Before(v.(recentNames).until) {
				g.recent.Delete(k)
			}
			return true
		})
	})
	loop, err := newGateLoop(g, ls)
	for _, l := range ls {
		l.Close() // the loop has its own descriptors
	}
	if err != nil {
		return fmt.Errorf("firewall gate: %w", err)
	}
	defer loop.close()
	errc := make(chan error, 1)
	go func() { errc <- loop.run() }()
	select {
	case <-ctx.Done():
		return nil
	case err := <-errc:
		return fmt.Errorf("firewall gate: %w", err)
	}
}

// sweepEveryMinute calls sweep with the time once a minute until ctx is
// done: how the gate's recent names and the DNS filter's bindings expire.
func sweepEveryMinute(ctx context.Context, sweep func(now time.Time)) {
	t := time.NewTicker(time.Minute)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			sweep(now)
		}
	}
}

// decide finishes a connection whose first bytes the loop read but could
// not judge at once: it asks the DNS filter which names resolved to the
// original destination (a round trip the loop does not wait for), then
// refuses the connection or passes it on.
func (g *gate) decide(c *gateConn, sc *sniffConn, first firstBytes, orig netip.AddrPort) {
	defer sc.release()
	bound, err := g.boundNames(orig.Addr())
	if err != nil {
		fmt.Fprintf(g.errw, "devbox gate: %s: %v\n", orig, err)
	}
	if reason := g.cfg.gateVerdict(first.kind, first.name, first.ech, orig.Port(), bound); reason != "" {
		g.refuse(c, first.kind, first.name, reason, orig)
		return
	}
	upc, err := dialGate(orig)
	if err != nil {
		g.dialFailed(orig, first.name, err)
		c.Reset()
		return
	}
	if first.kind == streamTLS {
		if _, err := upc.Write(sc.buf[sc.off : sc.off+first.n]); err != nil {
			g.helloFailed(c, upc, first, orig, "", "", err)
			return
		}
		sc.off += first.n
		g.helloSent(c, upc, sc, first, orig, nil)
		return
	}
	g.relay(c, upc, sc, first, orig)
}

// helloSent follows a TLS connection whose ClientHello went to the
// destination (and seen, the server's first bytes so far, to the client):
// it watches the server's answer, and the second hello a
// HelloRetryRequest asks for, then relays.
func (g *gate) helloSent(c, upc *gateConn, sc *sniffConn, first firstBytes, orig netip.AddrPort, seen []byte) {
	hrr, err := g.serverHello(upc, c, seen)
	var reason, name string
	if err == nil && hrr {
		reason, name, err = g.afterHRR(sc, upc, first)
	}
	if reason != "" || err != nil {
		g.helloFailed(c, upc, first, orig, reason, name, err)
		return
	}
	g.relay(c, upc, sc, first, orig)
}

// helloFailed ends a connection whose TLS handshake the gate refused
// (reason, naming the refused hello's name) or that failed: the
// destination could not be reached, or either side went away.
func (g *gate) helloFailed(c, upc *gateConn, first firstBytes, orig netip.AddrPort, reason, name string, err error) {
	upc.Reset()
	if reason != "" {
		g.refuse(c, streamTLS, name, reason, orig)
		return
	}
	g.dialFailed(orig, first.name, err)
	c.Reset()
}

// relay passes a connection on once its first bytes were judged (and, for
// TLS, the handshake can no longer carry another ClientHello in clear
// text): it sends the destination what the client sent after them (for
// plain HTTP, the one request, see closeAfterFirst), then splices.
func (g *gate) relay(c, upc *gateConn, sc *sniffConn, first firstBytes, orig netip.AddrPort) {
	var err error
	if first.kind == streamHTTP {
		_, err = upc.Write(closeAfterFirst(sc.buf[sc.off : sc.off+first.n]))
		if rest := sc.buf[sc.off+first.n:]; err == nil && len(rest) > 0 {
			_, err = upc.Write(rest)
		}
	} else if sc.off < len(sc.buf) {
		_, err = upc.Write(sc.buf[sc.off:])
	}
	sc.release()
	upc.keepAlive()
	if err != nil {
		g.dialFailed(orig, first.name, err)
		upc.Close()
		c.Reset()
		return
	}
	g.passed.Add(1)
	g.splice(c, upc)
}

// dialFailed counts and logs err when it is a failure to reach orig.
func (g *gate) dialFailed(orig netip.AddrPort, name string, err error) {
	var de dialError
	if !errors.As(err, &de) {
		return
	}
	g.dialErrors.Add(1)
	fmt.Fprintf(g.errw, "devbox gate: dial %s (%s): %v\n", orig, name, de.err)
}

// dialTimeout bounds the connection to the original destination.
const dialTimeout = 10 * time.Second

// serverHelloTimeout bounds the wait for the server's first flight.
const serverHelloTimeout = 10 * time.Second

// afterHRR follows a TLS handshake whose server asked for a second
// ClientHello (its HelloRetryRequest forwarded to the client): it reads the
// client's second hello (after an optional ChangeCipherSpec), passes it
// only when it is as strict as the first and carries the same name and
// ECH flag, and reads the server's answer, which must not be another
// HelloRetryRequest (RFC 8446 forbids it). From there, TLS 1.3 encrypts the
// client's handshake, and TLS 1.2 has no second hello. It returns a
// refusal reason (and the name the refused hello carried), or "" with
// sc.buf[sc.off:] left to forward; an error when either side failed or
// went away. The client's bytes after a hello wait in the kernel until the
// verdict on the server's answer.
func (g *gate) afterHRR(sc *sniffConn, up *gateConn, first firstBytes) (string, string, error) {
	sc.SetReadDeadline(time.Now().Add(sniffTimeout))
	// The compatibility-mode ChangeCipherSpec may come first.
	for {
		for len(sc.buf)-sc.off < 6 {
			if err := sc.more(); err != nil {
				if r, ok := err.(refusal); ok {
					return string(r), first.name, nil
				}
				return "", "", err
			}
		}
		if b := sc.buf[sc.off:]; b[0] == recordAlert {
			return "", "", errors.New("client's alert after a HelloRetryRequest")
		} else if b[0] != recordChangeCipherSpec {
			break
		} else if b[1] != 3 || b[3] != 0 || b[4] != 1 || b[5] != 1 {
			return GateAmbiguousTLS, first.name, nil
		}
		if _, err := up.Write(sc.buf[sc.off : sc.off+6]); err != nil {
			return "", "", err
		}
		sc.off += 6
	}
	second := sniff(sc)
	switch {
	case second.refus == GateNoName && second.kind == streamTLS:
		return "", "", errors.New("client went away before its second ClientHello")
	case second.refus != "" || second.kind != streamTLS:
		if second.refus == "" || second.refus == GateNoName {
			second.refus = GateAmbiguousTLS
		}
		return second.refus, second.name, nil
	case second.name != first.name || second.ech != first.ech:
		return GateHRRSNIChanged, second.name, nil
	}
	sc.SetReadDeadline(time.Time{})
	if _, err := up.Write(sc.buf[sc.off : sc.off+second.n]); err != nil {
		return "", "", err
	}
	sc.off += second.n
	hrr, err := g.serverHello(up, sc.gateConn, nil)
	if err != nil {
		return "", "", err
	}
	if hrr {
		return GateAmbiguousTLS, first.name, nil
	}
	return "", "", nil
}

// serverHello forwards the server's first bytes to the client until they
// say whether the server asks for a second ClientHello; seen is what was
// read and forwarded of them already.
func (g *gate) serverHello(up, c *gateConn, seen []byte) (bool, error) {
	buf := sniffBufs.Get().(*[sniffBuf]byte)
	defer sniffBufs.Put(buf)
	up.SetReadDeadline(time.Now().Add(serverHelloTimeout))
	defer up.SetReadDeadline(time.Time{})
	for {
		n, err := up.Read(buf[:])
		if n > 0 {
			if _, werr := c.Write(buf[:n]); werr != nil {
				return false, werr
			}
			if len(seen)+n > maxFirstBytes {
				return false, errors.New("server's first records too long")
			}
			data := buf[:n]
			if seen != nil {
				seen = append(seen, data...)
				data = seen
			}
			hrr, perr := serverHelloIsHRR(data)
			if perr == nil {
				return hrr, nil
			}
			if seen == nil {
				seen = bytes.Clone(data)
			}
			continue
		}
		if err == nil {
			err = io.ErrNoProgress
		}
		return false, err
	}
}

// splice copies both ways until both are done, with splice(2): the
// payload never enters user space.
func (g *gate) splice(a, b *gateConn) {
	done := make(chan struct{})
	half := func(dst, src *gateConn) {
		if err := g.pipes.spliceCopy(dst.rc, src.rc); err != nil {
			a.Close()
			b.Close()
			return
		}
		dst.CloseWrite()
	}
	g.workers.run(func() { half(b, a); close(done) })
	half(a, b)
	<-done
	a.Close()
	b.Close()
}

func (g *gate) refuse(c *gateConn, kind, name, reason string, orig netip.AddrPort) {
	g.refused.Add(1)
	n, _ := g.reasons.LoadOrStore(reason, new(atomic.Int64))
	n.(*atomic.Int64).Add(1)
	proto := kind
	if proto == "" {
		proto = "tcp"
	}
	e := Event{Time: time.Now().UTC(), Proto: proto, Dst: orig.Addr().String(), Port: orig.Port(), Name: boundField(name), Reason: reason}
	if uid, ok := socketUID(c.remote, orig); ok {
		e.UID = &uid
	}
	if g.cfg.Log {
		if err := g.binds.log(e); err != nil {
			// Not lost: the gate's stderr file keeps it.
			raw, _ := json.Marshal(e)
			fmt.Fprintf(g.errw, "devbox gate: log: %v: %s\n", err, raw)
		}
	}
	if kind == streamTLS {
		// A fatal access_denied alert: the client says why, not just
		// "connection reset".
		c.Write([]byte{0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 49})
		c.Close()
		return
	}
	c.Reset()
}

func (g *gate) health() GateHealth {
	h := GateHealth{
		PID: os.Getpid(), Accepted: g.accepted.Load(), Passed: g.passed.Load(), Refused: g.refused.Load(),
		Active: g.active.Load() - 1, DialErrors: g.dialErrors.Load(), Reasons: map[string]int64{},
	}
	g.reasons.Range(func(k, v any) bool {
		h.Reasons[k.(string)] = v.(*atomic.Int64).Load()
		return true
	})
	return h
}

func (g *gate) serveHealth(c *gateConn) {
	defer c.Close()
	c.SetWriteDeadline(time.Now().Add(time.Second))
	json.NewEncoder(c).Encode(g.health())
}

// QueryGateHealth asks the gate listening on addr for its counters.
func QueryGateHealth(ctx context.Context, addr string) (GateHealth, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return GateHealth{}, fmt.Errorf("name gate not answering on %s: %w", addr, err)
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		c.SetDeadline(dl)
	} else {
		c.SetDeadline(time.Now().Add(2 * time.Second))
	}
	c.Write([]byte("\n"))
	var h GateHealth
	if err := json.NewDecoder(c).Decode(&h); err != nil {
		return h, fmt.Errorf("name gate on %s: bad health answer: %w", addr, err)
	}
	return h, nil
}

// heldBytes counts the bytes all connections hold before their verdict
// (their first-bytes records): past maxHeldBytes a connection that needs
// more is refused (busy) rather than letting idle or slow clients grow the
// gate without bound.
var heldBytes atomic.Int64

// maxHeldBytes is the gate's budget for first bytes: 1,024 connections at
// the per-connection cap, or 4,096 holding the usual 4 KiB record.
const maxHeldBytes = 16 << 20

// sniffConn records what is read from the client before the verdict, so
// it can be replayed to the destination: buf[:off] has been forwarded.
type sniffConn struct {
	*gateConn
	// fd is read raw (non-blocking: EAGAIN when nothing has come) while
	// gateConn is nil: the gate's loop owns the descriptor.
	fd   int
	buf  []byte
	off  int
	held int // bytes of buf counted in heldBytes
	// short reports that the last read returned less than it asked for:
	// the kernel's queue was drained.
	short bool
}

// more reads what the client sent next into the record, as much as has
// come and fits: a ClientHello or a request's headers in one system call.
// It refuses (too-large, busy) past the per-connection and global caps.
func (s *sniffConn) more() error {
	if len(s.buf)-s.off >= maxFirstBytes {
		return refusal(GateTooLarge)
	}
	if len(s.buf) == cap(s.buf) {
		grow := sniffBuf
		if s.buf != nil {
			grow = min(max(cap(s.buf), 512), maxFirstBytes+s.off-len(s.buf))
		}
		if heldBytes.Add(int64(grow)) > maxHeldBytes {
			heldBytes.Add(-int64(grow))
			return refusal(GateBusy)
		}
		s.held += grow
		if s.buf == nil {
			s.buf = sniffBufs.Get().(*[sniffBuf]byte)[:0]
		} else {
			s.buf = slices.Grow(s.buf, grow)
		}
	}
	p := s.buf[len(s.buf):min(cap(s.buf), s.off+maxFirstBytes)]
	n, err := s.read(p)
	s.short = n < len(p)
	s.buf = s.buf[:len(s.buf)+n]
	if n > 0 {
		return nil // an error comes back with the next read
	}
	if err == nil {
		err = io.ErrNoProgress
	}
	return err
}

func (s *sniffConn) read(p []byte) (int, error) {
	if s.gateConn != nil {
		return s.gateConn.Read(p)
	}
	n, err := rawRead(s.fd, p)
	if err == nil && n == 0 {
		err = io.EOF
	}
	return n, err
}

// sniffBuf is the first-bytes record's usual size, reused between
// connections: a connection's check then allocates almost nothing.
const sniffBuf = 4 << 10

var sniffBufs = sync.Pool{New: func() any { return new([sniffBuf]byte) }}

func newSniffConn(c *gateConn) *sniffConn { return &sniffConn{gateConn: c} }

// release gives the record back once it has been replayed or refused.
func (s *sniffConn) release() {
	heldBytes.Add(-int64(s.held))
	s.held = 0
	if cap(s.buf) == sniffBuf {
		sniffBufs.Put((*[sniffBuf]byte)(s.buf[:sniffBuf]))
	}
	s.buf, s.off = nil, 0
}

// sniff reads from sc.buf[sc.off:] (reading more as needed) until a TLS
// ClientHello or an HTTP/1.x request head is complete, and reads it with
// the strict readers of gatename.go.
func sniff(sc *sniffConn) firstBytes {
	for {
		if f, ok := sniffed(sc); ok {
			return f
		}
		if err := sc.more(); err != nil {
			return sniffEnd(sc, err)
		}
	}
}

// sniffed reads what sc holds: a complete first message or a refusal, or
// (false) not enough yet.
func sniffed(sc *sniffConn) (firstBytes, bool) {
	if len(sc.buf) > sc.off {
		f, err := readFirst(sc.buf[sc.off:])
		if err == nil || f.refus != "" {
			return f, true
		}
	}
	return firstBytes{}, false
}

// sniffEnd is the verdict on a client that stopped (err: its end, the
// deadline, a cap) before its first message was complete.
func sniffEnd(sc *sniffConn, err error) firstBytes {
	f := firstBytes{refus: GateNoName} // nothing complete before the end or the deadline
	if r, ok := err.(refusal); ok {
		f.refus = string(r)
	}
	if len(sc.buf) > sc.off {
		g, _ := readFirst(sc.buf[sc.off:])
		f.kind, f.name = g.kind, g.name
	}
	return f
}

// originalDst returns where a redirected connection was going
// (SO_ORIGINAL_DST, IP6T_SO_ORIGINAL_DST: conntrack's original tuple).
func originalDstFD(fd int, is6 bool) (netip.AddrPort, error) {
	var sa unix.RawSockaddrAny
	level, opt := unix.SOL_IP, unix.SO_ORIGINAL_DST
	if is6 {
		level, opt = unix.SOL_IPV6, ip6tSOOriginalDst
	}
	l := uint32(unix.SizeofSockaddrAny)
	if err := getsockopt(fd, level, opt, unsafe.Pointer(&sa), &l); err != nil {
		return netip.AddrPort{}, fmt.Errorf("original destination: %w", err)
	}
	return sockaddrAddrPort(&sa)
}

// ip6tSOOriginalDst is IP6T_SO_ORIGINAL_DST (linux/netfilter_ipv6/ip6_tables.h),
// which x/sys/unix does not name.
const ip6tSOOriginalDst = 80

func getsockopt(fd, level, opt int, p unsafe.Pointer, l *uint32) error {
	_, _, e := unix.RawSyscall6(unix.SYS_GETSOCKOPT, uintptr(fd), uintptr(level), uintptr(opt), uintptr(p), uintptr(unsafe.Pointer(l)), 0)
	if e != 0 {
		return e
	}
	return nil
}

// socketUID finds the uid owning the client socket from → to (its
// original destination) with one netlink socket-diagnostics request
// (NETLINK_SOCK_DIAG, SOCK_DIAG_BY_FAMILY without NLM_F_DUMP): the kernel
// looks that one socket up in its hash table: 9.7 µs (BenchmarkSocketUID).
// A dump, even filtered by ports (netlink.SocketGet), walks all 262,144
// buckets of this machine's table: 616 µs. Only refusals pay for it.
func socketUID(from, to netip.AddrPort) (int, bool) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, unix.NETLINK_SOCK_DIAG)
	if err != nil {
		return 0, false
	}
	defer unix.Close(fd)
	unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Sec: 1})
	const hdr, reqLen = unix.SizeofNlMsghdr, 56 // struct inet_diag_req_v2
	req := make([]byte, hdr+reqLen)
	ne := binary.NativeEndian
	ne.PutUint32(req[0:], uint32(len(req)))
	ne.PutUint16(req[4:], unix.SOCK_DIAG_BY_FAMILY)
	ne.PutUint16(req[6:], unix.NLM_F_REQUEST)
	ne.PutUint32(req[8:], 1) // sequence
	r := req[hdr:]
	r[0] = unix.AF_INET
	if from.Addr().Is6() {
		r[0] = unix.AF_INET6
	}
	r[1] = unix.IPPROTO_TCP
	ne.PutUint32(r[4:], 0xffffffff) // every state
	id := r[8:]                     // struct inet_diag_sockid: the socket's own end first
	binary.BigEndian.PutUint16(id[0:], from.Port())
	binary.BigEndian.PutUint16(id[2:], to.Port())
	copy(id[4:20], from.Addr().AsSlice())
	copy(id[20:36], to.Addr().AsSlice())
	ne.PutUint32(id[40:], 0xffffffff) // INET_DIAG_NOCOOKIE
	ne.PutUint32(id[44:], 0xffffffff)
	if err := unix.Sendto(fd, req, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return 0, false
	}
	buf := make([]byte, 4096)
	n, _, err := unix.Recvfrom(fd, buf, 0)
	// The answer: a header and struct inet_diag_msg, whose idiag_uid
	// follows family/state/timer/retrans (4), the sockid (48) and
	// expires/rqueue/wqueue (12). An unknown socket is an NLMSG_ERROR.
	const uidAt = hdr + 4 + 48 + 12
	if err != nil || n < uidAt+4 || ne.Uint16(buf[4:]) != unix.SOCK_DIAG_BY_FAMILY {
		return 0, false
	}
	return int(ne.Uint32(buf[uidAt:])), true
}

// workers runs the gate's per-connection goroutines on goroutines that
// finished an earlier connection's work, parked until the next: a new
// goroutine starts on a small stack, and a connection's first steps grew
// it twice (copied each time) before its ClientHello was read.
type workers struct {
	jobs chan func()
	idle atomic.Int32
	max  int32
}

// run runs f on an idle worker, or on a new one when none waits.
func (w *workers) run(f func()) {
	select {
	case w.jobs <- f:
	default:
		go w.work(f)
	}
}

func (w *workers) work(f func()) {
	for {
		f()
		if w.idle.Add(1) > w.max {
			w.idle.Add(-1)
			return
		}
		f = <-w.jobs
		w.idle.Add(-1)
	}
}
