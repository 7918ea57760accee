// Command worldd runs the test world's servers (DNS for .test, TCP and UDP
// recorders) on the given addresses, for tests that put the world in a
// container on an --internal Docker network. Records come from -record
// flags; every query and connection is printed as a line on stdout as it
// happens:
//
//	query udp A api.test from 10.0.0.5:41234
//	conn tcp 10.0.0.2:443 from 10.0.0.5:50112
//	http GET /simple/ from 10.0.0.5:50114
//	site http #1 ["GET / HTTP/1.1" "allowed.test:8080"] on 10.0.0.2:8080 from 10.0.0.5:50116
//
// -sites PORTS serves a site recorder there instead (testworld.ServeSites):
// what a server choosing a virtual host per ClientHello or request read.
//
// With -tls-cert it also serves HTTPS on port 443 of every address (leave
// 443 out of -tcp): the fake Messages API for -api-host and a git
// smart-HTTP server for -git-host (git must be installed), see https.go.
//
// -files PORT=DIR serves the files under DIR over plain HTTP on PORT: a
// static npm registry (package documents and tarballs) or a pip "simple"
// index is just files, so package installs run against the world.
package main

import (
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/miekg/dns"

	"github.com/devbox-dev/devbox/internal/testworld"
)

type list []string

func (l *list) String() string     { return strings.Join(*l, ",") }
func (l *list) Set(v string) error { *l = append(*l, v); return nil }

func main() {
	var addrs, records, files list
	tcp := flag.String("tcp", "80,443,8080", "TCP ports to serve on every address")
	udp := flag.String("udp", "443,5000", "UDP ports to serve on every address")
	sites := flag.String("sites", "", "TCP ports to serve on every address with a site recorder (testworld.ServeSites): it reads and prints every ClientHello's names and every request's line and Hosts")
	flag.Var(&addrs, "addr", "address to serve on (repeatable; default 0.0.0.0 and ::)")
	flag.Var(&records, "record", `DNS record "NAME TYPE TTL VALUE" (repeatable), e.g. "api.test A 60 10.0.0.2"`)
	var hs httpsOptions
	flag.StringVar(&hs.cert, "tls-cert", "", "PEM certificate chain for HTTPS on port 443 (with -tls-key)")
	flag.StringVar(&hs.key, "tls-key", "", "PEM private key of -tls-cert")
	flag.StringVar(&hs.apiHost, "api-host", "", "Host the fake Messages API answers for")
	flag.StringVar(&hs.apiKey, "api-key", "", "the one credential the fake Messages API accepts")
	flag.StringVar(&hs.gitHost, "git-host", "", "Host the git smart-HTTP server answers for")
	flag.StringVar(&hs.gitToken, "git-token", "", "the basic-auth password the git server accepts")
	flag.StringVar(&hs.gitDir, "git-dir", "/tmp/worldd-git", "directory for the git server's bare repositories (DIR/repos/OWNER/NAME.git)")
	flag.Var(&hs.gitRepos, "git-repo", "a repository the git server has, OWNER/NAME (repeatable)")
	flag.Var(&files, "files", "PORT=DIR: serve the files under DIR over HTTP on PORT (repeatable)")
	flag.Parse()
	if len(addrs) == 0 {
		addrs = list{"0.0.0.0", "::"}
	}
	srv := testworld.NewDNSServer()
	for _, r := range records {
		f := strings.Fields(r)
		if len(f) < 4 {
			log.Fatalf("worldd: -record %q: want NAME TYPE TTL VALUE", r)
		}
		t, ok := dns.StringToType[strings.ToUpper(f[1])]
		ttl, err := strconv.Atoi(f[2])
		if !ok || err != nil {
			log.Fatalf("worldd: -record %q: bad type or TTL", r)
		}
		srv.Set(f[0], t, uint32(ttl), strings.Join(f[3:], " "))
	}
	var out sync.Mutex
	srv.OnQuery = func(q testworld.Query) {
		out.Lock()
		fmt.Printf("query %s %s %s from %s\n", q.Net, q.Type, q.Name, q.From)
		out.Unlock()
	}
	rec := &testworld.Recorder{OnConn: func(c testworld.Conn) {
		out.Lock()
		fmt.Printf("conn %s %s from %s\n", c.Proto, c.Local, c.Remote)
		out.Unlock()
	}}
	rec.OnSite = func(s testworld.Site) {
		out.Lock()
		fmt.Println(s)
		out.Unlock()
	}
	printf := func(format string, args ...any) {
		out.Lock()
		fmt.Printf(format, args...)
		out.Unlock()
	}
	var web http.Handler
	if hs.enabled() {
		h, err := hs.handler(printf)
		check(err)
		web = h
	}
	for _, a := range addrs {
		ip, err := netip.ParseAddr(a)
		if err != nil {
			log.Fatalf("worldd: -addr %q: %v", a, err)
		}
		ap := func(p uint16) string { return netip.AddrPortFrom(ip, p).String() }
		pc, err := net.ListenPacket("udp", ap(53))
		check(err)
		l, err := net.Listen("tcp", ap(53))
		check(err)
		srv.Serve(pc, l)
		for _, p := range ports(*tcp) {
			l, err := net.Listen("tcp", ap(p))
			check(err)
			rec.ServeTCP(l)
		}
		for _, p := range ports(*sites) {
			l, err := net.Listen("tcp", ap(p))
			check(err)
			rec.ServeSites(l)
		}
		if web != nil {
			l, err := net.Listen("tcp", ap(443))
			check(err)
			check(hs.serve(l, web, printf))
		}
		for _, p := range ports(*udp) {
			pc, err := net.ListenPacket("udp", ap(p))
			check(err)
			rec.ServeUDP(pc)
		}
		for _, f := range files {
			port, dir, ok := strings.Cut(f, "=")
			if !ok || len(ports(port)) != 1 {
				log.Fatalf("worldd: -files %q: want PORT=DIR", f)
			}
			l, err := net.Listen("tcp", ap(ports(port)[0]))
			check(err)
			fs := http.FileServer(http.Dir(dir))
			go http.Serve(l, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				out.Lock()
				fmt.Printf("http %s %s from %s\n", r.Method, r.URL.Path, r.RemoteAddr)
				out.Unlock()
				fs.ServeHTTP(w, r)
			}))
		}
	}
	fmt.Println("worldd: ready")
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	<-sig
}

func ports(s string) []uint16 {
	var out []uint16
	for _, f := range strings.Split(s, ",") {
		if f == "" {
			continue
		}
		p, err := strconv.ParseUint(f, 10, 16)
		if err != nil {
			log.Fatalf("worldd: bad port %q", f)
		}
		out = append(out, uint16(p))
	}
	return out
}

func check(err error) {
	if err != nil {
		log.Fatalf("worldd: %v", err)
	}
}
