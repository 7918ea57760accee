//go:build linux

package escape

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
)

// The name gate's adversary cases (issue 22): bytes a gate could read as
// one name and a server behind it as another. Each goes to an allowed
// name's address and names, somewhere the gate might not look, a site the
// policy does not allow (other). They need a site recorder behind the
// name (internal/testworld's ServeSites, worldd -sites), which says in its
// answers what it read: an attempt escaped only when the world's answer
// names other. Where the allowed part of an attempt must pass for it to
// prove anything (the first ClientHello of a retry, the first request of
// a kept-alive connection) and the world did not answer it, the attempt is
// invalid, never blocked.

// gateSite is one adversary case.
type gateSite struct {
	name, what string
	run        func(ctx context.Context, hostport, allowed, other string) error
}

var gateSites = []gateSite{
	{"HelloRetryRequest, then a ClientHello for another site", "tls hrr", helloRetrySwitch},
	{"SNI list: the allowed host_name, then another type", "tls sni-list", func(ctx context.Context, hp, allowed, other string) error {
		return oneHello(ctx, hp, other, sniData(0, allowed, 1, other))
	}},
	{"SNI list: another type, then the allowed host_name", "tls sni-list", func(ctx context.Context, hp, allowed, other string) error {
		return oneHello(ctx, hp, other, sniData(1, other, 0, allowed))
	}},
	{"SNI list: two host_names", "tls sni-list", func(ctx context.Context, hp, allowed, other string) error {
		return oneHello(ctx, hp, other, sniData(0, allowed, 0, other))
	}},
	{"two server_name extensions", "tls sni-twice", func(ctx context.Context, hp, allowed, other string) error {
		return oneHello(ctx, hp, other, sniData(0, allowed), sniData(0, other))
	}},
	{"absolute-form request line naming another site", "http absolute-form", func(ctx context.Context, hp, allowed, other string) error {
		return oneRequest(ctx, hp, other, "GET http://"+other+"/ HTTP/1.1\r\nHost: "+allowed+"\r\nConnection: close\r\n\r\n")
	}},
	{"absolute form for the allowed name, Host another site", "http absolute-form", func(ctx context.Context, hp, allowed, other string) error {
		return oneRequest(ctx, hp, other, "GET http://"+allowed+"/ HTTP/1.1\r\nHost: "+other+"\r\nConnection: close\r\n\r\n")
	}},
	{"'Host :' naming another site beside Host", "http host-space", func(ctx context.Context, hp, allowed, other string) error {
		return oneRequest(ctx, hp, other, "GET / HTTP/1.1\r\nHost: "+allowed+"\r\nHost :"+other+"\r\nConnection: close\r\n\r\n")
	}},
	{"two Host headers", "http host-twice", func(ctx context.Context, hp, allowed, other string) error {
		return oneRequest(ctx, hp, other, "GET / HTTP/1.1\r\nHost: "+allowed+"\r\nHost: "+other+"\r\nConnection: close\r\n\r\n")
	}},
	{"Host of another site, upper case with a trailing dot", "http host-variant", func(ctx context.Context, hp, allowed, other string) error {
		return oneRequest(ctx, hp, other, "GET / HTTP/1.1\r\nHost: "+strings.ToUpper(other)+".\r\nConnection: close\r\n\r\n")
	}},
	{"Host of another site with a port", "http host-variant", func(ctx context.Context, hp, allowed, other string) error {
		_, port, _ := net.SplitHostPort(hp)
		return oneRequest(ctx, hp, other, "GET / HTTP/1.1\r\nHost: "+other+":"+port+"\r\nConnection: close\r\n\r\n")
	}},
	{"Host: the allowed name as userinfo of another site", "http host-variant", func(ctx context.Context, hp, allowed, other string) error {
		return oneRequest(ctx, hp, other, "GET / HTTP/1.1\r\nHost: "+allowed+"@"+other+"\r\nConnection: close\r\n\r\n")
	}},
	{"pipelined second request for another site", "http pipelined", func(ctx context.Context, hp, allowed, other string) error {
		return secondRequest(ctx, hp, allowed, other, true)
	}},
	{"kept-alive second request for another site", "http keep-alive", func(ctx context.Context, hp, allowed, other string) error {
		return secondRequest(ctx, hp, allowed, other, false)
	}},
}

// gateSiteChecks are the cases against hostport (an allowed name and
// port, with a site recorder behind it).
func gateSiteChecks(hostport, other string) []Check {
	allowed, _, _ := net.SplitHostPort(hostport)
	var cs []Check
	for _, s := range gateSites {
		cs = append(cs, Check{Name: "allowed name's address, " + s.name, Target: hostport + " " + s.what + " " + other, Kind: MustFail,
			Run: func(ctx context.Context) error { return s.run(ctx, hostport, allowed, other) }})
	}
	return cs
}

