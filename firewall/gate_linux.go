//go:build linux

package firewall

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
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

// maxSniff bounds the bytes read before a decision (a ClientHello with
// post-quantum key shares is under 2 KiB; a request's headers a few).
const maxSniff = 64 << 10

// extECH is the encrypted_client_hello extension's code point.
const extECH = 0xfe0d

type gate struct {
	cfg    Config
	binds  *bindClient
	dialer net.Dialer
	pipes  *pipePool
	errw   io.Writer

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

// boundNames returns the names the filter says resolved to a.
func (g *gate) boundNames(a netip.Addr) ([]string, error) {
	now := time.Now()
	if r, ok := g.recent.Load(a); ok && now.Before(r.(recentNames).until) {
		return r.(recentNames).names, nil
	}
	names, err := g.binds.names(a)
	if err == nil && len(names) > 0 {
		g.recent.Store(a, recentNames{names, now.Add(bindCacheFor)})
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
	g := &gate{
		cfg:    cfg,
		binds:  newBindClient(bindSocketPath(cfg)),
		dialer: net.Dialer{Timeout: 10 * time.Second},
		pipes:  newPipePool(32),
		errw:   boundedStderr(),
	}
	ls, err := gateListeners()
	if err != nil {
		return err
	}
	go func() {
		t := time.NewTicker(time.Minute)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case now := <-t.C:
				g.recent.Range(func(k, v any) bool {
					if !now.Before(v.(recentNames).until) {
						g.recent.Delete(k)
					}
					return true
				})
			}
		}
	}()
	errc := make(chan error, len(ls))
	for _, l := range ls {
		defer l.Close()
		go func() {
			for {
				c, err := l.AcceptTCP()
				if err != nil {
					errc <- err
					return
				}
				go g.handle(c)
			}
		}()
	}
	select {
	case <-ctx.Done():
		return nil
	case err := <-errc:
		return fmt.Errorf("firewall gate: %w", err)
	}
}

func (g *gate) handle(c *net.TCPConn) {
	g.active.Add(1)
	defer g.active.Add(-1)
	local, _ := netip.ParseAddrPort(c.LocalAddr().String())
	orig, err := originalDst(c)
	if err != nil || orig.Addr().Unmap().IsLoopback() || orig == local {
		// Not redirected: a direct connection to the gate's port is a
		// health query.
		g.serveHealth(c)
		return
	}
	g.accepted.Add(1)
	orig = netip.AddrPortFrom(orig.Addr().Unmap(), orig.Port())
	c.SetReadDeadline(time.Now().Add(sniffTimeout))
	sc := newSniffConn(c)
	kind, name, ech := sniff(sc)
	bound, berr := g.boundNames(orig.Addr())
	if berr != nil {
		fmt.Fprintf(g.errw, "devbox gate: %s: %v\n", orig, berr)
	}
	if reason := g.cfg.gateVerdict(kind, name, ech, orig.Port(), bound); reason != "" {
		sc.release()
		g.refuse(c, kind, name, reason, orig)
		return
	}
	c.SetReadDeadline(time.Time{})
	up, err := g.dialer.Dial("tcp", orig.String())
	if err != nil {
		g.dialErrors.Add(1)
		fmt.Fprintf(g.errw, "devbox gate: dial %s (%s): %v\n", orig, name, err)
		c.SetLinger(0)
		c.Close()
		return
	}
	g.passed.Add(1)
	upc := up.(*net.TCPConn)
	_, err = upc.Write(sc.buf)
	sc.release()
	if err != nil {
		upc.Close()
		c.SetLinger(0)
		c.Close()
		return
	}
	g.splice(c, upc)
}

// splice copies both ways until both are done, with splice(2): the
// payload never enters user space.
func (g *gate) splice(a, b *net.TCPConn) {
	done := make(chan struct{})
	half := func(dst, src *net.TCPConn) {
		if err := g.pipes.spliceCopy(dst, src); err != nil {
			a.Close()
			b.Close()
			return
		}
		dst.CloseWrite()
	}
	go func() { half(b, a); close(done) }()
	half(a, b)
	<-done
	a.Close()
	b.Close()
}

