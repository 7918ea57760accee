//go:build linux

package firewall

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	stdlog "log"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/miekg/dns"
	"golang.org/x/sys/unix"

	"github.com/devbox-dev/devbox/internal/daemonpid"
)

// filter is the DNS filter: it answers only names the Config allows and
// inserts their addresses into the sets before answering.
type filter struct {
	cfg      Config
	ups      []netip.AddrPort
	sets     *sets
	log      *eventLog
	dialer   *net.Dialer
	tcp      *dns.Client
	names    sync.Map // netip.Addr → name, for the packet log
	pools    sync.Map // netip.AddrPort → chan *upConn (idle upstream sockets)
	cache    sync.Map // cacheKey → *cacheEntry
	cacheLen atomic.Int64
	// fresh remembers until when each inserted entry is known to stay in
	// its set, so a hot name does not cost a netlink write per query.
	fresh sync.Map // freshKey → time.Time
	// bound is which names resolved to which address, for the name gate.
	bound bindings

	// errw is where errors go: stderr, bounded when it is a file (dns.err).
	errw io.Writer

	queries, forwarded, refused, dropped, upErrors, inserted, blocked, hits atomic.Int64

	// entryHits counts, per cfg.Allow entry, the queries it answered
	// (first and last time in unix nanoseconds), for HitsFile.
	entryHits []entryCounter
	started   time.Time
}

type entryCounter struct{ n, first, last atomic.Int64 }

// countHits records that the allowed query name was answered by each
// matching allow entry.
func (f *filter) countHits(name string) {
	if len(f.entryHits) != len(f.cfg.Allow) {
		return // a filter made without counters
	}
	name = strings.ToLower(strings.TrimSuffix(name, "."))
	now := time.Now().UnixNano()
	for i, d := range f.cfg.Allow {
		if d.matchesName(name) {
			c := &f.entryHits[i]
			if c.n.Add(1) == 1 {
				c.first.CompareAndSwap(0, now)
			}
			c.last.Store(now)
		}
	}
}

// hitsSnapshot is the counters as HitsFile holds them.
func (f *filter) hitsSnapshot() Hits {
	h := Hits{Since: f.started.UTC(), Updated: time.Now().UTC(), Entries: []EntryHits{}}
	for i, d := range f.cfg.Allow {
		if d.Name == "" || i >= len(f.entryHits) {
			continue
		}
		c := &f.entryHits[i]
		e := EntryHits{Entry: d.String(), Hits: c.n.Load()}
		if t := c.first.Load(); t != 0 {
			e.First = time.Unix(0, t).UTC()
		}
		if t := c.last.Load(); t != 0 {
			e.Last = time.Unix(0, t).UTC()
		}
		h.Entries = append(h.Entries, e)
	}
	return h
}

// writeHits rewrites HitsFile in place (StartDNS created it for the
// filter's user, which cannot create files in the root-owned StateDir).
func (f *filter) writeHits() error {
	raw, _ := json.MarshalIndent(f.hitsSnapshot(), "", "  ")
	return os.WriteFile(filepath.Join(f.cfg.StateDir, HitsFile), append(raw, '\n'), 0o644)
}

// hitsEvery is how often the filter writes its hit counters when they
// changed.
const hitsEvery = 2 * time.Second

func (f *filter) keepHits(ctx context.Context) {
	t := time.NewTicker(hitsEvery)
	defer t.Stop()
	var written int64 = -1
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if q := f.queries.Load(); q != written {
			if err := f.writeHits(); err != nil {
				fmt.Fprintf(f.errw, "devbox dns: hit counters: %v\n", err)
			}
			written = q
		}
	}
}

// boundedStderr returns stderr, wrapped in a rotatingFile of errMaxBytes
// when it is a regular file (StartDNS points it at StateDir/dns.err), so a
// long-running daemon's error messages cannot grow without limit.
func boundedStderr() io.Writer {
	st, err := os.Stderr.Stat()
	if err != nil || !st.Mode().IsRegular() {
		return os.Stderr
	}
	path, err := os.Readlink("/proc/self/fd/2")
	if err != nil || !strings.HasPrefix(path, "/") {
		return os.Stderr
	}
	return newRotatingFile(os.Stderr, path, errMaxBytes)
}

