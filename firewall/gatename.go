package firewall

import (
	"bytes"
	"encoding/binary"
	"errors"
	"slices"
	"strings"
)

// The gate's readers of the first bytes. They accept a strict subset of
// TLS and HTTP/1.x, the subset in which every server the gate was compared
// with (Go's crypto/tls and net/http, OpenSSL, nginx: gatediff_test.go)
// reads the same name as the gate; anything outside it is refused, never
// normalized. The rule: one name, said once, in one place.
//
//   - TLS: a ClientHello (possibly split over several handshake records,
//     ending at a record boundary, nothing after it) with well-formed
//     lengths, no extension twice, and at most one server_name extension
//     whose list holds exactly one entry, of type host_name, an LDH name
//     without a trailing dot.
//   - HTTP: a request line METHOD SP /path SP HTTP/1.x in origin form
//     (absolute form, authority form and "*" are refused: no client talks
//     to an origin server through a transparent gate that way, and
//     servers disagree on which of the two names wins), CRLF line ends,
//     header names that are tokens followed at once by ':', no folded
//     line, no control character, and exactly one Host, whose value is an
//     LDH name with an optional port (no userinfo, no percent escapes).

// Reasons for a refusal by the readers, as logged.
const (
	// GateAmbiguousTLS: a ClientHello that servers could read
	// differently (two SNI entries or extensions, a non-host_name entry,
	// bad lengths, bytes after it, a name that is not LDH).
	GateAmbiguousTLS = "ambiguous-tls"
	// GateAmbiguousHTTP: a request whose name servers could read
	// differently (absolute form, two Hosts, "Host :", folded lines, bare
	// LF, control characters, a Host that is not name[:port]).
	GateAmbiguousHTTP = "ambiguous-http"
	// GateHRRSNIChanged: the second ClientHello after a
	// HelloRetryRequest does not carry the first one's name.
	GateHRRSNIChanged = "hrr-sni-changed"
	// GateTooLarge: the first bytes did not say a name within
	// maxFirstBytes.
	GateTooLarge = "too-large"
	// GateBusy: the bytes held by all connections waiting for a verdict
	// reached maxHeldBytes.
	GateBusy = "busy"
)

// maxFirstBytes bounds what one connection may send before its name is
// known: a ClientHello (under 2 KiB with post-quantum key shares) or a
// request's headers (nginx's default large_client_header_buffers is 8 KiB
// per line). Past it the connection is refused (too-large).
const maxFirstBytes = 16 << 10

// firstBytes is what the client's first bytes said.
type firstBytes struct {
	kind  string // streamTLS, streamHTTP or "" (neither)
	name  string // the SNI or Host's name
	ech   bool
	n     int    // the length of the ClientHello's records or the request's head
	refus string // a reader's refusal, or "" when the name was read
}

// readFirst reads a connection's first bytes b (not empty): a TLS
// ClientHello or an HTTP/1.x request head. It returns errNeedMore when b
// is a valid beginning of one; otherwise the kind, the name, and either
// the head's length or a refusal.
func readFirst(b []byte) (firstBytes, error) {
	var (
		f   firstBytes
		err error
	)
	switch c := b[0]; {
	case c == recordHandshake:
		var ch clientHello
		f.kind = streamTLS
		f.n, ch, err = parseClientHello(b)
		f.name, f.ech = ch.name, ch.ech
	case c >= 'A' && c <= 'Z':
		f.kind = streamHTTP
		f.n, f.name, err = parseRequest(b)
	default:
		err = refusal(GateNoName)
	}
	if r, ok := err.(refusal); ok {
		f.refus = string(r)
		if f.refus == GateNoName {
			f.kind = ""
		}
	}
	return f, err
}

// errNeedMore: the bytes so far are a valid beginning; read more.
var errNeedMore = errors.New("need more bytes")

// refusal is a reader's verdict on bytes it will not pass.
type refusal string

func (r refusal) Error() string { return string(r) }

