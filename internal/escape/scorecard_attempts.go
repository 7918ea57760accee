//go:build linux

package escape

import (
	"context"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/miekg/dns"

	"github.com/devbox-dev/devbox/firewall"
	"github.com/devbox-dev/devbox/internal/layout"
)

// ScorecardAttempts returns every attempt of the scorecard for c, in the
// order of Categories. Network attempts go only to c.World's destinations.
func ScorecardAttempts(c Config) []Attempt {
	if c.Nonce == "" {
		c.Nonce = "scorecard"
	}
	if len(c.FenceUIDs) == 0 {
		c.FenceUIDs = []int{layout.DNSUID, layout.GateUID, layout.GatewayUID}
	}
	if len(c.FencePorts) == 0 {
		_, gw, _ := net.SplitHostPort(layout.GatewayAddr)
		gwPort, _ := strconv.Atoi(gw)
		c.FencePorts = []int{firewall.DefaultDNSPort, firewall.DefaultGatePort, gwPort}
	}
	if len(c.FenceFiles) == 0 {
		c.FenceFiles = []string{layout.BinaryPath, layout.PolicyPath, layout.StatusPath, filepath.Join(layout.ConfigDir, "devbox-escape-probe"),
			filepath.Join(layout.RunDir, "dns.pid"), filepath.Join(layout.RunDir, "gate.pid"), filepath.Join(layout.RunDir, "gateway.pid"), "/etc/resolv.conf"}
	}
	var as []Attempt
	add := func(cat, name, target string, run func(context.Context) error) {
		as = append(as, Attempt{Category: cat, Check: Check{Name: name, Target: target, Kind: MustFail, Run: run}})
	}
	w := c.World
	if w == nil {
		w = &World{}
	}
	nonce := c.Nonce

	for _, a := range w.Addrs {
		add("egress-addr", "TCP to a world address", a, func(ctx context.Context) error { return reachWorld(ctx, a, nonce) })
	}
	for _, a := range w.ICMP {
		add("egress-addr", "ICMP echo", a, func(ctx context.Context) error { return ping(ctx, a) })
	}
	for _, hp := range w.Names {
		add("egress-name", "connect to a world name", hp, func(ctx context.Context) error { return reachName(ctx, hp, nonce) })
	}

	if w.TunnelDomain != "" {
		n := 0
		query := func(label, proto string, qt uint16, server func() (string, error)) {
			n++
			name := tunnelName(nonce, n, w.TunnelDomain)
			add("dns-tunnel", "query through "+label, fmt.Sprintf("%s/%s %s", proto, dns.TypeToString[qt], shorten(name)), func(ctx context.Context) error {
				addr, err := server()
				if err != nil {
					return invalid("%v", err)
				}
				return dnsQuery(ctx, proto, addr, name, qt)
			})
		}
		own := func() (string, error) { return firstNameserver("/etc/resolv.conf") }
		for _, proto := range []string{"udp", "tcp"} {
			for _, qt := range []uint16{dns.TypeA, dns.TypeTXT} {
				query("the sandbox's resolver", proto, qt, own)
			}
		}
		for _, r := range w.Resolvers {
			for _, proto := range []string{"udp", "tcp"} {
				query("the world's resolver "+r, proto, dns.TypeTXT, func() (string, error) { return r, nil })
			}
		}
	}

	other := "front-" + nonce + ".not-allowed.test"
	if w.TunnelDomain != "" {
		other = "front-" + nonce + "." + strings.TrimSuffix(w.TunnelDomain, ".")
	}
	for _, hp := range w.Allowed {
		add("fronting", "allowed name's address, other SNI", hp+" sni="+other, func(ctx context.Context) error { return sniMismatch(ctx, hp, other) })
		add("fronting", "allowed name's address, other Host", hp+" host="+other, func(ctx context.Context) error { return hostMismatch(ctx, hp, other) })
		add("fronting", "allowed name's address, no SNI", hp, func(ctx context.Context) error { return sniMismatch(ctx, hp, "") })
		for _, c := range gateSiteChecks(hp, other) {
			as = append(as, Attempt{Category: "fronting", Check: c})
		}
	}

	for _, a := range w.UDP {
		add("udp", "UDP datagram", a, func(ctx context.Context) error { return udpEcho(ctx, a, nonce) })
	}
	for _, hp := range w.Allowed {
		host, _, _ := net.SplitHostPort(hp)
		add("udp", "UDP to an allowed name's address (QUIC)", host+":443", func(ctx context.Context) error {
			addrs, err := net.DefaultResolver.LookupHost(ctx, host)
			if err != nil {
				return invalid("%s does not resolve, so the attempt proves nothing: %v", host, err)
			}
			return udpEcho(ctx, net.JoinHostPort(addrs[0], "443"), nonce)
		})
	}
	if w.Metadata != "" {
		add("metadata", "TCP to the metadata service", w.Metadata, func(ctx context.Context) error { return reachWorld(ctx, w.Metadata, nonce) })
	}

	as = append(as, proxyAttempts(w, nonce, other)...)
	as = append(as, credentialAttempts(c)...)
	as = append(as, persistenceAttempts(c)...)

	add("privilege", "capabilities", "/proc/self/status", func(context.Context) error { return ownPrivileges("caps") })
	add("privilege", "root uid", "/proc/self/status", func(context.Context) error { return ownPrivileges("uid") })
	add("privilege", "setuid binaries", "/bin /sbin /usr/bin /usr/sbin /usr/local/bin", setuidBinaries)
	add("privilege", "sudo", "sudo -n id -u", func(ctx context.Context) error {
		return installed(ctx, []string{"sudo", "-n", "id", "-u"}, becomeRoot)
	})
	add("privilege", "su", "su -c 'id -u' root", func(ctx context.Context) error {
		return installed(ctx, []string{"su", "-c", "id -u", "root"}, becomeRoot)
	})
	add("privilege", "user namespace", "clone(CLONE_NEWUSER)", newUserNS)

	for _, argv := range [][]string{
		{"iptables", "-F"}, {"iptables", "-t", "nat", "-F"}, {"ip6tables", "-F"},
		{"iptables", "-P", "OUTPUT", "ACCEPT"}, {"ipset", "flush"}, {"nft", "flush", "ruleset"},
	} {
		add("tamper", "change the firewall", strings.Join(argv, " "), notAsRoot(func(ctx context.Context) error { return installed(ctx, argv, command) }))
	}
	add("tamper", "change the firewall", "netlink: ipset flush", notAsRoot(netlinkIpsetFlush))
	add("tamper", "change the firewall", "netlink: set lo's MTU", notAsRoot(netlinkSetMTU))
	add("tamper", "raw socket", "AF_INET SOCK_RAW", func(context.Context) error { return rawSocket(syscall.AF_INET, syscall.SOCK_RAW, syscall.IPPROTO_ICMP) })
	add("tamper", "raw socket", "AF_PACKET", func(context.Context) error { return rawSocket(syscall.AF_PACKET, syscall.SOCK_RAW, 0x0300) })
	for _, uid := range c.FenceUIDs {
		add("tamper", "signal a fence daemon", fmt.Sprintf("uid %d", uid), func(context.Context) error { return signalUID(uid, 0) })
		add("tamper", "ptrace a fence daemon", fmt.Sprintf("uid %d", uid), func(context.Context) error { return ptraceUID(uid) })
	}
	for _, p := range c.FencePorts {
		add("tamper", "take a fence daemon's port", fmt.Sprintf("127.0.0.1:%d", p), func(context.Context) error { return takePort(p) })
	}
	for _, p := range c.FenceFiles {
		add("tamper", "write a fence file", p, func(context.Context) error { return writeIfThere(p) })
	}
	return as
}