// markControl sets SO_MARK on the filter's upstream sockets: the one mark
// the rules let out on port 53, which needs CAP_NET_ADMIN to set.
func markControl(mark uint32) func(network, address string, c syscall.RawConn) error {
	return func(network, address string, c syscall.RawConn) error {
		var serr error
		if err := c.Control(func(fd uintptr) {
			serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_MARK, int(mark))
		}); err != nil {
			return err
		}
		if serr != nil {
			return fmt.Errorf("set SO_MARK (needs CAP_NET_ADMIN): %w", serr)
		}
		return nil
	}
}

func newFilter(cfg Config, s *sets, log *eventLog) (*filter, error) {
	ups, err := cfg.upstreams()
	if err != nil {
		return nil, err
	}
	d := &net.Dialer{Control: markControl(cfg.Mark), Timeout: 2 * time.Second}
	return &filter{
		cfg: cfg, ups: ups, sets: s, log: log, dialer: d,
		entryHits: make([]entryCounter, len(cfg.Allow)), started: time.Now(),
		errw: os.Stderr,
		tcp:  &dns.Client{Net: "tcp", Dialer: d, Timeout: 3 * time.Second},
	}, nil
}

// ServeDNS answers TCP queries (through miekg/dns's server); UDP ones go
// through serveUDP.
func (f *filter) ServeDNS(w dns.ResponseWriter, r *dns.Msg) {
	w.WriteMsg(f.answer(r, true, nil))
}

// answer decides one query and returns the reply. raw is the query as it
// arrived (UDP), forwarded as is instead of packed again.
func (f *filter) answer(r *dns.Msg, tcp bool, raw []byte) *dns.Msg {
	f.queries.Add(1)
	if len(r.Question) != 1 || r.Opcode != dns.OpcodeQuery {
		m := new(dns.Msg)
		m.SetRcode(r, dns.RcodeFormatError)
		return m
	}
	q := r.Question[0]
	if q.Qclass == dns.ClassCHAOS && strings.EqualFold(q.Name, HealthName) {
		return f.health(r)
	}
	v := f.cfg.Match(q.Name)
	if !v.Allowed {
		return f.refuse(r, "dns-"+v.Reason)
	}
	f.countHits(q.Name)
	if resp := f.cached(q, r, v); resp != nil {
		return resp
	}
	resp, err := f.forward(r, tcp, raw)
	if err != nil {
		f.upErrors.Add(1)
		fmt.Fprintf(f.errw, "devbox dns: %s: %v\n", q.Name, err)
		m := new(dns.Msg)
		m.SetRcode(r, dns.RcodeServerFailure)
		return m
	}
	f.forwarded.Add(1)
	if reason := f.filterAnswer(q, resp, v); reason != "" {
		return f.refuse(r, reason)
	}
	f.store(q, resp)
	resp.Id = r.Id
	return resp
}

// udpWorkers is how many goroutines serve one UDP socket: each reads a
// query, answers it and reads the next, so a query costs no goroutine
// start and no stack growth (miekg/dns's server starts one per packet,
// which was a tenth of the filter's CPU). It bounds the queries in flight
// upstream per socket; more wait in the socket's buffer.
const udpWorkers = 256

// serveUDP answers the queries arriving on pc until it is closed.
func (f *filter) serveUDP(pc *net.UDPConn) error {
	errc := make(chan error, udpWorkers)
	for range udpWorkers {
		go func() {
			buf := make([]byte, dns.MaxMsgSize)
			var out []byte
			for {
				n, from, err := pc.ReadFromUDPAddrPort(buf)
				if err != nil {
					if errors.Is(err, net.ErrClosed) {
						err = nil
					}
					errc <- err
					return
				}
				r := new(dns.Msg)
				if r.Unpack(buf[:n]) != nil || r.Response {
					continue // not a query: no answer, as no server owes one
				}
				m := f.answer(r, false, buf[:n])
				truncateUDP(m, r)
				if out, err = m.PackBuffer(out[:cap(out)]); err != nil {
					continue
				}
				pc.WriteToUDPAddrPort(out, from)
			}
		}()
	}
	return <-errc
}

// cacheEntry is a filtered answer and when it expires.
type cacheEntry struct {
	msg     *dns.Msg
	stored  time.Time
	expires time.Time
}

