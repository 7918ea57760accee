// Command fwbench is the firewall benchmarks' load generator: "dns" sends
// queries at a server for a duration and prints qps and latency
// percentiles; "conn" times TCP connection setup. For the name gate
// (scripts/bench/gate.sh): "serve" runs the world's HTTP(S) servers,
// "setup" times connect-to-first-answer, "throughput" times a download,
// "idle" holds connections open. The scripts run it inside test
// namespaces; it only talks to the addresses it is given.
package main

import (
	"flag"
	"fmt"
	"net"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/miekg/dns"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: fwbench dns|conn|serve|setup|throughput|idle [flags]")
		os.Exit(2)
	}
	mode, ok := map[string]func(args []string){
		"dns":        benchDNS,
		"conn":       benchConn,
		"serve":      serveGate,
		"setup":      benchSetup,
		"throughput": benchThroughput,
		"idle":       holdIdle,
	}[os.Args[1]]
	if !ok {
		fmt.Fprintln(os.Stderr, "fwbench: unknown mode", os.Args[1])
		os.Exit(2)
	}
	mode(os.Args[2:])
}

func pct(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	return d[min(len(d)-1, int(float64(len(d))*p))]
}

func benchDNS(args []string) {
	fs := flag.NewFlagSet("dns", flag.ExitOnError)
	server := fs.String("server", "127.0.0.1:53535", "server address")
	name := fs.String("name", "api.test", "name to query (A)")
	workers := fs.Int("c", 16, "concurrent clients, each with its own socket, one query in flight")
	dur := fs.Duration("d", 3*time.Second, "duration")
	fs.Parse(args)
	var (
		mu   sync.Mutex
		lat  []time.Duration
		errs int
		wg   sync.WaitGroup
	)
	stop := time.Now().Add(*dur)
	for w := 0; w < *workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := &dns.Client{Timeout: time.Second}
			conn, err := c.Dial(*server)
			if err != nil {
				mu.Lock()
				errs++
				mu.Unlock()
				return
			}
			defer conn.Close()
			m := new(dns.Msg)
			m.SetQuestion(dns.Fqdn(*name), dns.TypeA)
			var mine []time.Duration
			bad := 0
			for time.Now().Before(stop) {
				m.Id = dns.Id()
				t0 := time.Now()
				r, _, err := c.ExchangeWithConn(m, conn)
				if err != nil || r.Rcode != dns.RcodeSuccess || len(r.Answer) == 0 {
					bad++
					continue
				}
				mine = append(mine, time.Since(t0))
			}
			mu.Lock()
			lat = append(lat, mine...)
			errs += bad
			mu.Unlock()
		}()
	}
	wg.Wait()
	slices.Sort(lat)
	fmt.Printf("dns server=%s c=%d queries=%d errors=%d qps=%.0f p50=%v p99=%v\n",
		*server, *workers, len(lat), errs, float64(len(lat))/dur.Seconds(), pct(lat, 0.50), pct(lat, 0.99))
	if len(lat) == 0 {
		os.Exit(1)
	}
}

func benchConn(args []string) {
	fs := flag.NewFlagSet("conn", flag.ExitOnError)
	addr := fs.String("addr", "10.77.0.2:80", "TCP address")
	n := fs.Int("n", 2000, "connections, one at a time")
	fs.Parse(args)
	var lat []time.Duration
	for i := 0; i < *n; i++ {
		t0 := time.Now()
		c, err := net.DialTimeout("tcp", *addr, 2*time.Second)
		if err != nil {
			fmt.Fprintln(os.Stderr, "fwbench:", err)
			os.Exit(1)
		}
		lat = append(lat, time.Since(t0))
		c.Close()
	}
	slices.Sort(lat)
	fmt.Printf("conn addr=%s n=%d p50=%v p99=%v\n", *addr, *n, pct(lat, 0.5), pct(lat, 0.99))
}
