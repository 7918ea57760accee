//go:build linux

package firewall

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/devbox-dev/devbox/internal/devboxtest"
	"github.com/devbox-dev/devbox/internal/testworld"
)

// The differential harness (issue 22): the same bytes go to the gate's
// readers and to real servers, and any input that the gate passes for
// good.test while a server acts on another name (or on none, i.e. its
// default virtual host) fails. The servers, all on loopback:
//   - Go's net/http (the name: the Host its handler sees),
//   - Go's crypto/tls (ClientHelloInfo.ServerName),
//   - OpenSSL's s_server with an SNI callback (-servername, -tlsextdebug:
//     the name it prints),
//   - nginx with three server blocks (good.test, evil.test, a default),
//     each answering its own name.
// A passed request also goes as the gate forwards it (closeAfterFirst)
// with a request for evil.test behind it: net/http (keep-alive on) and
// nginx must answer the first only.
// TestGateDifferential runs generated inputs for a bounded time
// (DEVBOX_GATEDIFF, a duration: 20 s under DEVBOX_E2E, 2 s otherwise);
// FuzzGateDiff lets go test -fuzz mutate them.

// diffServers are the servers an input is compared with.
type diffServers struct {
	httpAddr  string // Go net/http
	nginxAddr string // "" when nginx is not there
	tlsL      net.Listener
	sslAddr   string // openssl s_server, "" when absent
	sslOut    *devboxtest.SyncBuffer
	syncN     int
	mu        sync.Mutex // one input at a time per openssl
	dir       string
	procs     []*exec.Cmd
	httpSrv   *http.Server
}

// startDiffServers starts the servers for tb (a fuzzing worker is one
// process) and stops them when it ends; they also die with the test
// process (Pdeathsig) if it is killed.
func startDiffServers(tb testing.TB) *diffServers {
	tb.Helper()
	d, err := newDiffServers()
	if d != nil {
		tb.Cleanup(d.stop)
	}
	if err != nil {
		tb.Fatal(err)
	}
	if d.sslAddr == "" && devboxtest.E2E() {
		tb.Fatal("openssl not found: the differential harness needs it under " + devboxtest.E2EVar)
	}
	if d.nginxAddr == "" && devboxtest.E2E() {
		tb.Fatal("nginx not found: the differential harness needs it under " + devboxtest.E2EVar + " (Debian: nginx-light)")
	}
	return d
}

func (d *diffServers) stop() {
	for _, p := range d.procs {
		p.Process.Kill()
		p.Wait()
	}
	if d.httpSrv != nil {
		d.httpSrv.Close()
	}
	if d.tlsL != nil {
		d.tlsL.Close()
	}
	os.RemoveAll(d.dir)
}

// startProc starts a server process that dies with the test.
func (d *diffServers) startProc(cmd *exec.Cmd) error {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return err
	}
	d.procs = append(d.procs, cmd)
	return nil
}

func newDiffServers() (*diffServers, error) {
	dir, err := os.MkdirTemp("", "devbox-gatediff-")
	if err != nil {
		return nil, err
	}
	d := &diffServers{dir: dir}
	// net/http
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return d, err
	}
	d.httpAddr = l.Addr().String()
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprintf(w, "vhost=%q\n", r.Host)
		}),
		ErrorLog: nil,
	}
	d.httpSrv = srv
	go srv.Serve(l)
	// crypto/tls: its handshakes run in check.
	if d.tlsL, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
		return d, err
	}
	ca, err := testworld.NewCA()
	if err != nil {
		return d, err
	}
	var files []string
	for _, n := range []string{"good", "evil"} {
		cert, key, err := ca.CertificatePEM(n + ".test")
		if err != nil {
			return d, err
		}
		c, k := filepath.Join(dir, n+".pem"), filepath.Join(dir, n+".key")
		os.WriteFile(c, cert, 0o644)
		os.WriteFile(k, key, 0o600)
		files = append(files, c, k)
	}
	if _, err := exec.LookPath("openssl"); err == nil {
		if err := d.startOpenSSL(files); err != nil {
			return d, err
		}
	}
	if nginx, err := exec.LookPath("nginx"); err == nil {
		if err := d.startNginx(nginx, dir); err != nil {
			return d, err
		}
	}
	return d, nil
}

// freePort picks a loopback port for a server that takes a number.
func freePort() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

