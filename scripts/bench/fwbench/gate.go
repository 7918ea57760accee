package main

import (
	"bufio"
	"crypto/tls"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"time"

	"github.com/devbox-dev/devbox/internal/testworld"
)

// serveGate runs the name gate benchmarks' world servers on -addr: HTTPS on
// 443 and HTTP on 80, both answering "GET /bytes/N" with N zero bytes (and
// anything else with "ok"), with a certificate for -name from a throwaway CA.
func serveGate(args []string) {
	fs := flag.NewFlagSet("serve", flag.ExitOnError)
	addr := fs.String("addr", "10.77.0.2", "address to serve on")
	name := fs.String("name", "bench.test", "the certificate's name")
	fs.Parse(args)
	ca, err := testworld.NewCA()
	check(err)
	cert, err := ca.Certificate(*name)
	check(err)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var n int64
		if _, err := fmt.Sscanf(r.URL.Path, "/bytes/%d", &n); err != nil {
			io.WriteString(w, "ok\n")
			return
		}
		w.Header().Set("Content-Length", strconv.FormatInt(n, 10))
		io.CopyN(w, zeros{}, n)
	})
	l80, err := net.Listen("tcp", net.JoinHostPort(*addr, "80"))
	check(err)
	l443, err := net.Listen("tcp", net.JoinHostPort(*addr, "443"))
	check(err)
	go http.Serve(l80, h)
	go http.Serve(tls.NewListener(l443, &tls.Config{Certificates: []tls.Certificate{cert}}), h)
	fmt.Println("ready")
	select {}
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "fwbench:", err)
		os.Exit(1)
	}
}

// benchSetup times -n connections, one at a time, from connect to the
// first line of the answer to a GET: over TLS with SNI -sni when set (the
// handshake included), else plain HTTP with Host -host.
func benchSetup(args []string) {
	fs := flag.NewFlagSet("setup", flag.ExitOnError)
	addr := fs.String("addr", "10.77.0.2:443", "TCP address")
	sni := fs.String("sni", "", "TLS server name (empty: plain HTTP)")
	host := fs.String("host", "bench.test", "HTTP Host")
	n := fs.Int("n", 2000, "connections")
	fs.Parse(args)
	var lat []time.Duration
	for i := 0; i < *n; i++ {
		t0 := time.Now()
		c := dial(*addr, *sni)
		fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: %s\r\n\r\n", *host)
		if _, err := bufio.NewReader(c).ReadString('\n'); err != nil {
			check(fmt.Errorf("connection %d: %w", i, err))
		}
		lat = append(lat, time.Since(t0))
		c.Close()
	}
	slices.Sort(lat)
	fmt.Printf("setup addr=%s sni=%q n=%d p50=%v p99=%v\n", *addr, *sni, *n, pct(lat, 0.5), pct(lat, 0.99))
}

func dial(addr, sni string) net.Conn {
	c, err := net.DialTimeout("tcp", addr, 3*time.Second)
	check(err)
	if sni == "" {
		return c
	}
	tc := tls.Client(c, &tls.Config{ServerName: sni, InsecureSkipVerify: true})
	check(tc.Handshake())
	return tc
}

// benchThroughput downloads -bytes over plain HTTP (so both ends splice
// or copy in the kernel, not in TLS) and prints the rate.
func benchThroughput(args []string) {
	fs := flag.NewFlagSet("throughput", flag.ExitOnError)
	addr := fs.String("addr", "10.77.0.2:80", "TCP address")
	host := fs.String("host", "bench.test", "HTTP Host")
	size := fs.Int64("bytes", 1<<30, "bytes to download")
	fs.Parse(args)
	c, err := net.DialTimeout("tcp", *addr, 3*time.Second)
	check(err)
	defer c.Close()
	t0 := time.Now()
	fmt.Fprintf(c, "GET /bytes/%d HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", *size, *host)
	br := bufio.NewReaderSize(c, 1<<20)
	resp, err := http.ReadResponse(br, nil)
	check(err)
	got, err := io.Copy(io.Discard, resp.Body)
	check(err)
	d := time.Since(t0)
	if got != *size {
		check(fmt.Errorf("got %d bytes, want %d", got, *size))
	}
	fmt.Printf("throughput addr=%s bytes=%d time=%v rate=%.0f MiB/s\n", *addr, got, d.Round(time.Millisecond), float64(got)/(1<<20)/d.Seconds())
}

// holdIdle opens -n TLS connections (handshake done, then idle), prints
// "ready" and keeps them until killed.
func holdIdle(args []string) {
	fs := flag.NewFlagSet("idle", flag.ExitOnError)
	addr := fs.String("addr", "10.77.0.2:443", "TCP address")
	sni := fs.String("sni", "bench.test", "TLS server name")
	n := fs.Int("n", 1000, "connections")
	fs.Parse(args)
	conns := make([]net.Conn, 0, *n)
	for i := 0; i < *n; i++ {
		conns = append(conns, dial(*addr, *sni))
	}
	fmt.Printf("ready %d\n", len(conns))
	select {}
}