func (g *gate) refuse(c *net.TCPConn, kind, name, reason string, orig netip.AddrPort) {
	g.refused.Add(1)
	n, _ := g.reasons.LoadOrStore(reason, new(atomic.Int64))
	n.(*atomic.Int64).Add(1)
	proto := kind
	if proto == "" {
		proto = "tcp"
	}
	e := Event{Time: time.Now().UTC(), Proto: proto, Dst: orig.Addr().String(), Port: orig.Port(), Name: name, Reason: reason}
	if from, err := netip.ParseAddrPort(c.RemoteAddr().String()); err == nil {
		if uid, ok := socketUID(from, orig); ok {
			e.UID = &uid
		}
	}
	if g.cfg.Log {
		if err := g.binds.log(e); err != nil {
			fmt.Fprintf(g.errw, "devbox gate: log: %v\n", err)
		}
	}
	if kind == streamTLS {
		// A fatal access_denied alert: the client says why, not just
		// "connection reset".
		c.Write([]byte{0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 49})
		c.Close()
		return
	}
	c.SetLinger(0) // RST
	c.Close()
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

func (g *gate) serveHealth(c *net.TCPConn) {
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
	var h GateHealth
	if err := json.NewDecoder(c).Decode(&h); err != nil {
		return h, fmt.Errorf("name gate on %s: bad health answer: %w", addr, err)
	}
	return h, nil
}

// sniffConn records what is read from the client so it can be replayed to
// the destination, and can rewind to replay it to a second parser. It
// never writes: a parser's alert goes nowhere.
type sniffConn struct {
	*net.TCPConn
	buf []byte
	off int
}

var errSniffDone = errors.New("devbox gate: read only")

func (s *sniffConn) Read(p []byte) (int, error) {
	if s.off == len(s.buf) {
		if err := s.more(); err != nil {
			return 0, err
		}
	}
	n := copy(p, s.buf[s.off:])
	s.off += n
	return n, nil
}

// more reads what the client sent next into the record, as much as has
// come and fits: a ClientHello or a request's headers in one system call.
func (s *sniffConn) more() error {
	if len(s.buf) >= maxSniff {
		return errors.New("devbox gate: first bytes too long")
	}
	if len(s.buf) == cap(s.buf) {
		s.buf = slices.Grow(s.buf, min(max(cap(s.buf), 512), maxSniff-len(s.buf)))
	}
	n, err := s.TCPConn.Read(s.buf[len(s.buf):min(cap(s.buf), maxSniff)])
	s.buf = s.buf[:len(s.buf)+n]
	if n > 0 {
		return nil // an error comes back with the next read
	}
	if err == nil {
		err = io.ErrNoProgress
	}
	return err
}

// sniffBuf is the first-bytes record's usual size, reused between
// connections (with http.ReadRequest's reader): a connection's check then
// allocates little beyond what crypto/tls or net/http need, and the gate
// collects garbage less often.
const sniffBuf = 4 << 10

var (
	sniffBufs    = sync.Pool{New: func() any { return new([sniffBuf]byte) }}
	sniffReaders = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, sniffBuf) }}
)

func newSniffConn(c *net.TCPConn) *sniffConn {
	return &sniffConn{TCPConn: c, buf: sniffBufs.Get().(*[sniffBuf]byte)[:0]}
}

// release gives the record back once it has been replayed or refused.
func (s *sniffConn) release() {
	if cap(s.buf) == sniffBuf {
		sniffBufs.Put((*[sniffBuf]byte)(s.buf[:sniffBuf]))
	}
	s.buf = nil
}

func (s *sniffConn) Write([]byte) (int, error) { return 0, errSniffDone }
func (s *sniffConn) Close() error              { return nil }

// sniff reads the first bytes: a TLS ClientHello (parsed by crypto/tls,
// stopped in its callbacks before it answers) or an HTTP/1.x request's
// headers (net/http). It returns the kind, the SNI or Host, and whether
// the ClientHello carried an ECH extension.
func sniff(sc *sniffConn) (kind, name string, ech bool) {
	if sc.off == len(sc.buf) {
		if err := sc.more(); err != nil {
			return "", "", false
		}
	}
	switch b := sc.buf[sc.off]; {
	case b == 0x16: // handshake record
		var seen bool
		note := func(hi *tls.ClientHelloInfo) {
			if seen {
				return
			}
			seen = true
			name = hi.ServerName
			for _, e := range hi.Extensions {
				if e == extECH {
					ech = true
				}
			}
		}
		cfg := &tls.Config{
			// Called only for a ClientHello with the ECH extension, with
			// the outer hello (no keys: the gate decrypts nothing).
			GetEncryptedClientHelloKeys: func(hi *tls.ClientHelloInfo) ([]tls.EncryptedClientHelloKey, error) {
				note(hi)
				ech = true
				return nil, errSniffDone
			},
			GetConfigForClient: func(hi *tls.ClientHelloInfo) (*tls.Config, error) {
				note(hi)
				return nil, errSniffDone
			},
		}
		// No context: a cancellable one makes crypto/tls close the conn.
		tls.Server(sc, cfg).Handshake()
		return streamTLS, name, ech
	case b >= 'A' && b <= 'Z':
		br := sniffReaders.Get().(*bufio.Reader)
		br.Reset(sc)
		req, err := http.ReadRequest(br)
		br.Reset(nil)
		sniffReaders.Put(br)
		if err != nil {
			return "", "", false
		}
		return streamHTTP, hostName(req.Host), false
	}
	return "", "", false
}

