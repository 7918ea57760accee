package testworld

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"
)

// Site is one request or ClientHello a site recorder read: what a server
// there could have picked its virtual host by. The escape suite's gate
// attempts are judged by it: an attempt arrived when the world says it
// read the name the attempt asked for, never by guessing from the client.
type Site struct {
	Proto string // "tls" or "http"
	// Hello is the ClientHello's number on its connection (1, or 2 after
	// the recorder's HelloRetryRequest); Request the request's.
	Hello, Request int
	// Names are the server_name entries ("NAME" for host_name, "TYPE:NAME"
	// for another type), or the request line and every Host header (any
	// line whose name is "host" once trimmed, as a lenient server reads it).
	Names  []string
	Local  netip.AddrPort
	Remote netip.AddrPort
}

func (s Site) String() string {
	n := s.Hello
	if s.Proto == "http" {
		n = s.Request
	}
	return fmt.Sprintf("site %s #%d %q on %s from %s", s.Proto, n, s.Names, s.Local, s.Remote)
}

// Sites returns what the site recorders read so far.
func (r *Recorder) Sites() []Site {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Site(nil), r.sites...)
}

func (r *Recorder) site(s Site) {
	if r.OnSite != nil {
		r.OnSite(s)
	}
	r.mu.Lock()
	r.sites = append(r.sites, s)
	r.mu.Unlock()
}

// siteBanner is how long a site recorder waits for the client's first
// bytes before it answers as ServeTCP does (a client that only reads).
const siteBanner = 300 * time.Millisecond

// ServeSites is ServeTCP for a server whose virtual hosts a gate stands in
// front of: it records every ClientHello and every request it reads (see
// Site) and says in each answer what it read, so that the client learns
// only from the world that a name arrived.
//   - TLS: the first ClientHello gets a HelloRetryRequest (group P-256)
//     whose cookie extension carries "sni=NAMES"; the second gets "hello
//     from ADDR sni=NAMES" in clear text, and the connection ends.
//   - HTTP/1.x: each request on the connection, kept alive or pipelined,
//     gets a 200 with "hello from ADDR request=… host=…", until one asks
//     to close (Connection: close, or HTTP/1.0 without keep-alive), as
//     servers that choose a virtual host per request do.
//   - A client that sends nothing within siteBanner gets ServeTCP's answer.
func (r *Recorder) ServeSites(l net.Listener) { r.accept(l, r.serveSite) }

func (r *Recorder) serveSite(c net.Conn) {
	local, remote := addrPort(c.LocalAddr()), addrPort(c.RemoteAddr())
	hello := "hello from " + c.LocalAddr().String()
	br := bufio.NewReader(c)
	c.SetReadDeadline(time.Now().Add(siteBanner))
	first, err := br.Peek(1)
	if err != nil {
		fmt.Fprintf(c, "HTTP/1.0 200 OK\r\nContent-Length: %d\r\n\r\n%s\n", len(hello)+1, hello)
		return
	}
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if first[0] == 22 { // a TLS handshake record
		for n := 1; n <= 2; n++ {
			sid, names, err := readClientHello(br)
			if err != nil {
				return
			}
			r.site(Site{Proto: "tls", Hello: n, Names: names, Local: local, Remote: remote})
			said := "sni=" + strings.Join(names, ",")
			if n == 1 {
				c.Write(helloRetryRequest(sid, said))
				continue
			}
			fmt.Fprintf(c, "%s %s\n", hello, said)
		}
		return
	}
	for n := 1; ; n++ {
		line, hosts, keep, length, err := readRequestHead(br)
		if err != nil {
			return
		}
		names := append([]string{line}, hosts...)
		r.site(Site{Proto: "http", Request: n, Names: names, Local: local, Remote: remote})
		if length > 0 {
			io.CopyN(io.Discard, br, length)
		}
		body := fmt.Sprintf("%s request=%q host=%q\n", hello, line, hosts)
		closing := ""
		if !keep {
			closing = "Connection: close\r\n"
		}
		fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n%s\r\n%s", len(body), closing, body)
		if !keep || length < 0 {
			return
		}
	}
}

func addrPort(a net.Addr) netip.AddrPort {
	ap, _ := netip.ParseAddrPort(a.String())
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
}

