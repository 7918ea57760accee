package firewall

import (
	"bytes"
	"encoding/binary"
	"errors"
	"strings"
	"testing"
)

// helloExt is one ClientHello extension, its data raw.
type helloExt struct {
	typ  uint16
	data []byte
}

func u16(b []byte, v int) []byte { return binary.BigEndian.AppendUint16(b, uint16(v)) }

// sniExt builds a server_name extension from (type, name) entries.
func sniExt(entries ...any) helloExt {
	var list []byte
	for i := 0; i+1 < len(entries); i += 2 {
		list = append(list, byte(entries[i].(int)))
		name := entries[i+1].(string)
		list = u16(list, len(name))
		list = append(list, name...)
	}
	return helloExt{0, append(u16(nil, len(list)), list...)}
}

// helloBody is a TLS 1.3-looking ClientHello body with exts (plus
// supported_versions and a key share, so real servers get far enough to
// read the name).
func helloBody(exts ...helloExt) []byte {
	b := u16(nil, 0x0303)
	b = append(b, bytes.Repeat([]byte{7}, 32)...) // random
	b = append(b, 32)
	b = append(b, bytes.Repeat([]byte{9}, 32)...) // session id
	b = u16(b, 6)
	b = u16(u16(u16(b, 0x1301), 0xc02f), 0x002f) // TLS_AES_128_GCM_SHA256, ECDHE-RSA-AES128-GCM-SHA256, AES128-SHA
	b = append(b, 1, 0)                          // null compression
	var e []byte
	for _, x := range exts {
		e = u16(e, int(x.typ))
		e = u16(e, len(x.data))
		e = append(e, x.data...)
	}
	return append(u16(b, len(e)), e...)
}

// standardExts are what a client sends beside its name: supported_groups
// (x25519, P-256), signature_algorithms, supported_versions (1.3, 1.2),
// a key share for x25519.
func standardExts() []helloExt {
	share := append(u16(u16(nil, 0x001d), 32), bytes.Repeat([]byte{5}, 32)...)
	return []helloExt{
		{10, u16(u16(u16(nil, 4), 0x001d), 0x0017)},
		{13, u16(u16(u16(u16(u16(nil, 6), 0x0804), 0x0403), 0x0401), 0)[:8]},
		{43, []byte{4, 3, 4, 3, 3}},
		{51, append(u16(nil, len(share)), share...)},
	}
}

// helloRecords wraps a ClientHello body in handshake records of at most
// frag bytes each (0: one record).
func helloRecords(body []byte, frag int) []byte {
	msg := append([]byte{1, byte(len(body) >> 16), byte(len(body) >> 8), byte(len(body))}, body...)
	if frag <= 0 {
		frag = len(msg)
	}
	var out []byte
	for len(msg) > 0 {
		n := min(frag, len(msg))
		out = append(out, recordHandshake, 3, 1)
		out = u16(out, n)
		out = append(out, msg[:n]...)
		msg = msg[n:]
	}
	return out
}

func withName(name string) []byte {
	return helloRecords(helloBody(append(standardExts(), sniExt(0, name))...), 0)
}

// padExts returns n empty extensions of types 1000 to 1000+n-1 (types no
// client uses, which servers ignore).
func padExts(n int) []helloExt {
	var out []helloExt
	for i := range n {
		out = append(out, helloExt{uint16(1000 + i), nil})
	}
	return out
}