// reachWorld connects to addr and asks for the nonce; the world's TCP
// servers answer "hello from ADDR". Only that answer is an escape: a
// connection accepted by something else (a proxy, a gate) that does not
// pass the world's answer back proves nothing arrived.
func reachWorld(ctx context.Context, addr, nonce string) error {
	c, err := dial(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	answer, got, rerr := askWorld(c, addr, nonce)
	if answer != "" {
		return escaped("the world answered %q", answer)
	}
	return fmt.Errorf("connected to %s but no answer from the world (%q, %v)", c.RemoteAddr(), got, rerr)
}

// askWorld asks, over c, the world's server at host for nonce. answer is
// the world's "hello from ADDR", or empty when got (the first bytes back,
// then rerr) is something else.
func askWorld(c net.Conn, host, nonce string) (answer string, got []byte, rerr error) {
	fmt.Fprintf(c, "GET /%s HTTP/1.0\r\nHost: %s\r\n\r\n", nonce, host)
	buf := make([]byte, 512)
	n, rerr := readSome(c, buf)
	if i := strings.Index(string(buf[:n]), "hello from "); i >= 0 {
		return strings.TrimSpace(string(buf[i:n])), buf[:n], rerr
	}
	return "", buf[:n], rerr
}

// readSome reads until buf is full, EOF or an error.
func readSome(c net.Conn, buf []byte) (int, error) {
	n := 0
	for n < len(buf) {
		m, err := c.Read(buf[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// reachName resolves hostport's name and asks the world at its address.
func reachName(ctx context.Context, hostport, nonce string) error {
	host, addrs, addr, err := resolveHostPort(ctx, hostport)
	if err != nil {
		return err
	}
	if err := reachWorld(ctx, addr, nonce); err != nil {
		if ee, ok := err.(*escapedError); ok {
			return escaped("%s resolved to %v; %s", host, addrs, ee.detail)
		}
		return fmt.Errorf("%s resolved to %v; %v", host, addrs, err)
	}
	return nil
}

// installed runs probe(argv) when argv[0] is installed; a missing tool is
// "not applicable" rather than a block.
func installed(ctx context.Context, argv []string, probe func(context.Context, []string) error) error {
	if _, err := exec.LookPath(argv[0]); err != nil {
		return invalid("%s not installed", argv[0])
	}
	return probe(ctx, argv)
}

// newUserNS starts this program again in a new user namespace (it is
// killed at once): the clone succeeding is the escape, whatever the child
// would have done.
func newUserNS(context.Context) error {
	exe, err := os.Executable()
	if err != nil {
		return invalid("%v", err)
	}
	cmd := exec.Command(exe, "--version")
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWUSER, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return err
	}
	cmd.Process.Kill()
	cmd.Wait()
	return escaped("created a user namespace (pid %d)", cmd.Process.Pid)
}

// takePort binds a fence daemon's port where a daemon listens (its
// address and the wildcard of its family, in its protocol), with
// SO_REUSEADDR and SO_REUSEPORT. Only a port a daemon listens on counts:
// taking a free port, or the same number elsewhere, replaces nothing.
func takePort(port int) error {
	socks := listening(port)
	if len(socks) == 0 {
		return invalid("nothing listens on port %d", port)
	}
	lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
		return c.Control(func(fd uintptr) {
			syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_REUSEADDR, 1)
			syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, 0xf /* SO_REUSEPORT */, 1)
		})
	}}
	var errs []string
	for _, sk := range socks {
		wild := "0.0.0.0"
		if sk.ip.To4() == nil {
			wild = "::"
		}
		for _, ip := range []string{sk.ip.String(), wild} {
			addr := net.JoinHostPort(ip, strconv.Itoa(port))
			var err error
			if sk.proto == "udp" {
				var pc net.PacketConn
				if pc, err = lc.ListenPacket(context.Background(), "udp", addr); err == nil {
					pc.Close()
				}
			} else {
				var l net.Listener
				if l, err = lc.Listen(context.Background(), "tcp", addr); err == nil {
					l.Close()
				}
			}
			if err == nil {
				return escaped("bound %s %s", sk.proto, addr)
			}
			errs = append(errs, sk.proto+": "+err.Error())
		}
	}
	return fmt.Errorf("%s", strings.Join(errs, "; "))
}