// readRequestHead reads one request head leniently (LF or CRLF line ends,
// at most 64 KiB) and returns its request line, the values of every line
// whose name is "host" once trimmed, whether the connection stays open
// after it, and the body's length (-1: chunked or unknown, the
// connection ends after the answer).
func readRequestHead(br *bufio.Reader) (line string, hosts []string, keep bool, length int64, err error) {
	total := 0
	read := func() (string, error) {
		l, err := br.ReadString('\n')
		total += len(l)
		if err == nil && total > 64<<10 {
			err = errors.New("head too long")
		}
		return strings.TrimRight(l, "\r\n"), err
	}
	if line, err = read(); err != nil {
		return
	}
	keep = strings.HasSuffix(line, " HTTP/1.1")
	for {
		var h string
		if h, err = read(); err != nil {
			return
		}
		if h == "" {
			return
		}
		name, value, _ := strings.Cut(h, ":")
		value = strings.TrimSpace(value)
		switch strings.ToLower(strings.TrimSpace(name)) {
		case "host":
			hosts = append(hosts, value)
		case "connection":
			for _, tok := range strings.Split(strings.ToLower(value), ",") {
				switch strings.TrimSpace(tok) {
				case "close":
					keep = false
				case "keep-alive":
					keep = keep || !strings.HasSuffix(line, " HTTP/1.1")
				}
			}
		case "content-length":
			if length, err = strconv.ParseInt(value, 10, 64); err != nil || length < 0 {
				length, err = -1, nil
			}
		case "transfer-encoding":
			length = -1
		}
	}
}

// readClientHello reads the TLS records of one ClientHello (after any
// ChangeCipherSpec record) and returns its legacy_session_id and its
// server_name entries.
func readClientHello(br *bufio.Reader) (sid []byte, names []string, err error) {
	var msg []byte
	for len(msg) < 4 || len(msg) < 4+(int(msg[1])<<16|int(msg[2])<<8|int(msg[3])) {
		var h [5]byte
		if _, err = io.ReadFull(br, h[:]); err != nil {
			return nil, nil, err
		}
		rec := make([]byte, binary.BigEndian.Uint16(h[3:]))
		if _, err = io.ReadFull(br, rec); err != nil {
			return nil, nil, err
		}
		switch h[0] {
		case 20: // ChangeCipherSpec, compatibility mode
		case 22:
			msg = append(msg, rec...)
		default:
			return nil, nil, fmt.Errorf("record type %d", h[0])
		}
	}
	if msg[0] != 1 {
		return nil, nil, errors.New("not a ClientHello")
	}
	b := tlsBytes(msg[4:])
	b.next(2 + 32) // version, random
	sid = b.next(int(b.u(1)))
	b.next(int(b.u(2))) // cipher suites
	b.next(int(b.u(1))) // compression methods
	exts := tlsBytes(b.next(int(b.u(2))))
	for len(exts) >= 4 {
		typ, data := exts.u(2), tlsBytes(exts.next(int(exts.u(2))))
		if typ != 0 {
			continue
		}
		list := tlsBytes(data.next(int(data.u(2))))
		for len(list) >= 3 {
			t, name := list.u(1), string(list.next(int(list.u(2))))
			if t != 0 {
				name = strconv.Itoa(t) + ":" + name
			}
			names = append(names, name)
		}
	}
	return sid, names, nil
}

// tlsBytes reads TLS's big-endian fields; past the end it reads zeros.
type tlsBytes []byte

func (b *tlsBytes) next(n int) []byte {
	n = min(max(n, 0), len(*b))
	out := (*b)[:n]
	*b = (*b)[n:]
	return out
}

func (b *tlsBytes) u(n int) int {
	v := 0
	for _, c := range b.next(n) {
		v = v<<8 | int(c)
	}
	return v
}

// HelloRetryRandom is the ServerHello random that makes it a
// HelloRetryRequest (RFC 8446, 4.1.3).
var HelloRetryRandom = []byte{
	0xCF, 0x21, 0xAD, 0x74, 0xE5, 0x9A, 0x61, 0x11, 0xBE, 0x1D, 0x8C, 0x02, 0x1E, 0x65, 0xB8, 0x91,
	0xC2, 0xA2, 0x11, 0x16, 0x7A, 0xBB, 0x8C, 0x5E, 0x07, 0x9E, 0x09, 0xE2, 0xC8, 0xA8, 0x33, 0x9C,
}

// helloRetryRequest is a TLS 1.3 HelloRetryRequest echoing sid, asking
// for a P-256 key share, with cookie as its cookie extension.
func helloRetryRequest(sid []byte, cookie string) []byte {
	u16 := func(b []byte, v int) []byte { return binary.BigEndian.AppendUint16(b, uint16(v)) }
	var ext []byte
	ext = u16(u16(u16(ext, 0x002b), 2), 0x0304) // supported_versions: TLS 1.3
	ext = u16(u16(u16(ext, 0x0033), 2), 0x0017) // key_share: secp256r1
	c := []byte(cookie)
	ext = append(u16(u16(u16(ext, 0x002c), len(c)+2), len(c)), c...)
	body := u16(nil, 0x0303)
	body = append(body, HelloRetryRandom...)
	body = append(append(body, byte(len(sid))), sid...)
	body = append(u16(body, 0x1301), 0) // TLS_AES_128_GCM_SHA256, no compression
	body = append(u16(body, len(ext)), ext...)
	msg := append([]byte{2, byte(len(body) >> 16), byte(len(body) >> 8), byte(len(body))}, body...)
	return append(u16(u16([]byte{22}, 0x0303), len(msg)), msg...)
}