// originalDst returns where a redirected connection was going
// (SO_ORIGINAL_DST, IP6T_SO_ORIGINAL_DST: conntrack's original tuple).
func originalDst(c *net.TCPConn) (netip.AddrPort, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return netip.AddrPort{}, err
	}
	var out netip.AddrPort
	var serr error
	is6 := strings.HasPrefix(c.LocalAddr().String(), "[")
	err = rc.Control(func(fd uintptr) {
		if is6 {
			var sa unix.RawSockaddrInet6
			l := uint32(unsafe.Sizeof(sa))
			serr = getsockopt(int(fd), unix.SOL_IPV6, ip6tSOOriginalDst, unsafe.Pointer(&sa), &l)
			port := binary.BigEndian.Uint16((*[2]byte)(unsafe.Pointer(&sa.Port))[:])
			out = netip.AddrPortFrom(netip.AddrFrom16(sa.Addr), port)
			return
		}
		var sa unix.RawSockaddrInet4
		l := uint32(unsafe.Sizeof(sa))
		serr = getsockopt(int(fd), unix.SOL_IP, unix.SO_ORIGINAL_DST, unsafe.Pointer(&sa), &l)
		port := binary.BigEndian.Uint16((*[2]byte)(unsafe.Pointer(&sa.Port))[:])
		out = netip.AddrPortFrom(netip.AddrFrom4(sa.Addr), port)
	})
	if err == nil {
		err = serr
	}
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("original destination: %w", err)
	}
	return out, nil
}

// ip6tSOOriginalDst is IP6T_SO_ORIGINAL_DST (linux/netfilter_ipv6/ip6_tables.h),
// which x/sys/unix does not name.
const ip6tSOOriginalDst = 80

func getsockopt(fd, level, opt int, p unsafe.Pointer, l *uint32) error {
	_, _, e := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(fd), uintptr(level), uintptr(opt), uintptr(p), uintptr(unsafe.Pointer(l)), 0)
	if e != 0 {
		return e
	}
	return nil
}

// socketUID finds the uid owning the client socket from → to (its
// original destination) in /proc/net/tcp and tcp6. Only refusals pay for it.
func socketUID(from, to netip.AddrPort) (int, bool) {
	for _, file := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		f, err := os.Open(file)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			fs := strings.Fields(sc.Text())
			if len(fs) < 8 {
				continue
			}
			l, ok1 := procAddr(fs[1])
			r, ok2 := procAddr(fs[2])
			if ok1 && ok2 && l == from && r == to {
				uid, err := strconv.Atoi(fs[7])
				f.Close()
				return uid, err == nil
			}
		}
		f.Close()
	}
	return 0, false
}

// procAddr parses /proc/net/tcp's "HEXADDR:HEXPORT": the address is
// written as 32-bit words in host byte order.
func procAddr(s string) (netip.AddrPort, bool) {
	a, p, ok := strings.Cut(s, ":")
	if !ok {
		return netip.AddrPort{}, false
	}
	raw, err := hex.DecodeString(a)
	if err != nil || (len(raw) != 4 && len(raw) != 16) {
		return netip.AddrPort{}, false
	}
	for i := 0; i < len(raw); i += 4 {
		w := binary.NativeEndian.Uint32(raw[i:])
		binary.BigEndian.PutUint32(raw[i:], w)
	}
	port, err := strconv.ParseUint(p, 16, 16)
	if err != nil {
		return netip.AddrPort{}, false
	}
	addr, _ := netip.AddrFromSlice(raw)
	return netip.AddrPortFrom(addr.Unmap(), uint16(port)), true
}
