//go:build linux

package firewall

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/devbox-dev/devbox/internal/devboxtest"
	"github.com/devbox-dev/devbox/internal/layout"
)

// BenchmarkGateConn measures what one connection costs the name gate: a
// client in the world's client namespace opens b.N connections through
// the gate one at a time, as ../shared/bench-peers' setup does (connect,
// TLS handshake, GET /, the first line of the answer, close), and the
// gate's process is read from /proc before and after. Reported per
// connection: the gate's CPU time (gate-µs/conn, utime+stime, what
// bench-peers calls "proxy CPU µs/conn"), its context switches
// (gate-cs/conn: the wake-ups of its threads), the client's p50 setup
// time (p50-µs) and CPU time (client-µs/conn, the process's start
// included). ns/op includes the client process's start.
//
//	scripts/test -run '^$' -bench BenchmarkGateConn -benchtime 2000x ./firewall/
//
// DEVBOX_GATE_CPUPROFILE=FILE also writes the gate's CPU profile (of the
// whole run, written when the gate stops at the end).
func BenchmarkGateConn(b *testing.B) {
	if !devboxtest.E2E() {
		b.Skip("needs DEVBOX_E2E (root, namespaces)")
	}
	for _, proto := range []string{"tls", "http"} {
		b.Run(proto, func(b *testing.B) {
			g := newGateFence(b, Config{Allow: []Destination{allowName("good.test")}}, gateProfileEnv(b)...)
			addr, ca := ap(hostGate, 443).String(), g.caFile
			if proto == "http" {
				addr, ca = ap(hostGate, 80).String(), "-"
			}
			pid := g.apply.GatePID
			// For perf record -p while it runs.
			fmt.Fprintf(os.Stderr, "%s: gate pid %d\n", b.Name(), pid)
			// The name's binding (Warm made it, unless its lookup timed
			// out under load), then one connection: the gate's first one
			// pays for its bindings lookup and its first buffers.
			if rcode, answers := g.lookup("good.test", "A"); rcode != "NOERROR" {
				b.Fatalf("good.test: %s %v", rcode, answers)
			}
			if out, ok := g.probe("setup", proto, addr, "good.test", ca, "1"); !ok {
				b.Fatalf("warm-up: %s", out)
			}
			cpu0, cs0 := procCPU(b, pid), procSwitches(b, pid)
			b.ResetTimer()
			out, ok := g.probe("setup", proto, addr, "good.test", ca, strconv.Itoa(b.N))
			b.StopTimer()
			if !ok {
				b.Fatalf("setup: %s", out)
			}
			// The gate's last close may still be under way.
			time.Sleep(50 * time.Millisecond)
			cpu, cs := procCPU(b, pid)-cpu0, procSwitches(b, pid)-cs0
			var p50, p99, client float64
			if _, err := fmt.Sscanf(out, "ok p50=%f p99=%f cpu=%f", &p50, &p99, &client); err != nil {
				b.Fatalf("setup answered %q", out)
			}
			b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "gate-µs/conn")
			b.ReportMetric(float64(cs)/float64(b.N), "gate-cs/conn")
			b.ReportMetric(p50, "p50-µs")
			// The client's CPU per connection (its TLS handshakes, the
			// same work in every run) shows how fast the machine was.
			b.ReportMetric(client, "client-µs/conn")
		})
	}
}

// gateProfileEnv passes DEVBOX_GATE_ENV (extra environment for the gate:
// GOMAXPROCS, GODEBUG) and DEVBOX_GATE_CPUPROFILE to the gate, the
// profile in a file the gate's uid may write.
func gateProfileEnv(b *testing.B) []string {
	env := []string{"DEVBOX_GATE_ENV=" + os.Getenv("DEVBOX_GATE_ENV")}
	p := os.Getenv("DEVBOX_GATE_CPUPROFILE")
	if p == "" {
		return env
	}
	p, _ = filepath.Abs(p + "." + filepath.Base(b.Name()))
	if err := os.WriteFile(p, nil, 0o644); err != nil {
		b.Fatal(err)
	}
	if err := os.Chown(p, layout.GateUID, layout.GateUID); err != nil {
		b.Fatal(err)
	}
	return append(env, "DEVBOX_GATE_CPUPROFILE="+p)
}

// procCPU is a process's user + system time, all its threads, from
// /proc/PID/stat (in clock ticks of 10 ms: read over many connections).
func procCPU(tb testing.TB, pid int) time.Duration {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		tb.Fatal(err)
	}
	// Fields after the command's closing parenthesis: state is field 3,
	// utime 14 and stime 15.
	f := strings.Fields(string(raw[strings.LastIndexByte(string(raw), ')')+2:]))
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond
}

// procSwitches sums the voluntary and involuntary context switches of a
// process's threads.
func procSwitches(tb testing.TB, pid int) int64 {
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/status", pid))
	if err != nil || len(tasks) == 0 {
		tb.Fatalf("threads of %d: %v", pid, err)
	}
	var n int64
	for _, t := range tasks {
		raw, err := os.ReadFile(t)
		if err != nil {
			continue // a thread that just exited
		}
		for _, l := range strings.Split(string(raw), "\n") {
			if strings.HasSuffix(strings.SplitN(l, ":", 2)[0], "ctxt_switches") {
				v, _ := strconv.ParseInt(strings.TrimSpace(strings.SplitN(l, ":", 2)[1]), 10, 64)
				n += v
			}
		}
	}
	return n
}

// setupConns is the probe "setup tls|http ADDR NAME CAFILE|- N": N
// connections one at a time, each connect → (TLS handshake →) GET / →
// first answer line → close, as bench-peers' setup; it prints the p50 and
// p99 in µs.
func setupConns(proto, addr, name, caFile string, n int, fail func(error) int) int {
	var conf *tls.Config
	if proto == "tls" {
		var err error
		if conf, err = probeTLSConfig(name, caFile); err != nil {
			return fail(err)
		}
	}
	lat := make([]time.Duration, 0, n)
	for i := 0; i < n; i++ {
		t0 := time.Now()
		var c net.Conn
		var err error
		d := &net.Dialer{Timeout: 3 * time.Second}
		if conf != nil {
			c, err = tls.DialWithDialer(d, "tcp", addr, conf)
		} else {
			c, err = d.Dial("tcp", addr)
		}
		if err != nil {
			return fail(fmt.Errorf("connection %d: %w", i, err))
		}
		c.SetDeadline(time.Now().Add(3 * time.Second))
		fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: %s\r\n\r\n", name)
		if _, err := bufio.NewReader(c).ReadString('\n'); err != nil {
			return fail(fmt.Errorf("connection %d: %w", i, err))
		}
		lat = append(lat, time.Since(t0))
		c.Close()
	}
	slices.Sort(lat)
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	cpu := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	fmt.Printf("ok p50=%.1f p99=%.1f cpu=%.1f\n", float64(lat[n/2].Nanoseconds())/1e3, float64(lat[n*99/100].Nanoseconds())/1e3, float64(cpu.Nanoseconds())/1e3/float64(n))
	return 0
}