func (d *diffServers) startOpenSSL(files []string) error {
	addr, err := freePort()
	if err != nil {
		return err
	}
	// stdbuf: a line per name, written as it is read (s_server's stdout
	// is block-buffered on a pipe).
	cmd := exec.Command("stdbuf", "-oL", "-eL", "openssl", "s_server", "-accept", addr,
		"-cert", files[0], "-key", files[1], "-servername", "evil.test", "-cert2", files[2], "-key2", files[3],
		"-www", "-tlsextdebug")
	d.sslOut = &devboxtest.SyncBuffer{}
	cmd.Stdout, cmd.Stderr = d.sslOut, d.sslOut
	if err := d.startProc(cmd); err != nil {
		return err
	}
	d.sslAddr = addr
	for i := 0; i < 100; i++ {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("openssl s_server did not listen on %s: %s", addr, d.sslOut)
}

func (d *diffServers) startNginx(nginx, dir string) error {
	addr, err := freePort()
	if err != nil {
		return err
	}
	cf := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(cf, []byte(nginxVhosts(dir, addr, "")), 0o644); err != nil {
		return err
	}
	cmd := exec.Command(nginx, "-p", dir, "-e", filepath.Join(dir, "error.log"), "-c", cf)
	var out devboxtest.SyncBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := d.startProc(cmd); err != nil {
		return err
	}
	for i := 0; i < 100; i++ {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			d.nginxAddr = addr
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	raw, _ := os.ReadFile(filepath.Join(dir, "error.log"))
	return fmt.Errorf("nginx did not listen on %s: %s %s", addr, &out, raw)
}

// nginxVhosts is an nginx configuration (in the foreground, its files
// under dir) with three server blocks on listen: good.test, evil.test and
// a default, each answering vhost="NAME" with the one it acted on. With
// accessLog, every request is logged there as "SERVER_NAME HOST REQUEST".
func nginxVhosts(dir, listen, accessLog string) string {
	logs := "access_log off;"
	if accessLog != "" {
		logs = fmt.Sprintf("log_format vhosts '$server_name $host $request'; access_log %s vhosts;", accessLog)
	}
	return fmt.Sprintf(`daemon off; master_process off; worker_processes 1;
error_log %[1]s/error.log; pid %[1]s/nginx.pid;
events { worker_connections 256; }
http {
	%[3]s
	client_body_temp_path %[1]s/body; proxy_temp_path %[1]s/proxy; fastcgi_temp_path %[1]s/fastcgi;
	uwsgi_temp_path %[1]s/uwsgi; scgi_temp_path %[1]s/scgi;
	server { listen %[2]s default_server; server_name _; return 200 "vhost=\"default\"\n"; }
	server { listen %[2]s; server_name good.test; return 200 "vhost=\"good.test\"\n"; }
	server { listen %[2]s; server_name evil.test; return 200 "vhost=\"evil.test\"\n"; }
}
`, dir, listen, logs)
}

// exchange sends in to addr, closes the write side and returns what came
// back within a second.
func exchange(addr string, in []byte) []byte {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return nil
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(time.Second))
	c.Write(in)
	c.(*net.TCPConn).CloseWrite()
	out, _ := io.ReadAll(c)
	return out
}

var vhostRE = regexp.MustCompile(`vhost="((?:[^"\\]|\\.)*)"`)

// httpVhost returns the name the first response says its server acted on.
func httpVhost(resp []byte) (string, bool) {
	vs := httpVhosts(resp)
	if len(vs) == 0 || vs[0] == "" {
		return "", false
	}
	return vs[0], true
}

// httpVhosts returns, for each response in resp in turn, the name it says
// its server acted on ("" for a response that says none or is not a 200).
func httpVhosts(resp []byte) []string {
	br := bufio.NewReader(bytes.NewReader(resp))
	var vs []string
	for {
		r, err := http.ReadResponse(br, nil)
		if err != nil {
			return vs
		}
		body, _ := io.ReadAll(io.LimitReader(r.Body, 4096))
		if r.StatusCode/100 == 1 {
			continue // an interim answer (100 Continue)
		}
		m := vhostRE.FindSubmatch(body)
		if m == nil || r.StatusCode != 200 {
			vs = append(vs, "")
			continue
		}
		vs = append(vs, string(m[1]))
	}
}

// goTLSName runs crypto/tls's server on in and returns the name its
// ClientHelloInfo said, if it got that far.
func (d *diffServers) goTLSName(in []byte) (string, bool) {
	c, err := net.Dial("tcp", d.tlsL.Addr().String())
	if err != nil {
		return "", false
	}
	defer c.Close()
	s, err := d.tlsL.Accept()
	if err != nil {
		return "", false
	}
	defer s.Close()
	go func() { c.Write(in); c.(*net.TCPConn).CloseWrite() }()
	var name string
	var seen bool
	s.SetDeadline(time.Now().Add(time.Second))
	tls.Server(s, &tls.Config{GetConfigForClient: func(hi *tls.ClientHelloInfo) (*tls.Config, error) {
		name, seen = hi.ServerName, true
		return nil, errors.New("stop")
	}}).Handshake()
	return name, seen
}

var sslNameRE = regexp.MustCompile(`Hostname in TLS extension: "([^"]*)"`)

// opensslName sends in to s_server, then a marker hello, and returns the
// names s_server printed between the two.
func (d *diffServers) opensslName(in []byte) ([]string, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	start := len(d.sslOut.String())
	exchange(d.sslAddr, in)
	d.syncN++
	marker := fmt.Sprintf("sync%d.test", d.syncN)
	exchange(d.sslAddr, withName(marker))
	for i := 0; ; i++ {
		out := d.sslOut.String()[start:]
		if j := strings.Index(out, `"`+marker+`"`); j >= 0 {
			var names []string
			for _, m := range sslNameRE.FindAllStringSubmatch(out[:j], -1) {
				names = append(names, m[1])
			}
			// The marker's own line is the last match before j.
			if len(names) > 0 {
				names = names[:len(names)-1]
			}
			return names, nil
		}
		if i == 1000 { // 5 s: a loaded CI machine can be slow
			return nil, fmt.Errorf("openssl never printed %s", marker)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// diffPolicy is the gate's policy in the harness: good.test only, and
// good.test's answers carried the destination.
var diffPolicy = Config{Allow: []Destination{{Name: "good.test"}}}

// diffStats counts a run.
type diffStats struct {
	inputs, passed, http, tls int
	disagreements             []string
}

// check feeds in to the gate's readers and verdict, and when they pass it,
// to every server of its kind. It returns a description per server that
// acted on another name.
func (d *diffServers) check(in []byte, st *diffStats) []string {
	st.inputs++
	if len(in) == 0 {
		return nil
	}
	f, err := readFirst(in)
	if err != nil || f.refus != "" || diffPolicy.gateVerdict(f.kind, f.name, f.ech, 443, []string{"good.test"}) != "" {
		return nil // refused: no byte reaches a server
	}
	st.passed++
	var bad []string
	differs := func(server, name string) {
		if n := strings.TrimSuffix(strings.ToLower(name), "."); n != f.name {
			bad = append(bad, fmt.Sprintf("gate passed %q, %s acted on %q: %q", f.name, server, name, in))
		}
	}
	switch f.kind {
	case streamHTTP:
		st.http++
		if v, ok := httpVhost(exchange(d.httpAddr, in)); ok {
			differs("net/http", hostName(v))
		}
		if d.nginxAddr != "" {
			if v, ok := httpVhost(exchange(d.nginxAddr, in)); ok {
				if v == "default" {
					v = "" // the default server: no name matched
				}
				differs("nginx", v)
			}
		}
		// What the gate forwards (closeAfterFirst), a request for
		// evil.test behind it: no server may act on a second request.
		fwd := append(append(closeAfterFirst(in[:f.n]), in[f.n:]...), "GET / HTTP/1.1\r\nHost: evil.test\r\n\r\n"...)
		for _, s := range [][2]string{{"net/http", d.httpAddr}, {"nginx", d.nginxAddr}} {
			if s[1] == "" {
				continue
			}
			if vs := httpVhosts(exchange(s[1], fwd)); len(vs) > 1 {
				bad = append(bad, fmt.Sprintf("gate passed %q, %s answered %d requests on one connection %q: %q", f.name, s[0], len(vs), vs, fwd))
			}
		}
	case streamTLS:
		st.tls++
		if n, ok := d.goTLSName(in); ok {
			differs("crypto/tls", n)
		}
		if d.sslAddr != "" {
			names, err := d.opensslName(in)
			if err != nil {
				bad = append(bad, err.Error())
			}
			for _, n := range names {
				differs("openssl", n)
			}
		}
	}
	st.disagreements = append(st.disagreements, bad...)
	return bad
}

// genInput makes one input: an HTTP request or a ClientHello assembled
// from pieces that servers are known to read differently, then perhaps
// mutated byte by byte.
func genInput(r *rand.Rand) []byte {
	var b []byte
	if r.IntN(2) == 0 {
		b = genRequest(r)
	} else {
		b = genHello(r)
	}
	if r.IntN(4) == 0 {
		b = mutate(r, b)
	}
	return b
}

func pick[T any](r *rand.Rand, xs ...T) T { return xs[r.IntN(len(xs))] }

func genRequest(r *rand.Rand) []byte {
	odd := r.IntN(3) == 0 // one odd piece, else a plain request
	eol := "\r\n"
	if odd && r.IntN(4) == 0 {
		eol = pick(r, "\n", "\r", "\r\r\n", "\n\r")
	}
	var b strings.Builder
	one := func(plain string, odds ...string) {
		if odd && r.IntN(3) == 0 {
			plain = pick(r, odds...)
		}
		b.WriteString(plain)
	}
	one("GET", "POST", "HEAD", "OPTIONS", "get", "G ET", "GET\x00")
	one(" ", "  ", "\t", "\x0b")
	one("/", "/a?b=c", "http://evil.test/", "http://good.test/", "HTTP://EVIL.TEST/", "//evil.test/",
		"*", "evil.test:80", "/%2e%2e/", "https://evil.test:443/x", "/\x00", "/#@evil.test")
	one(" HTTP/1.1", " HTTP/1.0", " http/1.1", " HTTP/1.1 ", " HTTP/2.0", "", " HTTP/1.10", " HTTP/01.1")
	b.WriteString(eol)
	plainHeaders := []string{"User-Agent: x", "Accept: */*", "Connection: close", "X-Forwarded-Host: evil.test", "Content-Length: 0"}
	oddHeaders := []string{
		"Host: evil.test", "host: GOOD.test", "HOST: good.test:80",
		"Host :evil.test", "Host\t: evil.test", "Host: good.test.", "Host: good.test..", "Host: good.test@evil.test",
		"Host: evil.test#good.test", " evil.test", "\tevil.test", " Host: evil.test",
		"Host: good.test\x00evil.test", "Host: good.test, evil.test", "Host: good.test evil.test", "Host:good.test",
		"Host:  good.test  ", "Host: [::1]", "Host: 10.0.0.1", "Ho\x00st: evil.test", "Transfer-Encoding: chunked",
		"Content-Length: 5", "Host: evil.test:good.test", "Host: good.test:80:80", "Host: good.test:",
		"Host: .good.test", "Host: good_test", "Host: good.test\x0b", "Host: g\u00f6od.test", "Host: good.test/evil",
		"Host: good.test\\evil.test", "Host: %67ood.test", "Host", ":", "Host: good.test\r", "Host: good.test:+80",
		"Host: good.test:0x50", "Host: GOOD.TEST.:443", "Host: good.test\t", "Host:\tgood.test",
	}
	var lines []string
	if !odd || r.IntN(4) > 0 {
		lines = append(lines, "Host: good.test")
	}
	for i, n := 0, r.IntN(3); i < n; i++ {
		lines = append(lines, pick(r, plainHeaders...))
	}
	if odd {
		lines = append(lines, pick(r, oddHeaders...))
	}
	r.Shuffle(len(lines), func(i, j int) { lines[i], lines[j] = lines[j], lines[i] })
	for _, l := range lines {
		b.WriteString(l)
		b.WriteString(eol)
	}
	b.WriteString(eol)
	if r.IntN(4) == 0 {
		b.WriteString("GET / HTTP/1.1\r\nHost: evil.test\r\n\r\n") // pipelined: not the gate's first request
	}
	return []byte(b.String())
}

func genHello(r *rand.Rand) []byte {
	odd := r.IntN(2) == 0 // one odd piece, else a plain hello
	names := []string{"GOOD.TEST", "good.test.", "evil.test", "", "good.test\x00evil.test", "good.test.evil.test",
		"good..test", "-good.test", "good.test ", "g\u00f6od.test", "xn--good.test", "good_test", "good.test\x00"}
	entries := []any{0, "good.test"}
	exts := standardExts()
	frag, version := 0, byte(1)
	if odd {
		switch r.IntN(12) {
		case 0:
			entries[1] = pick(r, names...)
		case 1:
			entries = append(entries, 0, pick(r, names...))
		case 2:
			entries = append(entries, pick(r, 1, 2, 255), pick(r, names...))
		case 3:
			entries = append([]any{pick(r, 1, 2, 255), pick(r, names...)}, entries...)
		case 4:
			entries = []any{pick(r, 1, 255), "good.test"}
		case 5:
			entries = nil
		case 6:
			exts = append(exts, sniExt(0, pick(r, append(names, "good.test")...)))
		case 7:
			exts = append(exts, helloExt{extECH, []byte{0, 1, 2, 3}})
		case 8:
			frag = pick(r, 1, 5, 64, 200)
		case 9:
			version = byte(pick(r, 0, 2, 3, 4))
		case 10:
			exts = append(exts, helloExt{uint16(pick(r, 0x1234, 0xfe0d, 41, 0xff01)), []byte{0}})
		}
	}
	sni := sniExt(entries...)
	if odd && r.IntN(6) == 0 {
		if r.IntN(2) == 0 {
			sni.data = append(sni.data, byte(r.IntN(256)))
		} else {
			sni.data[1]-- // the list claims one byte less
		}
	}
	if !odd || r.IntN(10) > 0 {
		exts = append(exts, sni)
	}
	r.Shuffle(len(exts), func(i, j int) { exts[i], exts[j] = exts[j], exts[i] })
	out := helloRecords(helloBody(exts...), frag)
	out[2] = version
	return out
}

// mutate changes, inserts or deletes a few bytes, favouring the bytes
// parsers split on.
func mutate(r *rand.Rand, b []byte) []byte {
	b = bytes.Clone(b)
	special := []byte{' ', '\t', '\r', '\n', ':', 0, '.', '@', '/', 'A', 'e', 0x80, 0xff, 1}
	for i, n := 0, 1+r.IntN(3); i < n && len(b) > 0; i++ {
		p := r.IntN(len(b))
		switch r.IntN(3) {
		case 0:
			b[p] = pick(r, special...)
		case 1:
			b = append(b[:p], append([]byte{pick(r, special...)}, b[p:]...)...)
		case 2:
			b = append(b[:p], b[p+1:]...)
		}
	}
	return b
}

func TestGateDifferential(t *testing.T) {
	d := startDiffServers(t)
	budget := 2 * time.Second
	if devboxtest.E2E() {
		budget = 20 * time.Second
	}
	if v := os.Getenv("DEVBOX_GATEDIFF"); v != "" {
		var err error
		if budget, err = time.ParseDuration(v); err != nil {
			t.Fatalf("DEVBOX_GATEDIFF=%q: %v", v, err)
		}
	}
	seed := uint64(time.Now().UnixNano())
	r := rand.New(rand.NewPCG(seed, 0))
	var st diffStats
	ctx, cancel := context.WithTimeout(context.Background(), budget)
	defer cancel()
	for ctx.Err() == nil {
		for _, bad := range d.check(genInput(r), &st) {
			t.Error(bad)
		}
		if len(st.disagreements) > 20 {
			break
		}
	}
	t.Logf("seed %d: %d inputs in %v, %d passed by the gate (%d HTTP, %d TLS), %d disagreements; servers: net/http, crypto/tls, openssl=%v, nginx=%v",
		seed, st.inputs, budget, st.passed, st.http, st.tls, len(st.disagreements), d.sslAddr != "", d.nginxAddr != "")
	if st.passed == 0 {
		t.Error("the gate passed no input: the harness compared nothing")
	}
}

// FuzzGateDiff: go test -fuzz FuzzGateDiff ./firewall/ mutates the seeds
// below (and generated ones) and compares the gate with every server.
func FuzzGateDiff(f *testing.F) {
	for _, s := range []string{
		"GET / HTTP/1.1\r\nHost: good.test\r\n\r\n",
		"GET http://evil.test/ HTTP/1.1\r\nHost: good.test\r\n\r\n",
		"GET / HTTP/1.1\r\nHost :evil.test\r\nHost: good.test\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: good.test\r\n evil.test\r\n\r\n",
	} {
		f.Add([]byte(s))
	}
	f.Add(withName("good.test"))
	f.Add(helloRecords(helloBody(append(standardExts(), sniExt(0, "good.test", 1, "evil.test"))...), 0))
	r := rand.New(rand.NewPCG(1, 2))
	for range 40 {
		f.Add(genInput(r))
	}
	d := startDiffServers(f)
	f.Fuzz(func(t *testing.T, in []byte) {
		var st diffStats
		for _, bad := range d.check(in, &st) {
			t.Error(bad)
		}
	})
}