const maxCache = 10000

func cacheKey(q dns.Question) string {
	return strings.ToLower(q.Name) + "/" + dns.TypeToString[q.Qtype] + "/" + dns.ClassToString[q.Qclass]
}

// store keeps a successful filtered answer for its smallest TTL: programs in
// a container rarely cache DNS themselves, and a repeated lookup then costs
// no upstream round trip.
func (f *filter) store(q dns.Question, resp *dns.Msg) {
	if f.cfg.NoCache || resp.Rcode != dns.RcodeSuccess || len(resp.Answer) == 0 || resp.Truncated {
		return
	}
	ttl := uint32(f.cfg.MaxTTL / time.Second)
	for _, rr := range resp.Answer {
		ttl = min(ttl, rr.Header().Ttl)
	}
	if ttl == 0 {
		return
	}
	if f.cacheLen.Load() >= maxCache {
		f.cache.Clear() // crude, but bounded and never stale
		f.cacheLen.Store(0)
	}
	now := time.Now()
	if _, loaded := f.cache.Swap(cacheKey(q), &cacheEntry{msg: resp.Copy(), stored: now, expires: now.Add(time.Duration(ttl) * time.Second)}); !loaded {
		f.cacheLen.Add(1)
	}
}

// cached answers from the cache, with TTLs aged, after making sure the
// addresses are still in the sets.
func (f *filter) cached(q dns.Question, r *dns.Msg, v Verdict) *dns.Msg {
	if f.cfg.NoCache {
		return nil
	}
	e, ok := f.cache.Load(cacheKey(q))
	if !ok {
		return nil
	}
	ce := e.(*cacheEntry)
	now := time.Now()
	if !now.Before(ce.expires) {
		f.cache.CompareAndDelete(cacheKey(q), e)
		return nil
	}
	age := uint32(now.Sub(ce.stored) / time.Second)
	m := ce.msg.Copy()
	for _, rr := range m.Answer {
		h := rr.Header()
		h.Ttl -= min(h.Ttl, age)
		var addr netip.Addr
		switch rr := rr.(type) {
		case *dns.A:
			addr, _ = netip.AddrFromSlice(rr.A.To4())
		case *dns.AAAA:
			addr, _ = netip.AddrFromSlice(rr.AAAA.To16())
		}
		if addr.IsValid() {
			ttl := min(max(time.Duration(h.Ttl)*time.Second, f.cfg.MinTTL), f.cfg.MaxTTL)
			if err := f.insert(strings.TrimSuffix(strings.ToLower(q.Name), "."), addr, v, ttl); err != nil {
				return nil // fall back to a full lookup, which fails closed
			}
		}
	}
	f.hits.Add(1)
	m.Id = r.Id
	m.Question = r.Question
	return m
}

// truncateUDP fits a UDP answer into what the query can take: 512 bytes,
// or the EDNS0 buffer size it advertised but never less than 512 (RFC 6891
// 6.2.5). Every UDP answer, from the cache or not, goes through it once,
// in serveUDP.
func truncateUDP(m, q *dns.Msg) {
	size := dns.MinMsgSize
	if o := q.IsEdns0(); o != nil {
		size = max(int(o.UDPSize()), dns.MinMsgSize)
	}
	if m.Len() > size {
		m.Truncate(size)
	}
}

func (f *filter) refuse(r *dns.Msg, reason string) *dns.Msg {
	f.refused.Add(1)
	q := r.Question[0]
	f.log.Append(Event{Time: time.Now().UTC(), Proto: "dns", Name: strings.TrimSuffix(strings.ToLower(q.Name), "."), QType: dns.TypeToString[q.Qtype], Reason: reason})
	m := new(dns.Msg)
	m.SetRcode(r, dns.RcodeRefused)
	return m
}

func (f *filter) forward(r *dns.Msg, tcp bool, raw []byte) (*dns.Msg, error) {
	var errs []error
	for _, up := range f.ups {
		var resp *dns.Msg
		var err error
		if tcp {
			resp, _, err = f.tcp.Exchange(r, up.String())
		} else {
			resp, err = f.exchangeUDP(r, raw, up)
		}
		if err == nil {
			return resp, nil
		}
		errs = append(errs, fmt.Errorf("upstream %s: %w", up, err))
	}
	return nil, errors.Join(errs...)
}