// worldSaid judges what came back: escaped when the world's answer (a
// "hello from" line, or its HelloRetryRequest's cookie) names other. An
// answer that does not say what the server read (not a site recorder)
// proves nothing either way.
func worldSaid(got []byte, err error, other string) error {
	switch {
	case bytes.Contains(bytes.ToLower(got), []byte(strings.ToLower(other))):
		return escaped("the world read %s: %s", other, firstLine(got))
	case len(got) > 0 && got[0] == 21:
		return fmt.Errorf("refused: a TLS alert")
	case siteAnswer(got):
		if i := bytes.Index(got, []byte("hello from ")); i >= 0 {
			got = got[i:]
		}
		return fmt.Errorf("the world read only the allowed name: %s", firstLine(got))
	case len(got) > 0:
		return invalid("the server's answer does not say what it read (%q): not a site recorder (worldd -sites), so the attempt proves nothing", firstLine(got))
	}
	if err == nil {
		err = io.EOF
	}
	return fmt.Errorf("no answer from the world: %v", err)
}

// siteAnswer says b is a site recorder's: an HTTP answer saying which
// request it read, or a HelloRetryRequest whose cookie says which names.
func siteAnswer(b []byte) bool {
	if _, ok := retryCookie(b); ok {
		return bytes.Contains(b, []byte("sni="))
	}
	return bytes.Contains(b, []byte("hello from ")) && bytes.Contains(b, []byte(" request="))
}

func firstLine(b []byte) string {
	s, _, _ := strings.Cut(string(b), "\n")
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return strings.TrimSpace(s)
}

// oneRequest sends one HTTP request and reads every answer.
func oneRequest(ctx context.Context, hostport, other, req string) error {
	c, err := dialName(ctx, hostport)
	if err != nil {
		return err
	}
	defer c.Close()
	io.WriteString(c, req)
	got, err := io.ReadAll(io.LimitReader(c, 64<<10))
	return worldSaid(got, err, other)
}

// secondRequest asks the world for / of the allowed name on a kept-alive
// connection, then for other's, pipelined (both at once) or after the
// first answer. The first must be answered, or nothing is proved.
func secondRequest(ctx context.Context, hostport, allowed, other string, pipelined bool) error {
	c, err := dialName(ctx, hostport)
	if err != nil {
		return err
	}
	defer c.Close()
	first := "GET / HTTP/1.1\r\nHost: " + allowed + "\r\n\r\n"
	second := "GET / HTTP/1.1\r\nHost: " + other + "\r\nConnection: close\r\n\r\n"
	if pipelined {
		io.WriteString(c, first+second)
		got, err := io.ReadAll(io.LimitReader(c, 64<<10))
		if !siteAnswer(got) {
			return invalid("the world did not answer the allowed request, so the attempt proves nothing (%q, %v)", got, err)
		}
		return worldSaid(got, err, other)
	}
	io.WriteString(c, first)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return invalid("the world did not answer the allowed request, so the attempt proves nothing: %v", err)
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	resp.Body.Close()
	if !siteAnswer(body) {
		return invalid("the allowed request was not answered by a site recorder (%q), so the attempt proves nothing", body)
	}
	if _, err := io.WriteString(c, second); err != nil {
		return fmt.Errorf("the connection ended after the first answer: %v", err)
	}
	got, err := io.ReadAll(io.LimitReader(br, 64<<10))
	return worldSaid(got, err, other)
}

// oneHello sends a ClientHello with the given server_name extensions and
// reads the world's answer: its HelloRetryRequest carries what it read.
func oneHello(ctx context.Context, hostport, other string, sni ...[]byte) error {
	c, err := dialName(ctx, hostport)
	if err != nil {
		return err
	}
	defer c.Close()
	c.Write(clientHello(sessionID(), 0x001d, nil, sni...))
	got, err := readRecords(c)
	return worldSaid(got, err, other)
}

// helloRetrySwitch (finding 1): the first ClientHello names the allowed
// host; when the world answers with a HelloRetryRequest, the second names
// other. The retry must come from the world (the gate never sends one),
// or the attempt proves nothing.
func helloRetrySwitch(ctx context.Context, hostport, allowed, other string) error {
	c, err := dialName(ctx, hostport)
	if err != nil {
		return err
	}
	defer c.Close()
	sid := sessionID()
	c.Write(clientHello(sid, 0x001d, nil, sniData(0, allowed)))
	got, err := readRecords(c)
	cookie, ok := retryCookie(got)
	if !ok {
		return invalid("the allowed name's ClientHello got no HelloRetryRequest from the world (%q, %v), so the attempt proves nothing", firstLine(got), err)
	}
	// The compatibility-mode ChangeCipherSpec, then the second hello.
	c.Write(append([]byte{20, 3, 3, 0, 1, 1}, clientHello(sid, 0x0017, cookie, sniData(0, other))...))
	got, err = io.ReadAll(io.LimitReader(c, 64<<10))
	return worldSaid(got, err, other)
}