// helloRandomHRR is the ServerHello random of a HelloRetryRequest (RFC
// 8446 4.1.3).
var helloRandomHRR = []byte{
	0xCF, 0x21, 0xAD, 0x74, 0xE5, 0x9A, 0x61, 0x11, 0xBE, 0x1D, 0x8C, 0x02, 0x1E, 0x65, 0xB8, 0x91,
	0xC2, 0xA2, 0x11, 0x16, 0x7A, 0xBB, 0x8C, 0x5E, 0x07, 0x9E, 0x09, 0xE2, 0xC8, 0xA8, 0x33, 0x9C,
}

const (
	recordChangeCipherSpec = 20
	recordAlert            = 21
	recordHandshake        = 22
	maxRecord              = 1 << 14
	extServerName          = 0
	extECH                 = 0xfe0d // encrypted_client_hello
)

// clientHello is what the gate reads in a ClientHello.
type clientHello struct {
	name string // the SNI, lower case; "" when absent
	ech  bool   // the encrypted_client_hello extension is present
}

// parseClientHello reads the TLS records at the start of b. It returns how
// many bytes the records carrying the ClientHello take, and what it says;
// errNeedMore when b ends before the ClientHello does; a refusal when the
// bytes are not a ClientHello the gate can read unambiguously (with the
// name as sent, when the server_name extension is what was wrong).
func parseClientHello(b []byte) (int, clientHello, error) {
	var msg []byte // the handshake bytes so far
	off := 0
	for {
		if len(b)-off < 5 {
			return 0, clientHello{}, errNeedMore
		}
		typ, ver, n := b[off], binary.BigEndian.Uint16(b[off+1:]), int(binary.BigEndian.Uint16(b[off+3:]))
		if typ != recordHandshake || ver < 0x0301 || ver > 0x0303 || n == 0 || n > maxRecord {
			return 0, clientHello{}, refusal(GateAmbiguousTLS)
		}
		if len(b)-off-5 < n {
			return 0, clientHello{}, errNeedMore
		}
		// One record holds the whole hello in every client seen: read it
		// where it is. Records after the first are joined in a copy (the
		// clip keeps append from writing into b).
		if rec := b[off+5 : off+5+n]; msg == nil {
			msg = rec
		} else {
			msg = append(msg[:len(msg):len(msg)], rec...)
		}
		off += 5 + n
		if len(msg) < 4 {
			continue
		}
		if msg[0] != 1 { // client_hello
			return 0, clientHello{}, refusal(GateAmbiguousTLS)
		}
		l := int(msg[1])<<16 | int(msg[2])<<8 | int(msg[3])
		if l > maxFirstBytes {
			return 0, clientHello{}, refusal(GateTooLarge)
		}
		if len(msg) < 4+l {
			continue
		}
		if len(msg) > 4+l {
			// Another handshake message after the ClientHello, in the
			// same record: nothing a client sends.
			return 0, clientHello{}, refusal(GateAmbiguousTLS)
		}
		ch, err := parseHelloBody(msg[4:])
		return off, ch, err
	}
}

// reader reads a TLS structure and remembers whether anything was wrong.
type reader struct {
	b   []byte
	bad bool
}

func (r *reader) bytes(n int) []byte {
	if r.bad || n > len(r.b) {
		r.bad = true
		return nil
	}
	out := r.b[:n]
	r.b = r.b[n:]
	return out
}

func (r *reader) uint(n int) int {
	v := 0
	for _, c := range r.bytes(n) {
		v = v<<8 | int(c)
	}
	return v
}

// vector reads a length (in n bytes) and that many bytes.
func (r *reader) vector(n int) reader { return reader{b: r.bytes(r.uint(n)), bad: r.bad} }