// upstreamUDPTimeout bounds one UDP exchange with an upstream.
const upstreamUDPTimeout = 2 * time.Second

// upConn is an idle upstream socket: connected to one upstream and marked,
// so it only ever receives that upstream's answers.
type upConn struct {
	c   *net.UDPConn
	buf []byte
}

// exchangeUDP sends the query (raw, as the client sent it, when given) over
// a reused marked socket: opening one per query costs more than the query.
// An answer with another id (a late answer to an earlier query that timed
// out on this socket) is skipped; a socket that saw an error is closed.
func (f *filter) exchangeUDP(r *dns.Msg, raw []byte, up netip.AddrPort) (*dns.Msg, error) {
	pool := f.pool(up)
	var uc *upConn
	select {
	case uc = <-pool:
	default:
		c, err := f.dialer.Dial("udp", up.String())
		if err != nil {
			return nil, err
		}
		uc = &upConn{c: c.(*net.UDPConn), buf: make([]byte, 4096)}
	}
	if raw == nil {
		var err error
		if raw, err = r.Pack(); err != nil {
			uc.c.Close()
			return nil, err
		}
	}
	resp, err := uc.exchange(raw, r.Id, time.Now().Add(upstreamUDPTimeout))
	if err != nil {
		uc.c.Close()
		return nil, err
	}
	select {
	case pool <- uc:
	default:
		uc.c.Close()
	}
	return resp, nil
}

func (uc *upConn) exchange(raw []byte, id uint16, deadline time.Time) (*dns.Msg, error) {
	uc.c.SetDeadline(deadline)
	if _, err := uc.c.Write(raw); err != nil {
		return nil, err
	}
	for {
		n, err := uc.c.Read(uc.buf)
		if err != nil {
			return nil, err
		}
		if n < 2 || binary.BigEndian.Uint16(uc.buf) != id {
			continue
		}
		resp := new(dns.Msg)
		if err := resp.Unpack(uc.buf[:n]); err != nil {
			return nil, err
		}
		return resp, nil
	}
}

func (f *filter) pool(up netip.AddrPort) chan *upConn {
	if p, ok := f.pools.Load(up); ok {
		return p.(chan *upConn)
	}
	p, _ := f.pools.LoadOrStore(up, make(chan *upConn, udpWorkers))
	return p.(chan *upConn)
}

// filterAnswer drops addresses an allowed name must never point at, inserts
// the others into the sets (before the answer leaves), caps the TTLs at
// MaxTTL so no client caches an address longer than the set keeps it, and
// strips additional-section addresses that were not checked. It returns a
// refusal reason when the answer must not be given at all.
func (f *filter) filterAnswer(q dns.Question, resp *dns.Msg, v Verdict) string {
	name := strings.TrimSuffix(strings.ToLower(q.Name), ".")
	maxTTL := uint32(f.cfg.MaxTTL / time.Second)
	kept := resp.Answer[:0]
	for _, rr := range resp.Answer {
		h := rr.Header()
		if h.Ttl > maxTTL {
			h.Ttl = maxTTL
		}
		var addr netip.Addr
		switch rr := rr.(type) {
		case *dns.CNAME:
			// A chain through a denied name is refused whole.
			if t := f.cfg.Match(rr.Target); t.Reason == "denied" {
				return "dns-denied-cname"
			}
		case *dns.A:
			addr, _ = netip.AddrFromSlice(rr.A.To4())
		case *dns.AAAA:
			addr, _ = netip.AddrFromSlice(rr.AAAA.To16())
		}
		if addr.IsValid() {
			if why := f.cfg.AddressVerdict(addr); why != "" {
				f.dropped.Add(1)
				f.log.Append(Event{Time: time.Now().UTC(), Proto: "dns", Dst: addr.String(), Name: name, QType: dns.TypeToString[h.Rrtype], Reason: "answer-" + why})
				continue
			}
			ttl := time.Duration(h.Ttl) * time.Second
			ttl = min(max(ttl, f.cfg.MinTTL), f.cfg.MaxTTL)
			if err := f.insert(name, addr, v, ttl); err != nil {
				fmt.Fprintf(f.errw, "devbox dns: %s: %v\n", name, err)
				return "dns-set-error" // fail closed: no address the rules do not allow
			}
			if n, ok := f.names.Load(addr.Unmap()); !ok || n.(string) != name {
				f.names.Store(addr.Unmap(), name)
			}
		}
		kept = append(kept, rr)
	}
	resp.Answer = kept
	extra := resp.Extra[:0]
	for _, rr := range resp.Extra {
		if t := rr.Header().Rrtype; t != dns.TypeA && t != dns.TypeAAAA {
			extra = append(extra, rr)
		}
	}
	resp.Extra = extra
	return ""
}