func TestParseClientHello(t *testing.T) {
	std := standardExts()
	ext := func(more ...helloExt) []byte {
		return helloRecords(helloBody(append(append([]helloExt(nil), std...), more...)...), 0)
	}
	cases := []struct {
		name string
		in   []byte
		want string // the name, or "!reason"
	}{
		{"one name", withName("good.test"), "good.test"},
		{"upper case", withName("Good.TEST"), "good.test"},
		{"fragmented", helloRecords(helloBody(append(std, sniExt(0, "good.test"))...), 7), "good.test"},
		{"no SNI", ext(), ""},
		{"no extensions", helloRecords(helloBody()[:2+32+33+2+6+2], 0), ""},
		{"two entries", ext(sniExt(0, "good.test", 0, "evil.test")), "!" + GateAmbiguousTLS},
		{"non-host_name entry", ext(sniExt(1, "evil.test")), "!" + GateAmbiguousTLS},
		{"host_name after another type", ext(sniExt(1, "evil.test", 0, "good.test")), "!" + GateAmbiguousTLS},
		{"duplicate SNI extension", ext(sniExt(0, "good.test"), sniExt(0, "evil.test")), "!" + GateAmbiguousTLS},
		{"duplicate other extension", ext(sniExt(0, "good.test"), std[0]), "!" + GateAmbiguousTLS},
		{"trailing dot", withName("good.test."), "!" + GateAmbiguousTLS},
		{"NUL in name", withName("good.test\x00.evil.test"), "!" + GateAmbiguousTLS},
		{"empty name", withName(""), "!" + GateAmbiguousTLS},
		{"trailing bytes in the extension", ext(helloExt{0, append(sniExt(0, "good.test").data, 0)}), "!" + GateAmbiguousTLS},
		{"list shorter than the extension", ext(helloExt{0, append(u16(nil, 12), 0, 0, 9, 'g', 'o', 'o', 'd', '.', 't', 'e', 's', 't', 1, 2)}), "!" + GateAmbiguousTLS},
		{"bytes after the hello", append(withName("good.test"), 0x17, 3, 3, 0, 1, 0), "good.test"},
		{"a record after the hello ends inside it", func() []byte {
			b := withName("good.test")
			b[4]++ // the record claims one more byte
			return append(b, 0)
		}(), "!" + GateAmbiguousTLS},
		{"not a hello", []byte{recordHandshake, 3, 1, 0, 4, 2, 0, 0, 0}, "!" + GateAmbiguousTLS},
		{"SSLv3 record", append([]byte{recordHandshake, 3, 0}, withName("good.test")[3:]...), "!" + GateAmbiguousTLS},
		{"ECH", ext(sniExt(0, "good.test"), helloExt{extECH, []byte{0, 1, 2}}), "good.test+ech"},
		// Past the 32 types extSet keeps in its array: a repeat is found
		// in the map, and of a type the array holds.
		{"40 extensions", ext(append(padExts(36), sniExt(0, "good.test"))...), "good.test"},
		{"a repeat past 32", ext(append(padExts(36), sniExt(0, "good.test"), helloExt{1035, nil})...), "!" + GateAmbiguousTLS},
		{"a repeat of the first past 32", ext(append(padExts(36), sniExt(0, "good.test"), std[0])...), "!" + GateAmbiguousTLS},
	}
	for _, tc := range cases {
		n, ch, err := parseClientHello(tc.in)
		got := ch.name
		if ch.ech {
			got += "+ech"
		}
		if r, ok := err.(refusal); ok {
			got = "!" + string(r)
		} else if err != nil {
			got = "error " + err.Error()
		}
		if got != tc.want {
			t.Errorf("%s: got %q, want %q", tc.name, got, tc.want)
		}
		if err == nil && tc.name == "bytes after the hello" && n != len(tc.in)-6 {
			t.Errorf("%s: the hello's records are %d bytes, want %d", tc.name, n, len(tc.in)-6)
		}
	}
	// Every strict prefix of a valid hello asks for more.
	full := helloRecords(helloBody(append(std, sniExt(0, "good.test"))...), 100)
	for i := range full {
		if _, _, err := parseClientHello(full[:i]); !errors.Is(err, errNeedMore) {
			t.Fatalf("prefix of %d bytes: %v", i, err)
		}
	}
}

func TestServerHelloIsHRR(t *testing.T) {
	sh := func(random []byte) []byte {
		body := append(u16(nil, 0x0303), random...)
		body = append(body, 0, 0x13, 0x01, 0)
		msg := append([]byte{2, 0, 0, byte(len(body))}, body...)
		return append(u16([]byte{recordHandshake, 3, 3}, len(msg)), msg...)
	}
	hrr := sh(helloRandomHRR)
	if got, err := serverHelloIsHRR(hrr); err != nil || !got {
		t.Errorf("HRR: %v %v", got, err)
	}
	if got, err := serverHelloIsHRR(sh(bytes.Repeat([]byte{1}, 32))); err != nil || got {
		t.Errorf("ServerHello: %v %v", got, err)
	}
	if _, err := serverHelloIsHRR(hrr[:20]); !errors.Is(err, errNeedMore) {
		t.Errorf("a cut HRR: %v", err)
	}
	if got, err := serverHelloIsHRR([]byte{recordAlert, 3, 3, 0, 2, 2, 40}); err != nil || got {
		t.Errorf("an alert: %v %v", got, err)
	}
}