func parseHelloBody(body []byte) (clientHello, error) {
	bad := refusal(GateAmbiguousTLS)
	r := reader{b: body}
	if v := r.uint(2); v < 0x0301 || v > 0x0303 {
		return clientHello{}, bad
	}
	r.bytes(32) // random
	if sid := r.vector(1); len(sid.b) > 32 {
		return clientHello{}, bad
	}
	if cs := r.vector(2); len(cs.b) < 2 || len(cs.b)%2 != 0 {
		return clientHello{}, bad
	}
	if cm := r.vector(1); len(cm.b) < 1 {
		return clientHello{}, bad
	}
	if r.bad {
		return clientHello{}, bad
	}
	var ch clientHello
	if len(r.b) == 0 {
		return ch, nil // no extensions: no name
	}
	exts := r.vector(2)
	if r.bad || len(r.b) != 0 {
		return clientHello{}, bad
	}
	var seen extSet
	for len(exts.b) > 0 {
		typ := exts.uint(2)
		data := exts.vector(2)
		if exts.bad || seen.repeated(typ) {
			return ch, bad
		}
		switch typ {
		case extServerName:
			list := data.vector(2)
			if data.bad || len(data.b) != 0 {
				return clientHello{}, bad
			}
			typ := list.uint(1)
			name := list.vector(2)
			// Logged as asked, even when refused.
			ch.name = strings.ToLower(string(name.b))
			if typ != 0 || list.bad || len(list.b) != 0 || !validName(ch.name) {
				// Not host_name (the only type), a second entry, bytes
				// after the first, or not an LDH name.
				return ch, bad
			}
		case extECH:
			ch.ech = true
		}
	}
	return ch, nil
}

// extSet is the extension types a ClientHello carried so far: the first
// few dozen (more than any client sends) in an array, scanned, so that
// reading a hello allocates nothing; the rest in a map, so that a hello
// of thousands of extensions costs no more than linear time.
type extSet struct {
	few  [32]uint16
	n    int
	more map[int]bool
}

// repeated records typ and reports whether it was there already.
func (s *extSet) repeated(typ int) bool {
	for _, t := range s.few[:min(s.n, len(s.few))] {
		if int(t) == typ {
			return true
		}
	}
	if s.n < len(s.few) {
		s.few[s.n] = uint16(typ)
		s.n++
		return false
	}
	if s.more[typ] {
		return true
	}
	if s.more == nil {
		s.more = map[int]bool{}
	}
	s.more[typ] = true
	return false
}

// serverHelloIsHRR reads the server's first TLS records in b: it reports
// whether they begin a HelloRetryRequest (true) or anything else (false),
// or errNeedMore.
func serverHelloIsHRR(b []byte) (bool, error) {
	var msg []byte
	for off := 0; ; {
		if len(b)-off < 5 {
			return false, errNeedMore
		}
		typ, n := b[off], int(binary.BigEndian.Uint16(b[off+3:]))
		if typ != recordHandshake || n == 0 {
			return false, nil // an alert, or not TLS: no retry
		}
		end := min(off+5+n, len(b))
		if msg == nil {
			msg = b[off+5 : end]
		} else {
			msg = append(msg[:len(msg):len(msg)], b[off+5:end]...)
		}
		// type(1) length(3) version(2) random(32)
		if len(msg) >= 38 {
			return msg[0] == 2 && bytes.Equal(msg[6:38], helloRandomHRR), nil
		}
		if end < off+5+n {
			return false, errNeedMore
		}
		off = end
	}
}

// parseRequest reads an HTTP/1.x request's head at the start of b. It
// returns the head's length and the Host's name ("" for an IP literal);
// errNeedMore when the head has not ended; a refusal for a request that
// servers could read differently (with the Host as sent, when that is
// what was wrong).
func parseRequest(b []byte) (int, string, error) {
	bad := refusal(GateAmbiguousHTTP)
	var (
		host  string
		hosts int
	)
	for off, first := 0, true; ; first = false {
		i := bytes.IndexByte(b[off:], '\n')
		if i < 0 {
			// Refuse what is already wrong in the unfinished line.
			if first && len(b) > 0 && !(b[0] >= 'A' && b[0] <= 'Z') {
				return 0, "", bad
			}
			return 0, "", errNeedMore
		}
		line := bytes.TrimSuffix(b[off:off+i], []byte("\r"))
		if first && !bytes.HasSuffix(line, []byte(" HTTP/1.1")) && !bytes.HasSuffix(line, []byte(" HTTP/1.0")) {
			return 0, "", refusal(GateNoName) // not HTTP/1.x at all
		}
		if len(line) != i-1 {
			return 0, "", bad // a bare LF, or a CR inside the line
		}
		off += i + 1
		switch {
		case first:
			if !requestLine(line) {
				return 0, "", bad
			}
		case len(line) == 0:
			if hosts != 1 {
				return 0, "", bad
			}
			return off, host, nil
		default:
			name, value, ok := headerLine(line)
			if !ok {
				return 0, "", bad
			}
			if strings.EqualFold(name, "host") {
				hosts++
				if host, ok = hostValue(value); !ok || hosts > 1 {
					return 0, host, bad // the name asked, for the log
				}
			}
		}
	}
}