// freshKey names one set member (comparable, so no string is built per query).
type freshKey struct {
	set string
	e   entry
}

func (f *filter) insert(name string, a netip.Addr, v Verdict, ttl time.Duration) error {
	a = a.Unmap()
	// The binding first: once the set entry exists, the gate may see a
	// connection to it. It expires with the set entry (2×TTL, see below).
	f.bound.add(a, name, time.Now().Add(2*ttl))
	ms := answerMembers(a, v)
	now := time.Now()
	for _, m := range ms {
		key := freshKey{m.set, m.e}
		// Entries are written with twice the TTL and rewritten only once
		// less than one TTL is left: every answer's address outlives the
		// answer's TTL, and a hot name costs one netlink write per TTL
		// rather than one per query.
		if until, ok := f.fresh.Load(key); ok && until.(time.Time).After(now.Add(ttl+time.Second)) {
			continue
		}
		timeout, until := 2*ttl, now.Add(2*ttl)
		if strings.HasPrefix(m.set, "devbox-"+SetProtect) {
			timeout, until = 0, now.Add(100*365*24*time.Hour) // permanent
		}
		if err := f.sets.add(m.set, m.e, timeout); err != nil {
			f.fresh.Delete(key)
			return err
		}
		f.fresh.Store(key, until)
	}
	f.inserted.Add(1)
	return nil
}

func (f *filter) health(r *dns.Msg) *dns.Msg {
	h := Health{
		PID: os.Getpid(), Queries: f.queries.Load(), Forwarded: f.forwarded.Load(), Refused: f.refused.Load(),
		Dropped: f.dropped.Load(), UpstreamErrors: f.upErrors.Load(), Inserted: f.inserted.Load(), Blocked: f.blocked.Load(),
		CacheHits: f.hits.Load(),
	}
	for _, u := range f.ups {
		h.Upstreams = append(h.Upstreams, u.String())
	}
	raw, _ := json.Marshal(h)
	m := new(dns.Msg)
	m.SetReply(r)
	m.Answer = []dns.RR{&dns.TXT{Hdr: dns.RR_Header{Name: HealthName, Rrtype: dns.TypeTXT, Class: dns.ClassCHAOS}, Txt: splitTXT(base64.StdEncoding.EncodeToString(raw))}}
	return m
}

func splitTXT(s string) []string {
	var out []string
	for len(s) > 255 {
		out = append(out, s[:255])
		s = s[255:]
	}
	return append(out, s)
}

