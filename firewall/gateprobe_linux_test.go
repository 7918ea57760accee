//go:build linux

package firewall

import (
	"bufio"
	"bytes"
	"crypto/ecdh"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// gateProbe runs the name gate's probes (see helperProbe): exit 0 when the
// exchange completed, 3 when it was refused or failed.
func gateProbe(args []string, fail func(error) int) (int, bool) {
	if n, ok := map[string]int{"tls": 4, "ech": 5, "http": 3, "raw": 3, "hex": 3, "hrr": 4, "idle": 6, "setup": 6, "keepalive": 4}[args[0]]; !ok {
		return 0, false
	} else if len(args) < n {
		return 1, true
	}
	switch args[0] {
	case "tls": // tls ADDR SNI|- CAFILE: handshake, GET /, print the answer
		conf, err := probeTLSConfig(args[2], args[3])
		if err != nil {
			return fail(err), true
		}
		return tlsGet(args[1], conf, fail), true
	case "ech": // ech ADDR OUTER INNER CAFILE: an ECH ClientHello, outer name OUTER
		conf, err := probeTLSConfig(args[3], args[4])
		if err != nil {
			return fail(err), true
		}
		conf.MinVersion = tls.VersionTLS13
		if conf.EncryptedClientHelloConfigList, err = echConfigList(args[2]); err != nil {
			return fail(err), true
		}
		return tlsGet(args[1], conf, fail), true
	case "http": // http ADDR HOST: a plain HTTP/1.1 GET with that Host
		c, err := net.DialTimeout("tcp", args[1], 3*time.Second)
		if err != nil {
			return fail(err), true
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(3 * time.Second))
		fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", args[2])
		return readAnswer(c, fail), true
	case "hex": // hex ADDR HEX: send the bytes, print what comes back
		raw, err := hex.DecodeString(args[2])
		if err != nil {
			return fail(err), true
		}
		c, err := net.DialTimeout("tcp", args[1], 3*time.Second)
		if err != nil {
			return fail(err), true
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(3 * time.Second))
		c.Write(raw)
		return readAnswer(c, fail), true
	case "hrr": // hrr ADDR FIRST SECOND: see hrrHandshake
		return hrrHandshake(args[1], args[2], args[3], fail), true
	case "idle": // idle ADDR N GOODADDR NAME PAD: see idleConns
		n, err := strconv.Atoi(args[2])
		if err != nil {
			return fail(err), true
		}
		pad, err := strconv.Atoi(args[5])
		if err != nil {
			return fail(err), true
		}
		return idleConns(args[1], n, pad, args[3], args[4], fail), true
	case "setup": // setup tls|http ADDR NAME CAFILE|- N: see setupConns
		n, err := strconv.Atoi(args[5])
		if err != nil || n < 1 {
			return fail(fmt.Errorf("setup: bad count %q", args[5])), true
		}
		return setupConns(args[1], args[2], args[3], args[4], n, fail), true
	case "keepalive": // keepalive ADDR FIRST SECOND: see keepAlive
		return keepAlive(args[1], args[2], args[3], fail), true
	case "raw": // raw ADDR TEXT: send TEXT, print what comes back
		c, err := net.DialTimeout("tcp", args[1], 3*time.Second)
		if err != nil {
			return fail(err), true
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(3 * time.Second))
		io.WriteString(c, strings.ReplaceAll(args[2], `\n`, "\n"))
		return readAnswer(c, fail), true
	}
	return 0, false
}

// keepAlive asks for / with Host first, reads the answer, then asks on
// the same connection with Host second, as a keep-alive client does. It
// prints both answers' last lines (or the second's error); it fails only
// when the first got no answer.
func keepAlive(addr, first, second string, fail func(error) int) int {
	c, err := net.DialTimeout("tcp", addr, 3*time.Second)
	if err != nil {
		return fail(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(3 * time.Second))
	br := bufio.NewReader(c)
	ask := func(host string) string {
		fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: %s\r\n\r\n", host)
		r, err := http.ReadResponse(br, nil)
		if err != nil {
			return "error: " + err.Error()
		}
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return "error: " + err.Error()
		}
		return strings.TrimSpace(string(body))
	}
	a := ask(first)
	if strings.HasPrefix(a, "error: ") {
		return fail(errors.New(a))
	}
	fmt.Printf("ok first %s; second %s\n", a, ask(second))
	return 0
}

func probeTLSConfig(sni, caFile string) (*tls.Config, error) {
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	conf := &tls.Config{ServerName: sni, RootCAs: pool}
	if sni == "-" {
		// Dialing an address with no ServerName sends no SNI.
		conf.ServerName, conf.InsecureSkipVerify = "", true
	}
	return conf, nil
}

func tlsGet(addr string, conf *tls.Config, fail func(error) int) int {
	d := &net.Dialer{Timeout: 3 * time.Second}
	c, err := tls.DialWithDialer(d, "tcp", addr, conf)
	if err != nil {
		return fail(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(3 * time.Second))
	host := conf.ServerName
	if host == "" {
		host, _, _ = net.SplitHostPort(addr)
	}
	fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", host)
	return readAnswer(c, fail)
}

// readAnswer prints the last line of an HTTP answer ("hello NAME …").
func readAnswer(c io.Reader, fail func(error) int) int {
	raw, err := io.ReadAll(c)
	if len(raw) == 0 {
		if err == nil {
			err = io.ErrUnexpectedEOF
		}
		return fail(err)
	}
	lines := strings.Split(strings.TrimSpace(string(raw)), "\n")
	fmt.Println("ok", strings.TrimSpace(lines[len(lines)-1]))
	return 0
}

// echConfigList builds an ECHConfigList (draft-ietf-tls-esni, version
// 0xfe0d) with a fresh X25519 key and public name outer: enough for
// crypto/tls to send an ECH ClientHello whose outer SNI is outer.
func echConfigList(outer string) ([]byte, error) {
	key, err := ecdh.X25519().GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	u16 := func(b []byte, v int) []byte { return binary.BigEndian.AppendUint16(b, uint16(v)) }
	var c []byte
	c = append(c, 7)   // config_id
	c = u16(c, 0x0020) // DHKEM(X25519, HKDF-SHA256)
	pub := key.PublicKey().Bytes()
	c = u16(c, len(pub))
	c = append(c, pub...)
	c = u16(c, 4)      // one cipher suite:
	c = u16(c, 0x0001) // HKDF-SHA256
	c = u16(c, 0x0001) // AES-128-GCM
	c = append(c, 0)   // maximum_name_length
	c = append(c, byte(len(outer)))
	c = append(c, outer...)
	c = u16(c, 0) // no extensions
	cfg := u16(u16(nil, 0xfe0d), len(c))
	cfg = append(cfg, c...)
	return append(u16(nil, len(cfg)), cfg...), nil
}

// swapConn rewrites every write after the first: the client's second
// ClientHello then asks for another name than its first.
type swapConn struct {
	net.Conn
	from, to []byte
	writes   int
}

func (s *swapConn) Write(p []byte) (int, error) {
	if s.writes++; s.writes > 1 {
		p = bytes.ReplaceAll(p, s.from, s.to)
	}
	return s.Conn.Write(p)
}

// hrrHandshake runs a TLS 1.3 handshake whose first ClientHello asks for
// first with an X25519 key share only (the server, which wants P-256,
// answers with a HelloRetryRequest) and whose second asks for second (of
// the same length: the hello is rewritten in flight). It prints the
// certificate's name when the handshake completes.
func hrrHandshake(addr, first, second string, fail func(error) int) int {
	if len(first) != len(second) {
		return fail(fmt.Errorf("%q and %q differ in length", first, second))
	}
	c, err := net.DialTimeout("tcp", addr, 3*time.Second)
	if err != nil {
		return fail(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(3 * time.Second))
	tc := tls.Client(&swapConn{Conn: c, from: []byte(first), to: []byte(second)}, &tls.Config{
		ServerName: first, InsecureSkipVerify: true, MinVersion: tls.VersionTLS13,
		CurvePreferences: []tls.CurveID{tls.X25519, tls.CurveP256},
	})
	if err := tc.Handshake(); err != nil {
		return fail(err)
	}
	fmt.Println("ok cn=" + tc.ConnectionState().PeerCertificates[0].Subject.CommonName)
	return 0
}

// idleConns opens n connections to addr that send pad bytes of an
// unfinished request head (or nothing) and then wait, and meanwhile makes
// one TLS handshake (SNI name) to goodAddr; it prints when the idle ones
// were closed (min, median, max) and how long the handshake took.
func idleConns(addr string, n, pad int, goodAddr, name string, fail func(error) int) int {
	head := []byte("GET / HTTP/1.1\r\nHost: good.test\r\nX-Pad: " + strings.Repeat("a", max(pad-40, 0)))
	start := time.Now()
	closed := make(chan time.Duration, n)
	var open int
	for i := 0; i < n; i++ {
		c, err := net.DialTimeout("tcp", addr, 3*time.Second)
		if err != nil {
			return fail(fmt.Errorf("connection %d: %w", i, err))
		}
		open++
		if pad > 0 {
			go c.Write(head)
		}
		go func() {
			defer c.Close()
			c.SetReadDeadline(time.Now().Add(30 * time.Second))
			io.Copy(io.Discard, c)
			closed <- time.Since(start)
		}()
	}
	opened := time.Since(start)
	time.Sleep(time.Second)
	t0 := time.Now()
	d := &net.Dialer{Timeout: 10 * time.Second}
	tc, err := tls.DialWithDialer(d, "tcp", goodAddr, &tls.Config{ServerName: name, InsecureSkipVerify: true})
	good := time.Since(t0)
	if err != nil {
		return fail(fmt.Errorf("good connection: %w", err))
	}
	tc.Close()
	var ds []time.Duration
	for range open {
		ds = append(ds, <-closed)
	}
	slices.Sort(ds)
	fmt.Printf("ok %d idle connections (%d bytes each) opened in %v; closed after %v min, %v median, %v max; a good TLS handshake meanwhile took %v\n",
		n, pad, opened.Round(time.Millisecond), ds[0].Round(time.Millisecond), ds[len(ds)/2].Round(time.Millisecond), ds[len(ds)-1].Round(time.Millisecond), good.Round(time.Millisecond))
	return 0
}

func netListen(a netip.AddrPort) (net.Listener, error) { return net.Listen("tcp", a.String()) }
func netListenPacket(a netip.AddrPort) (net.PacketConn, error) {
	return net.ListenPacket("udp", a.String())
}
