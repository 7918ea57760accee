//go:build linux

package testworld

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// Addresses of the world. The client's only route leads to the world
// namespace; nothing else exists on that link.
var (
	// ClientV4 and ClientV6 are the client namespace's addresses.
	ClientV4 = netip.MustParseAddr("10.77.0.100")
	ClientV6 = netip.MustParseAddr("fd77::100")
	// HostsV4 and HostsV6 are the world's addresses. The first of each
	// runs the DNS server, all run the TCP and UDP servers.
	HostsV4 = []netip.Addr{netip.MustParseAddr("10.77.0.1"), netip.MustParseAddr("10.77.0.2"), netip.MustParseAddr("10.77.0.3"), netip.MustParseAddr("10.77.0.4")}
	HostsV6 = []netip.Addr{netip.MustParseAddr("fd77::1"), netip.MustParseAddr("fd77::2"), netip.MustParseAddr("fd77::3"), netip.MustParseAddr("fd77::4")}
	// TCPPorts and UDPPorts are served on every world address.
	TCPPorts = []uint16{80, 443, 8080}
	UDPPorts = []uint16{443, 5000}
)

// DNSAddr is where the world's DNS server listens (also on HostsV4[1],
// HostsV6[0] and HostsV6[1], port 53, UDP and TCP).
var DNSAddr = netip.AddrPortFrom(HostsV4[0], 53)

// World is a client namespace wired to a world namespace.
type World struct {
	Client, Server string // namespace names
	DNS            *DNSServer
	Rec            *Recorder
}

// New builds a world for t and removes it when t ends, even on failure.
// The client's /etc/resolv.conf (as seen by `ip netns exec`) names DNSAddr.
// The caller must be root (gate with devboxtest.RequireRoot).
func New(t testing.TB) *World {
	t.Helper()
	id := randHex(4)
	w := &World{Client: "dbxc-" + id, Server: "dbxw-" + id, DNS: NewDNSServer(), Rec: &Recorder{}}
	vc, vw := "dbxc"+id, "dbxw"+id
	t.Cleanup(func() {
		w.DNS.Close()
		w.Rec.Close()
		exec.Command("ip", "netns", "del", w.Client).Run()
		exec.Command("ip", "netns", "del", w.Server).Run()
		os.RemoveAll(filepath.Join("/etc/netns", w.Client))
	})
	run := func(args ...string) {
		t.Helper()
		if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("testworld: %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	run("ip", "netns", "add", w.Client)
	run("ip", "netns", "add", w.Server)
	run("ip", "link", "add", vc, "netns", w.Client, "type", "veth", "peer", "name", vw, "netns", w.Server)
	inC := func(args ...string) { run(append([]string{"ip", "netns", "exec", w.Client}, args...)...) }
	inW := func(args ...string) { run(append([]string{"ip", "netns", "exec", w.Server}, args...)...) }
	inC("ip", "link", "set", "lo", "up")
	inW("ip", "link", "set", "lo", "up")
	inC("ip", "addr", "add", ClientV4.String()+"/24", "dev", vc)
	inC("ip", "-6", "addr", "add", ClientV6.String()+"/64", "dev", vc, "nodad")
	for _, a := range HostsV4 {
		inW("ip", "addr", "add", a.String()+"/24", "dev", vw)
	}
	for _, a := range HostsV6 {
		inW("ip", "-6", "addr", "add", a.String()+"/64", "dev", vw, "nodad")
	}
	inC("ip", "link", "set", vc, "up")
	inW("ip", "link", "set", vw, "up")
	// The client's one and only way out: the world.
	inC("ip", "route", "add", "default", "via", HostsV4[0].String())
	inC("ip", "-6", "route", "add", "default", "via", HostsV6[0].String())
	if err := os.MkdirAll(filepath.Join("/etc/netns", w.Client), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join("/etc/netns", w.Client, "resolv.conf"), []byte("nameserver "+DNSAddr.Addr().String()+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := InNS(w.Server, func() error { return w.listen() }); err != nil {
		t.Fatalf("testworld: start servers: %v", err)
	}
	return w
}

// listen opens every server socket; it runs inside the world namespace,
// and sockets stay in the namespace they were made in.
func (w *World) listen() error {
	dnsHosts := []netip.Addr{HostsV4[0], HostsV4[1], HostsV6[0], HostsV6[1]}
	for _, a := range dnsHosts {
		addr := netip.AddrPortFrom(a, 53).String()
		pc, err := net.ListenPacket("udp", addr)
		if err != nil {
			return err
		}
		l, err := net.Listen("tcp", addr)
		if err != nil {
			return err
		}
		w.DNS.Serve(pc, l)
	}
	for _, a := range append(append([]netip.Addr(nil), HostsV4...), HostsV6...) {
		for _, p := range TCPPorts {
			l, err := net.Listen("tcp", netip.AddrPortFrom(a, p).String())
			if err != nil {
				return err
			}
			w.Rec.ServeTCP(l)
		}
		for _, p := range UDPPorts {
			pc, err := net.ListenPacket("udp", netip.AddrPortFrom(a, p).String())
			if err != nil {
				return err
			}
			w.Rec.ServeUDP(pc)
		}
	}
	return nil
}

// InNS runs fn on a thread switched into the named network namespace.
// Sockets fn creates stay in that namespace. fn must not start goroutines
// that open sockets or resolve names: they would run in the caller's
// namespace.
func InNS(name string, fn func() error) error {
	runtime.LockOSThread()
	orig, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		runtime.UnlockOSThread()
		return err
	}
	defer orig.Close()
	target, err := os.Open(filepath.Join("/run/netns", name))
	if err != nil {
		runtime.UnlockOSThread()
		return err
	}
	defer target.Close()
	if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("setns %s: %w", name, err)
	}
	ferr := fn()
	if err := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); err != nil {
		// Leave the thread locked: the runtime discards it when the
		// goroutine exits, rather than reuse it in the wrong namespace.
		return fmt.Errorf("setns back: %w", err)
	}
	runtime.UnlockOSThread()
	return ferr
}

// Command returns a command that runs argv inside the client namespace
// (through `ip netns exec`, so the whole process and its children are there).
func (w *World) Command(ctx context.Context, argv ...string) *exec.Cmd {
	return exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", w.Client}, argv...)...)
}

func randHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// AddHost gives the world namespace one more address on its link, for
// servers a test opens itself (InNS(w.Server, …)).
func (w *World) AddHost(t testing.TB, a netip.Addr) {
	t.Helper()
	args := []string{"netns", "exec", w.Server, "ip", "addr", "add", a.String() + "/24", "dev", "dbxw" + strings.TrimPrefix(w.Server, "dbxw-")}
	if a.Is6() {
		args = []string{"netns", "exec", w.Server, "ip", "-6", "addr", "add", a.String() + "/64", "dev", "dbxw" + strings.TrimPrefix(w.Server, "dbxw-"), "nodad"}
	}
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		t.Fatalf("testworld: ip %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}
