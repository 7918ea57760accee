package main

import (
	"bufio"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/devbox-dev/devbox/internal/testworld"
)

// serveGate runs the name gate benchmarks' world servers on each of -addr
// (comma-separated): HTTPS on 443 and HTTP on 80, answering "GET /bytes/N"
// with N zero bytes (and anything else with "ok"), with a certificate for
// -name from a throwaway CA. One process serves every address, so the
// gated and the direct address are the same server.
func serveGate(args []string) {
	fs := flag.NewFlagSet("serve", flag.ExitOnError)
	addrs := fs.String("addr", "10.77.0.2", "addresses to serve on, comma-separated")
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
	for _, addr := range strings.Split(*addrs, ",") {
		l80, err := net.Listen("tcp", net.JoinHostPort(addr, "80"))
		check(err)
		l443, err := net.Listen("tcp", net.JoinHostPort(addr, "443"))
		check(err)
		go http.Serve(l80, h)
		go http.Serve(tls.NewListener(l443, &tls.Config{Certificates: []tls.Certificate{cert}}), h)
	}
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

// target is one address a benchmark alternates over, with its label
// ("gate", "direct").
type target struct{ label, addr string }

// parseTargets reads "label=host:port,label=host:port" (a bare host:port
// is its own label).
func parseTargets(s string) []target {
	var ts []target
	for _, f := range strings.Split(s, ",") {
		label, addr, ok := strings.Cut(f, "=")
		if !ok {
			addr = label
		}
		ts = append(ts, target{label, addr})
	}
	return ts
}

// alternate calls visit(i, j) for each round i < rounds and each of n
// targets j, in ABBA order (reversed on odd rounds), so neither target is
// always first after the other and a change in the machine's load lands on
// all of them alike.
func alternate(rounds, n int, visit func(i, j int)) {
	order := make([]int, n)
	for i := 0; i < rounds; i++ {
		for j := range order {
			order[j] = j
		}
		if i%2 == 1 {
			slices.Reverse(order)
		}
		for _, j := range order {
			visit(i, j)
		}
	}
}

// optTargets is parseTargets for an optional flag: none when s is empty.
func optTargets(s string) []target {
	if s == "" {
		return nil
	}
	return parseTargets(s)
}

// benchSetup times -n connections to each of -addr, one at a time, from
// connect to the first line of the answer to a GET: over TLS with SNI -sni
// when set (the handshake included), else plain HTTP with Host -host.
// With several addresses the connections alternate between them (ABBA,
// so neither is always first after the other), so a change in the
// machine's load lands on all of them alike.
func benchSetup(args []string) {
	fs := flag.NewFlagSet("setup", flag.ExitOnError)
	addrs := fs.String("addr", "10.77.0.2:443", "label=host:port targets, comma-separated")
	sni := fs.String("sni", "", "TLS server name (empty: plain HTTP)")
	host := fs.String("host", "bench.test", "HTTP Host")
	n := fs.Int("n", 2000, "connections per target")
	cpuOf := fs.String("cpu", "", "label=pid processes whose CPU time per connection to report, comma-separated")
	fs.Parse(args)
	ts, procs := parseTargets(*addrs), optTargets(*cpuOf)
	lat := make([][]time.Duration, len(ts))
	// cpu[j][0] is this process's CPU time spent on target j's
	// connections, cpu[j][1+k] that of procs[k]; read between connections,
	// outside the timed part. /proc's figures move in 10 ms ticks, so one
	// connection's share is 0 or a tick, but the sums over n are sound.
	cpu := make([][]time.Duration, len(ts))
	for j := range cpu {
		cpu[j] = make([]time.Duration, 1+len(procs))
	}
	snap := func() []time.Duration {
		v := make([]time.Duration, 1+len(procs))
		v[0], _ = selfCPU()
		for k, p := range procs {
			v[1+k] = procCPU(p.addr)
		}
		return v
	}
	alternate(*n, len(ts), func(i, j int) {
		before := snap()
		t0 := time.Now()
		c := dial(ts[j].addr, *sni)
		fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: %s\r\n\r\n", *host)
		if _, err := bufio.NewReader(c).ReadString('\n'); err != nil {
			check(fmt.Errorf("%s connection %d: %w", ts[j].addr, i, err))
		}
		lat[j] = append(lat[j], time.Since(t0))
		c.Close()
		for k, v := range snap() {
			cpu[j][k] += v - before[k]
		}
	})
	proto := "HTTP"
	if *sni != "" {
		proto = "TLS "
	}
	for j, t := range ts {
		slices.Sort(lat[j])
		fmt.Printf("setup %s %-6s %s n=%d p50=%v p99=%v", proto, t.label, t.addr, *n, ms(pct(lat[j], 0.5)), ms(pct(lat[j], 0.99)))
		if j > 0 {
			fmt.Printf("  (vs %s: p50 %+.2f ms, p99 %+.2f ms)", ts[0].label,
				msf(pct(lat[j], 0.5)-pct(lat[0], 0.5)), msf(pct(lat[j], 0.99)-pct(lat[0], 0.99)))
		}
		if len(procs) > 0 {
			fmt.Printf("  CPU µs/conn: client %.0f", float64(cpu[j][0].Microseconds())/float64(*n))
			for k, p := range procs {
				fmt.Printf(", %s %.0f", p.label, float64(cpu[j][1+k].Microseconds())/float64(*n))
			}
		}
		fmt.Println()
	}
}

func ms(d time.Duration) string   { return fmt.Sprintf("%.2fms", msf(d)) }
func msf(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

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
// or copy in the kernel, not in TLS) -runs times from each of -addr,
// alternating (ABBA), and prints each transfer's rate and CPU time per
// GiB: this process's (the client), and that of each -cpu process
// (label=pid, e.g. the world's server and the gate; read from
// /proc/PID/stat, which covers the softirq work the kernel does in their
// context). It ends with each target's median rate and its ratio to the
// first target's.
func benchThroughput(args []string) {
	fs := flag.NewFlagSet("throughput", flag.ExitOnError)
	addrs := fs.String("addr", "10.77.0.2:80", "label=host:port targets, comma-separated")
	host := fs.String("host", "bench.test", "HTTP Host")
	size := fs.Int64("bytes", 1<<30, "bytes to download")
	runs := fs.Int("runs", 1, "transfers per target")
	cpuOf := fs.String("cpu", "", "label=pid processes whose CPU time to report, comma-separated")
	fs.Parse(args)
	ts, procs := parseTargets(*addrs), optTargets(*cpuOf)
	rates := make([][]float64, len(ts))
	gib := float64(*size) / (1 << 30)
	alternate(*runs, len(ts), func(_, j int) {
		before := make([]time.Duration, len(procs))
		for k, p := range procs {
			before[k] = procCPU(p.addr)
		}
		self0, cs0 := selfCPU()
		d := download(ts[j].addr, *host, *size)
		rate := float64(*size) / (1 << 20) / d.Seconds()
		rates[j] = append(rates[j], rate)
		self1, cs1 := selfCPU()
		fmt.Printf("throughput %-6s %s time=%v rate=%.0f MiB/s  client context switches/MiB %.1f  CPU ms/GiB: client %.0f",
			ts[j].label, ts[j].addr, d.Round(time.Millisecond), rate, float64(cs1-cs0)/gib/1024, msf(self1-self0)/gib)
		for k, p := range procs {
			fmt.Printf(", %s %.0f", p.label, msf(procCPU(p.addr)-before[k])/gib)
		}
		fmt.Println()
	})
	med := make([]float64, len(ts))
	for j := range ts {
		slices.Sort(rates[j])
		med[j] = rates[j][len(rates[j])/2]
	}
	for j, t := range ts {
		fmt.Printf("throughput %-6s median %.0f MiB/s over %d", t.label, med[j], len(rates[j]))
		if j > 0 {
			fmt.Printf(" = %.0f %% of %s", 100*med[j]/med[0], ts[0].label)
		}
		fmt.Println()
	}
}

// download fetches size bytes from addr over HTTP and returns how long it
// took from the request to the last byte.
func download(addr, host string, size int64) time.Duration {
	c, err := net.DialTimeout("tcp", addr, 3*time.Second)
	check(err)
	defer c.Close()
	t0 := time.Now()
	fmt.Fprintf(c, "GET /bytes/%d HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", size, host)
	br := bufio.NewReaderSize(c, 1<<20)
	resp, err := http.ReadResponse(br, nil)
	check(err)
	got, err := io.Copy(io.Discard, resp.Body)
	check(err)
	d := time.Since(t0)
	if got != size {
		check(fmt.Errorf("%s: got %d bytes, want %d", addr, got, size))
	}
	return d
}

// selfCPU is this process's user+system CPU time so far, and its context
// switches (each a wait for data, or a preemption).
func selfCPU() (time.Duration, int64) {
	var ru syscall.Rusage
	check(syscall.Getrusage(syscall.RUSAGE_SELF, &ru))
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), ru.Nvcsw + ru.Nivcsw
}

// procCPU is process pid's user+system CPU time so far, all threads
// (/proc/PID/stat fields 14 and 15, in clock ticks of 10 ms).
func procCPU(pid string) time.Duration {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	check(err)
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	check(errors.Join(err1, err2))
	return time.Duration(ut+st) * 10 * time.Millisecond
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