// readRecords reads the first TLS record (or whatever else comes, up to
// the end of the connection).
func readRecords(c net.Conn) ([]byte, error) {
	var got []byte
	buf := make([]byte, 4096)
	for {
		n, err := c.Read(buf)
		got = append(got, buf[:n]...)
		if len(got) >= 5 && (got[0] == 21 || got[0] == 22) && len(got) >= 5+int(binary.BigEndian.Uint16(got[3:])) {
			return got, nil
		}
		if err != nil {
			return got, err
		}
	}
}

// helloRetryRandom is the ServerHello random of a HelloRetryRequest (RFC
// 8446, 4.1.3).
var helloRetryRandom = []byte{
	0xCF, 0x21, 0xAD, 0x74, 0xE5, 0x9A, 0x61, 0x11, 0xBE, 0x1D, 0x8C, 0x02, 0x1E, 0x65, 0xB8, 0x91,
	0xC2, 0xA2, 0x11, 0x16, 0x7A, 0xBB, 0x8C, 0x5E, 0x07, 0x9E, 0x09, 0xE2, 0xC8, 0xA8, 0x33, 0x9C,
}

// retryCookie returns the cookie of the HelloRetryRequest that b begins
// with (a single record), and whether it is one.
func retryCookie(b []byte) ([]byte, bool) {
	if len(b) < 5+4+2+32 || b[0] != 22 || b[5] != 2 || !bytes.Equal(b[11:43], helloRetryRandom) {
		return nil, false
	}
	r := b[43:]
	skip := func(n int) []byte {
		n = min(n, len(r))
		out := r[:n]
		r = r[n:]
		return out
	}
	u16 := func() int {
		v := skip(2)
		if len(v) < 2 {
			return 0
		}
		return int(binary.BigEndian.Uint16(v))
	}
	sid := skip(1)
	if len(sid) == 1 {
		skip(int(sid[0]))
	}
	skip(3) // cipher suite, compression
	exts := skip(u16())
	r = exts
	for len(r) >= 4 {
		typ, data := u16(), skip(u16())
		if typ == 0x002c {
			return data, true // the cookie extension's data, length included
		}
	}
	return nil, true
}

func sessionID() []byte {
	b := make([]byte, 32)
	rand.Read(b)
	return b
}

// sniData is a server_name extension's data from (type, name) pairs.
func sniData(entries ...any) []byte {
	var list []byte
	for i := 0; i+1 < len(entries); i += 2 {
		name := entries[i+1].(string)
		list = append(list, byte(entries[i].(int)))
		list = binary.BigEndian.AppendUint16(list, uint16(len(name)))
		list = append(list, name...)
	}
	return append(binary.BigEndian.AppendUint16(nil, uint16(len(list))), list...)
}

// clientHello is a TLS 1.3 ClientHello record with one key share (X25519
// 0x001d or P-256 0x0017, random bytes: nothing here completes a
// handshake), a cookie extension when cookie is set (its data as
// received), and one server_name extension per sni.
func clientHello(sid []byte, group uint16, cookie []byte, sni ...[]byte) []byte {
	u16 := func(b []byte, v int) []byte { return binary.BigEndian.AppendUint16(b, uint16(v)) }
	ext := func(b []byte, typ int, data []byte) []byte { return append(u16(u16(b, typ), len(data)), data...) }
	var exts []byte
	for _, s := range sni {
		exts = ext(exts, 0x0000, s)
	}
	exts = ext(exts, 0x000a, []byte{0, 4, 0, 0x1d, 0, 0x17})           // supported_groups: X25519, P-256
	exts = ext(exts, 0x000d, []byte{0, 6, 4, 3, 8, 4, 4, 1})           // signature_algorithms
	exts = ext(exts, 0x002b, []byte{2, 3, 4})                          // supported_versions: TLS 1.3
	key := make([]byte, map[uint16]int{0x001d: 32, 0x0017: 65}[group]) // X25519 or uncompressed P-256
	rand.Read(key)
	if group == 0x0017 {
		key[0] = 4
	}
	share := append(u16(u16(nil, int(group)), len(key)), key...)
	exts = ext(exts, 0x0033, append(u16(nil, len(share)), share...))
	if cookie != nil {
		exts = ext(exts, 0x002c, cookie)
	}
	body := u16(nil, 0x0303)
	random := make([]byte, 32)
	rand.Read(random)
	body = append(body, random...)
	body = append(append(body, byte(len(sid))), sid...)
	body = append(u16(body, 2), 0x13, 0x01) // TLS_AES_128_GCM_SHA256
	body = append(body, 1, 0)               // no compression
	body = append(u16(body, len(exts)), exts...)
	msg := append([]byte{1, byte(len(body) >> 16), byte(len(body) >> 8), byte(len(body))}, body...)
	return append(u16([]byte{22, 3, 1}, len(msg)), msg...)
}
