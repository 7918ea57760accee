//go:build linux

package firewall

import (
	"crypto/ecdh"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"strings"
	"time"
)

// gateProbe runs the name gate's probes (see helperProbe): exit 0 when the
// exchange completed, 3 when it was refused or failed.
func gateProbe(args []string, fail func(error) int) (int, bool) {
	if n, ok := map[string]int{"tls": 4, "ech": 5, "http": 3, "raw": 3}[args[0]]; !ok {
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

func netListen(a netip.AddrPort) (net.Listener, error) { return net.Listen("tcp", a.String()) }
func netListenPacket(a netip.AddrPort) (net.PacketConn, error) {
	return net.ListenPacket("udp", a.String())
}