// hopByHop are the header lines closeAfterFirst drops: the client's own
// say on keeping the connection open or switching its protocol.
var hopByHop = []string{"connection", "keep-alive", "proxy-connection", "upgrade"}

// closeAfterFirst rewrites a request head the gate passed (as
// parseRequest read it) so that the server closes the connection once it
// has answered: the client's Connection, Keep-Alive, Proxy-Connection and
// Upgrade lines are dropped and "Connection: close" ends the head. The
// gate reads only a connection's first request and then splices, but a
// server picks a virtual host per request: on a kept-alive connection a
// second request (pipelined, or sent after the first answer) named any
// site on the address. A server that receives "close" must not process a
// further request on the connection (RFC 9112, 9.6), so bytes after the
// head never start one, and no protocol switch (h2c, whose streams each
// name a host, or a websocket) hands the connection to what the gate
// cannot read. Each request then costs a connection, as with HTTP/1.0.
func closeAfterFirst(head []byte) []byte {
	out := make([]byte, 0, len(head)+len("Connection: close\r\n"))
	for off, first := 0, true; off < len(head); first = false {
		i := bytes.IndexByte(head[off:], '\n')
		line := head[off : off+i+1]
		off += i + 1
		if len(line) == 2 { // the blank line that ends the head
			break
		}
		if !first {
			name, _, _ := bytes.Cut(line, []byte(":"))
			if slices.ContainsFunc(hopByHop, func(h string) bool { return strings.EqualFold(h, string(name)) }) {
				continue
			}
		}
		out = append(out, line...)
	}
	return append(out, "Connection: close\r\n\r\n"...)
}

// requestLine accepts METHOD SP /target SP HTTP/1.0|1.1.
func requestLine(line []byte) bool {
	method, rest, ok := bytes.Cut(line, []byte(" "))
	if !ok || len(method) == 0 || len(method) > 20 {
		return false
	}
	for _, c := range method {
		if c < 'A' || c > 'Z' {
			return false
		}
	}
	target, version, ok := bytes.Cut(rest, []byte(" "))
	if !ok || len(target) == 0 || target[0] != '/' || (string(version) != "HTTP/1.1" && string(version) != "HTTP/1.0") {
		return false
	}
	if len(target) > 1 && target[1] == '/' {
		return false // "//host/…": some servers read an authority there
	}
	for _, c := range target {
		if c <= ' ' || c >= 0x7f {
			return false
		}
	}
	return true
}

// headerLine splits "name: value": the name a token ending at the colon,
// the value without control characters, optional whitespace trimmed.
func headerLine(line []byte) (string, []byte, bool) {
	i := bytes.IndexByte(line, ':')
	if i <= 0 {
		return "", nil, false // no colon, or a folded line (leading SP/HT)
	}
	for _, c := range line[:i] {
		if !isTokenChar(c) {
			return "", nil, false
		}
	}
	v := line[i+1:]
	for _, c := range v {
		if (c < ' ' && c != '\t') || c == 0x7f {
			return "", nil, false
		}
	}
	return string(line[:i]), bytes.Trim(v, " \t"), true
}

func isTokenChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

// hostValue accepts name[:port] (name LDH, one trailing dot allowed, as
// servers drop it; port 1–5 digits) and returns the name in lower case,
// or "" for an IPv4 literal.
func hostValue(v []byte) (string, bool) {
	h, port, hasPort := bytes.Cut(v, []byte(":"))
	if hasPort {
		if len(port) == 0 || len(port) > 5 {
			return strings.ToLower(string(v)), false
		}
		for _, c := range port {
			if c < '0' || c > '9' {
				return strings.ToLower(string(v)), false
			}
		}
	}
	name := strings.TrimSuffix(strings.ToLower(string(h)), ".")
	if !validName(name) {
		return strings.ToLower(string(v)), false
	}
	if hostName(name) == "" {
		return "", true // an IP literal: no name
	}
	return name, true
}