func TestParseRequest(t *testing.T) {
	amb := "!" + GateAmbiguousHTTP
	for _, tc := range []struct{ in, want string }{
		{"GET / HTTP/1.1\r\nHost: good.test\r\n\r\n", "good.test"},
		{"GET /a?b HTTP/1.0\r\nhost:Good.Test:8080 \r\nX: y\r\n\r\nbody", "good.test"},
		{"GET / HTTP/1.1\r\nHost: good.test.\r\n\r\n", "good.test"},
		{"GET / HTTP/1.1\r\nHost: 10.0.0.1:80\r\n\r\n", ""},
		{"GET / HTTP/1.1\r\nHost: [fd00::1]\r\n\r\n", amb},
		{"GET http://evil.test/ HTTP/1.1\r\nHost: good.test\r\n\r\n", amb},
		{"GET //evil.test/ HTTP/1.1\r\nHost: good.test\r\n\r\n", amb},
		{"CONNECT evil.test:443 HTTP/1.1\r\nHost: good.test\r\n\r\n", amb},
		{"OPTIONS * HTTP/1.1\r\nHost: good.test\r\n\r\n", amb},
		{"GET / HTTP/1.1\r\nHost :evil.test\r\nHost: good.test\r\n\r\n", amb},
		{"GET / HTTP/1.1\r\nHost\t: good.test\r\n\r\n", amb},
		{"GET / HTTP/1.1\r\nHost: good.test\r\nHost: evil.test\r\n\r\n", amb},
		{"GET / HTTP/1.1\r\nHost: good.test\r\nhost: good.test\r\n\r\n", amb},
		{"GET / HTTP/1.1\r\nHost: good.test\r\n evil.test\r\n\r\n", amb},
		{"GET / HTTP/1.1\r\nX: a\r\n\tHost: evil.test\r\nHost: good.test\r\n\r\n", amb},
		{"GET / HTTP/1.1\nHost: good.test\n\n", amb},
		{"GET / HTTP/1.1\r\nHost: good.test\n\r\n", amb},
		{"GET / HTTP/1.1\r\nHost: user@good.test\r\n\r\n", amb},
		{"GET / HTTP/1.1\r\nHost: evil.test@good.test\r\n\r\n", amb},
		{"GET / HTTP/1.1\r\nHost: good%2etest\r\n\r\n", amb},
		{"GET / HTTP/1.1\r\nHost: good.test:\r\n\r\n", amb},
		{"GET / HTTP/1.1\r\nHost: good.test:80:80\r\n\r\n", amb},
		{"GET / HTTP/1.1\r\nHost: good.test\x00.evil.test\r\n\r\n", amb},
		{"GET / HTTP/1.1\r\nHost: good.test\r\nX: a\x01b\r\n\r\n", amb},
		{"GET / HTTP/1.1\r\n\r\n", amb},
		{"GET / HTTP/1.1\r\nHost:\r\n\r\n", amb},
		{"get / HTTP/1.1\r\nHost: good.test\r\n\r\n", amb},
		{"GET  / HTTP/1.1\r\nHost: good.test\r\n\r\n", amb},
		{"GET / HTTP/2.0\r\nHost: good.test\r\n\r\n", "!" + GateNoName},
		{"SSH-2.0-OpenSSH_9.6\r\n", "!" + GateNoName},
		{"GET / HTTP/1.1\r\nHost: good.test\r\n", "more"},
		{"GET / HT", "more"},
	} {
		_, got, err := parseRequest([]byte(tc.in))
		if r, ok := err.(refusal); ok {
			got = "!" + string(r)
		} else if errors.Is(err, errNeedMore) {
			got = "more"
		}
		if got != tc.want {
			t.Errorf("%q: got %q, want %q", tc.in, got, tc.want)
		}
	}
	if n, _, _ := parseRequest([]byte("GET / HTTP/1.1\r\nHost: a.test\r\n\r\nrest")); n != len("GET / HTTP/1.1\r\nHost: a.test\r\n\r\n") {
		t.Errorf("head length %d", n)
	}
	if _, _, err := parseRequest([]byte("GET / HTTP/1.1\r\nHost: " + strings.Repeat("a", 300) + ".test\r\n\r\n")); err == nil {
		t.Error("a 300-byte label passed")
	}
}

func TestCloseAfterFirst(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"GET / HTTP/1.1\r\nHost: good.test\r\n\r\n", "GET / HTTP/1.1\r\nHost: good.test\r\nConnection: close\r\n\r\n"},
		{"GET / HTTP/1.0\r\nHost: good.test\r\nconnection: Keep-Alive\r\nKeep-Alive: 5\r\nAccept: */*\r\n\r\n",
			"GET / HTTP/1.0\r\nHost: good.test\r\nAccept: */*\r\nConnection: close\r\n\r\n"},
		{"GET / HTTP/1.1\r\nHost: good.test\r\nUpgrade: h2c\r\nConnection: Upgrade, HTTP2-Settings\r\nHTTP2-Settings: AAMA\r\nProxy-Connection: keep-alive\r\n\r\n",
			"GET / HTTP/1.1\r\nHost: good.test\r\nHTTP2-Settings: AAMA\r\nConnection: close\r\n\r\n"},
		// A name that only begins like one of them stays.
		{"GET / HTTP/1.1\r\nHost: good.test\r\nConnection-Id: 1\r\n\r\n", "GET / HTTP/1.1\r\nHost: good.test\r\nConnection-Id: 1\r\nConnection: close\r\n\r\n"},
	} {
		n, _, err := parseRequest([]byte(c.in))
		if err != nil || n != len(c.in) {
			t.Fatalf("parseRequest(%q) = %d, %v", c.in, n, err)
		}
		if got := string(closeAfterFirst([]byte(c.in))); got != c.want {
			t.Errorf("closeAfterFirst(%q)\n = %q\nwant %q", c.in, got, c.want)
		}
		if n, _, err := parseRequest([]byte(closeAfterFirst([]byte(c.in)))); err != nil || n == 0 {
			t.Errorf("the rewritten head does not read back: %v", err)
		}
	}
}