// RunDNS runs the DNS filter in the foreground until ctx is done: UDP and
// TCP on 127.0.0.1 and ::1 at cfg.DNSPort, plus the NFLOG reader when cfg.Log
// is set. It needs CAP_NET_ADMIN (sets, SO_MARK, NFLOG) and nothing else.
func RunDNS(ctx context.Context, cfg Config) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	cfg = cfg.WithDefaults()
	s, err := openSets()
	if err != nil {
		return fmt.Errorf("firewall dns: %w", err)
	}
	defer s.Close()
	var log eventLog
	if cfg.Log && cfg.LogFile != "" {
		lf, err := os.OpenFile(cfg.LogFile, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
		if err != nil {
			return fmt.Errorf("firewall dns: open log: %w", err)
		}
		defer lf.Close()
		log.W = newRotatingFile(lf, cfg.LogFile, cfg.LogMaxBytes)
	}
	f, err := newFilter(cfg, s, &log)
	if err != nil {
		return fmt.Errorf("firewall dns: %w", err)
	}
	f.errw = boundedStderr()
	stdlog.SetOutput(f.errw) // miekg/dns reports server errors through it
	hctx, stopHits := context.WithCancel(ctx)
	defer func() {
		stopHits()
		f.writeHits()
	}()
	go f.keepHits(hctx)
	var (
		servers []*dns.Server
		pcs     []*net.UDPConn
	)
	// Every listener is closed and every server shut down on any return
	// (one of them failed, or ctx ended), so none is left behind. Closing
	// the listener also stops a server whose ActivateAndServe has not
	// marked it started yet, which Shutdown alone would refuse.
	defer func() {
		for _, srv := range servers {
			srv.Shutdown()
			srv.Listener.Close()
		}
		for _, pc := range pcs {
			pc.Close()
		}
	}()
	// Root made the sockets and handed them over (StartDNS): the filter
	// never binds its port itself.
	in, err := daemonpid.Inherit("DNS filter")
	if err != nil {
		return fmt.Errorf("firewall dns: %w", err)
	}
	for _, l := range in.TCP {
		servers = append(servers, &dns.Server{Listener: l, Handler: f})
	}
	for _, pc := range in.UDP {
		pcs = append(pcs, pc.(*net.UDPConn))
	}
	// Then the gate's bindings socket and the NFLOG socket, and the DNS
	// servers last: StartDNS's readiness check is a DNS query, so once the
	// filter answers one, everything it serves is there (CI run 10: a
	// gate's first lookup came before the bindings socket existed, and a
	// connection apply had just made possible was refused). The inherited
	// sockets are taken first all the same, so that a failure here closes
	// them (TestRunDNSFailureClosesListeners).
	var bl *net.UnixListener
	if cfg.Gate {
		if testHookBindings != nil {
			testHookBindings()
		}
		if bl, err = listenBindings(cfg); err != nil {
			return fmt.Errorf("firewall dns: %w", err)
		}
		defer bl.Close()
	}
	var nl *nflogReader
	if cfg.Log {
		if nl, err = openNFLOG(cfg.LogGroup); err != nil {
			return fmt.Errorf("firewall dns: %w", err)
		}
		defer nl.Close()
	}
	errc := make(chan error, len(servers)+len(pcs)+2)
	if bl != nil {
		go func() { errc <- f.serveBindings(bl) }()
		go sweepEveryMinute(ctx, f.bound.sweep)
	}
	if nl != nil {
		go func() {
			errc <- nl.read(func(prefix string, payload []byte, _ uint8) {
				e, ok := packetEvent(prefix, payload)
				if !ok {
					return
				}
				f.blocked.Add(1)
				if a, err := netip.ParseAddr(e.Dst); err == nil {
					if n, ok := f.names.Load(a); ok {
						e.Name = n.(string)
					}
				}
				log.Append(e)
			})
		}()
	}
	for _, srv := range servers {
		go func() { errc <- srv.ActivateAndServe() }()
	}
	for _, pc := range pcs {
		go func() { errc <- f.serveUDP(pc) }()
	}
	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	if err != nil {
		return fmt.Errorf("firewall dns: %w", err)
	}
	return nil
}

// testHookBindings runs before the filter opens the gate's bindings
// socket: TestGate_ReadyMeansServing makes that step slow.
var testHookBindings func()

// QueryHealth asks the filter listening on addr for its Health.
func QueryHealth(ctx context.Context, addr string) (Health, error) {
	m := new(dns.Msg)
	m.SetQuestion(HealthName, dns.TypeTXT)
	m.Question[0].Qclass = dns.ClassCHAOS
	c := &dns.Client{Timeout: time.Second}
	r, _, err := c.ExchangeContext(ctx, m, addr)
	if err != nil {
		return Health{}, fmt.Errorf("DNS filter not answering on %s: %w", addr, err)
	}
	var h Health
	for _, rr := range r.Answer {
		if t, ok := rr.(*dns.TXT); ok {
			raw, err := base64.StdEncoding.DecodeString(strings.Join(t.Txt, ""))
			if err == nil {
				err = json.Unmarshal(raw, &h)
			}
			if err != nil {
				return h, fmt.Errorf("DNS filter on %s: bad health answer: %w", addr, err)
			}
			return h, nil
		}
	}
	return h, fmt.Errorf("DNS filter on %s: no health answer (rcode %s)", addr, dns.RcodeToString[r.Rcode])
}