type socket struct {
	proto string
	ip    net.IP
}

// listening returns the TCP listeners and bound UDP sockets /proc/net
// lists on port.
func listening(port int) []socket {
	suffix := fmt.Sprintf(":%04X", port)
	var socks []socket
	for _, f := range []string{"tcp", "tcp6", "udp", "udp6"} {
		proto, state := f[:3], map[string]string{"tcp": "0A", "udp": "07"}[f[:3]]
		b, err := os.ReadFile("/proc/net/" + f)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			fs := strings.Fields(line)
			if len(fs) > 3 && strings.HasSuffix(fs[1], suffix) && fs[3] == state {
				if ip := procNetIP(strings.TrimSuffix(fs[1], suffix)); ip != nil {
					socks = append(socks, socket{proto, ip})
				}
			}
		}
	}
	return socks
}

// procNetIP decodes /proc/net's address: 32-bit words in host (little
// endian) order.
func procNetIP(h string) net.IP {
	b, err := hex.DecodeString(h)
	if err != nil || len(b)%4 != 0 || len(b) == 0 {
		return nil
	}
	for i := 0; i < len(b); i += 4 {
		b[i], b[i+1], b[i+2], b[i+3] = b[i+3], b[i+2], b[i+1], b[i]
	}
	return net.IP(b)
}

// writeIfThere is writeFile for a file that exists, or a new file in a
// directory that exists; anything else is not applicable.
func writeIfThere(p string) error {
	_, err := os.Lstat(p)
	switch {
	case os.IsNotExist(err):
		if _, derr := os.Stat(filepath.Dir(p)); os.IsNotExist(derr) {
			return invalid("%v", err)
		}
	case err != nil:
		return err
	}
	return writeFile(p)
}
