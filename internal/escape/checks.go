//go:build linux

package escape

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"github.com/devbox-dev/devbox/internal/gitaudit"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/devbox-dev/devbox/internal/resolvconf"
	"github.com/miekg/dns"
	"golang.org/x/net/icmp"
	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"

	"github.com/devbox-dev/devbox/internal/layout"
)

// Targets names the world the suite runs against. Every address comes from
// here: the suite has no built-in destination except the well-known cloud
// metadata address, which is unreachable on a test network anyway.
type Targets struct {
	// AllowedURLs must answer with a 2xx status (HTTP GET).
	AllowedURLs []string
	// AllowedNames must resolve through the container's resolver.
	AllowedNames []string
	// DeniedNames are host:port pairs the policy does not allow.
	DeniedNames []string
	// DeniedAddrs are ip:port pairs not in the policy.
	DeniedAddrs []string
	// OtherPorts are allowed addresses on a port the policy does not allow.
	OtherPorts []string
	// Resolvers are DNS servers (ip:port) other than the container's; the
	// suite sends them queries for non-allowed names.
	Resolvers []string
	// IPv6 are [addr]:port TCP targets; IPv6 egress must be blocked.
	IPv6 []string
	// ICMP are addresses to ping (v4 or v6).
	ICMP []string
	// UDP are ip:port targets (QUIC on 443 and others) that echo datagrams.
	UDP []string
	// GatedNames are host:port pairs of allowed names (on an allowed
	// port): the suite connects to their addresses asking, in the TLS SNI
	// and in the HTTP Host, for a name the policy does not allow. The name
	// gate must refuse both before any byte reaches the server. The
	// gate's adversary cases (gatesites.go: a HelloRetryRequest, SNI
	// lists, request lines and Hosts servers read differently, a second
	// request on a kept-alive connection) need a site recorder there
	// (worldd -sites), which says in its answers what it read.
	GatedNames []string
	// GatedUDP are host:port pairs of allowed names with a UDP echo server
	// on an allowed port: UDP to a name's address (QUIC) must be blocked
	// (the policy leaves network.quic off).
	GatedUDP []string
	// Gateway is the credential gateway's address ("" skips its checks):
	// requests it must refuse itself, never forward.
	Gateway string
	// ProtectedNames are host:port pairs of names only the credential
	// gateway may reach (credential hosts and their services' siblings).
	ProtectedNames []string
	// Metadata is the cloud metadata endpoint ("" skips the check; the
	// command passes 169.254.169.254:80 only when told, since on a host
	// outside a test network it is a real address).
	Metadata string
	// TunnelDomain is a domain the policy does not allow, used to build
	// DNS-tunnelling queries.
	TunnelDomain string
	// Nonce is put in every tunnelling query name, so the world's query log
	// can be searched for it: a query that arrives there escaped.
	Nonce string
	// ResolvConf is read for the container's own resolver (default /etc/resolv.conf).
	ResolvConf string
	// DNSFilterUID is the DNS filter's uid (default layout.DNSUID).
	DNSFilterUID int
	// DNSFilterAddrs are the addresses the DNS filter listens on; binding
	// them would replace it.
	DNSFilterAddrs []string
	// Workspace is the repository mounted in the container; its .git/hooks,
	// .git/config and .devcontainer must be read-only.
	Workspace string
	// ReadDenied are files the agent's user must not be able to read.
	ReadDenied []string
	// FenceFiles are files root uses to build the fence; the agent's user
	// must not be able to change them.
	FenceFiles []string
}

// Checks returns every check for t, escape attempts first, then the
// allowed destinations.
func Checks(t Targets) []Check {
	if t.ResolvConf == "" {
		t.ResolvConf = "/etc/resolv.conf"
	}
	if t.DNSFilterUID == 0 {
		t.DNSFilterUID = layout.DNSUID
	}
	var cs []Check
	add := func(name, target string, k Kind, run func(context.Context) error) {
		cs = append(cs, Check{Name: name, Target: target, Kind: k, Run: run})
	}
	for _, hp := range t.DeniedNames {
		add("connect to a non-allowed name", hp, MustFail, func(ctx context.Context) error { return connectName(ctx, hp) })
	}
	for _, a := range t.DeniedAddrs {
		add("connect to a non-allowed IP", a, MustFail, func(ctx context.Context) error { return connectTCP(ctx, a) })
	}
	for _, a := range t.OtherPorts {
		add("allowed IP, other port", a, MustFail, func(ctx context.Context) error { return connectTCP(ctx, a) })
	}
	for _, hp := range t.ProtectedNames {
		add("connect to a name only the credential gateway may reach", hp, MustFail, func(ctx context.Context) error { return connectProtected(ctx, hp) })
	}
	if t.Gateway != "" {
		for _, a := range gatewayAttempts {
			add(a.name, t.Gateway, MustFail, func(ctx context.Context) error { return gatewayRefuses(ctx, t.Gateway, a.request) })
		}
	}
	if t.Metadata != "" {
		add("metadata service", t.Metadata, MustFail, func(ctx context.Context) error { return connectTCP(ctx, t.Metadata) })
	}
	for _, a := range t.IPv6 {
		add("IPv6 egress", a, MustFail, func(ctx context.Context) error { return connectTCP(ctx, a) })
	}
	for _, a := range t.ICMP {
		add("ICMP echo", a, MustFail, func(ctx context.Context) error { return ping(ctx, a) })
	}
	for _, a := range t.UDP {
		add("UDP datagram (QUIC)", a, MustFail, func(ctx context.Context) error { return udpEcho(ctx, a, t.Nonce) })
	}
	// The name gate: an allowed name's address, asked for another site.
	other := "gate-" + t.Nonce + ".not-allowed.invalid"
	if t.TunnelDomain != "" {
		other = "gate-" + t.Nonce + "." + strings.TrimSuffix(t.TunnelDomain, ".")
	}
	for _, hp := range t.GatedNames {
		add("allowed name's address, other SNI", hp+" sni="+other, MustFail, func(ctx context.Context) error { return sniMismatch(ctx, hp, other) })
		add("allowed name's address, other Host", hp+" host="+other, MustFail, func(ctx context.Context) error { return hostMismatch(ctx, hp, other) })
		add("allowed name's address, no SNI", hp, MustFail, func(ctx context.Context) error { return sniMismatch(ctx, hp, "") })
		cs = append(cs, gateSiteChecks(hp, other)...)
	}
	for _, hp := range t.GatedUDP {
		add("UDP to an allowed name (QUIC)", hp, MustFail, func(ctx context.Context) error {
			host, port, err := net.SplitHostPort(hp)
			if err != nil {
				return invalid("%q: %v", hp, err)
			}
			addrs, err := net.DefaultResolver.LookupHost(ctx, host)
			if err != nil {
				return invalid("%s does not resolve, so the check proves nothing: %v", host, err)
			}
			return udpEcho(ctx, net.JoinHostPort(addrs[0], port), t.Nonce)
		})
	}

	// DNS: the container's resolver and other resolvers, UDP and TCP,
	// plain and tunnelling-shaped queries, all for non-allowed names.
	if t.TunnelDomain != "" {
		own := func() (string, error) { return firstNameserver(t.ResolvConf) }
		servers := []struct {
			label string
			addr  func() (string, error)
		}{{"container resolver", own}}
		for _, r := range t.Resolvers {
			servers = append(servers, struct {
				label string
				addr  func() (string, error)
			}{r, func() (string, error) { return r, nil }})
		}
		n := 0
		for _, s := range servers {
			for _, proto := range []string{"udp", "tcp"} {
				for _, qt := range []uint16{dns.TypeA, dns.TypeTXT} {
					n++
					name := tunnelName(t.Nonce, n, t.TunnelDomain)
					what := "DNS to another resolver"
					if s.label == "container resolver" {
						what = "DNS tunnelling"
					}
					target := fmt.Sprintf("%s %s/%s %s", s.label, proto, dns.TypeToString[qt], shorten(name))
					s, proto, qt := s, proto, qt
					add(what, target, MustFail, func(ctx context.Context) error {
						addr, err := s.addr()
						if err != nil {
							return invalid("%v", err)
						}
						return dnsQuery(ctx, proto, addr, name, qt)
					})
				}
			}
		}
	}

	// Changing the fence.
	for _, argv := range [][]string{
		{"iptables", "-F"}, {"iptables", "-t", "nat", "-F"}, {"ip6tables", "-F"},
		{"iptables", "-P", "OUTPUT", "ACCEPT"}, {"ipset", "flush"}, {"nft", "flush", "ruleset"},
	} {
		add("change the firewall", strings.Join(argv, " "), MustFail, notAsRoot(func(ctx context.Context) error { return command(ctx, argv) }))
	}
	add("change the firewall", "netlink: ipset flush", MustFail, notAsRoot(netlinkIpsetFlush))
	add("change the firewall", "netlink: set lo's MTU", MustFail, notAsRoot(netlinkSetMTU))
	add("raw socket", "AF_INET SOCK_RAW", MustFail, func(context.Context) error { return rawSocket(syscall.AF_INET, syscall.SOCK_RAW, syscall.IPPROTO_ICMP) })
	add("raw socket", "AF_INET6 SOCK_RAW", MustFail, func(context.Context) error {
		return rawSocket(syscall.AF_INET6, syscall.SOCK_RAW, syscall.IPPROTO_ICMPV6)
	})
	add("raw socket", "AF_PACKET", MustFail, func(context.Context) error { return rawSocket(syscall.AF_PACKET, syscall.SOCK_RAW, 0x0300) })
	add("kill the DNS filter", fmt.Sprintf("uid %d", t.DNSFilterUID), MustFail, func(context.Context) error { return signalUID(t.DNSFilterUID, syscall.SIGKILL) })
	add("ptrace the DNS filter", fmt.Sprintf("uid %d", t.DNSFilterUID), MustFail, func(context.Context) error { return ptraceUID(t.DNSFilterUID) })
	for _, a := range t.DNSFilterAddrs {
		add("replace the DNS filter", a, MustFail, func(context.Context) error { return bindBoth(a) })
	}

	// Privileges.
	add("capabilities", "/proc/self/status", MustFail, func(context.Context) error { return ownPrivileges("caps") })
	add("no_new_privs", "/proc/self/status", MustFail, func(context.Context) error { return ownPrivileges("nnp") })
	add("root uid", "/proc/self/status", MustFail, func(context.Context) error { return ownPrivileges("uid") })
	add("setuid binaries", "/bin /sbin /usr/bin /usr/sbin /usr/local/bin", MustFail, setuidBinaries)
	add("sudo", "sudo -n id -u", MustFail, func(ctx context.Context) error { return becomeRoot(ctx, []string{"sudo", "-n", "id", "-u"}) })
	add("su", "su -c 'id -u' root", MustFail, func(ctx context.Context) error {
		return becomeRoot(ctx, []string{"su", "-c", "id -u", "root"})
	})

	// Files.
	if t.Workspace != "" {
		ws := t.Workspace
		for _, rel := range []string{".git/hooks/pre-commit", ".git/config", ".devcontainer/devcontainer.json", ".devcontainer/devbox-escape-probe"} {
			p := filepath.Join(ws, rel)
			add("write a file the host runs", p, MustFail, func(context.Context) error { return writeFile(p) })
		}
		for _, rel := range []string{".git/hooks", ".devcontainer"} {
			p := filepath.Join(ws, rel)
			add("replace a read-only directory", p, MustFail, func(context.Context) error { return renameAway(p) })
		}
		// Every other git directory the workspace had when the container
		// was created (submodules, worktrees, nested repositories): a hook
		// or a config key planted there would run on the host (issue 14);
		// and the files other tools run (.vscode, .claude, .envrc, …).
		if r, err := gitaudit.Scan(ws); err == nil {
			for _, rel := range r.ReadOnly {
				if rel == ".git/hooks" || rel == ".git/config" {
					continue
				}
				p := filepath.Join(ws, rel)
				if filepath.Base(rel) == "hooks" {
					p = filepath.Join(p, "post-checkout")
				} else if fi, err := os.Lstat(p); err == nil && fi.IsDir() {
					p = filepath.Join(p, "devbox-escape-probe")
				}
				add("plant a file the host runs", p, MustFail, func(context.Context) error { return writeFile(p) })
			}
		}
	}
	for _, p := range t.FenceFiles {
		add("write a fence file", p, MustFail, func(context.Context) error { return writeFile(p) })
	}
	for _, p := range t.ReadDenied {
		add("read another user's file", p, MustFail, func(context.Context) error { return readFile(p) })
	}

	// What must still work.
	for _, name := range t.AllowedNames {
		add("resolve an allowed name", name, MustWork, func(ctx context.Context) error { return resolve(ctx, name) })
	}
	for _, u := range t.AllowedURLs {
		add("reach an allowed URL", u, MustWork, func(ctx context.Context) error { return httpGet(ctx, u) })
	}
	return cs
}

// notAsRoot guards the checks that really change the firewall when they
// succeed: run as root (on a host by mistake, say) they would flush its
// rules, so they refuse instead.
func notAsRoot(run func(context.Context) error) func(context.Context) error {
	return func(ctx context.Context) error {
		if os.Geteuid() == 0 {
			return invalid("refusing to run as root: this check would really change the firewall")
		}
		return run(ctx)
	}
}

func shorten(s string) string {
	if len(s) > 40 {
		return s[:18] + "…" + s[len(s)-18:]
	}
	return s
}

// tunnelName builds a query name shaped like DNS exfiltration: the nonce,
// then two full 63-byte labels of "data".
func tunnelName(nonce string, n int, domain string) string {
	data := strings.Repeat("0123456789abcdef", 4)[:63]
	return fmt.Sprintf("%s-%d.%s.%s.%s.", nonce, n, data, data, strings.TrimSuffix(domain, "."))
}

func connectTCP(ctx context.Context, addr string) error {
	c, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	return escaped("connected to %s from %s", c.RemoteAddr(), c.LocalAddr())
}

// resolveHostPort resolves hostport's name; addr is its first address with
// the port. A malformed hostport is invalid (the check proves nothing); a
// name that does not resolve is an ordinary error, i.e. blocked.
func resolveHostPort(ctx context.Context, hostport string) (host string, addrs []string, addr string, err error) {
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		return "", nil, "", invalid("%q: %v", hostport, err)
	}
	addrs, err = net.DefaultResolver.LookupHost(ctx, host)
	if err != nil {
		return "", nil, "", fmt.Errorf("not resolved: %w", err)
	}
	return host, addrs, net.JoinHostPort(addrs[0], port), nil
}

func connectName(ctx context.Context, hostport string) error {
	_, addrs, addr, err := resolveHostPort(ctx, hostport)
	if err != nil {
		return err
	}
	// A non-allowed name that resolves is already a leak (the query left
	// or the filter answered it); a connection on top is worse.
	if cerr := connectTCP(ctx, addr); cerr != nil {
		if _, ok := cerr.(*escapedError); ok {
			return escaped("resolved to %v and %v", addrs, cerr)
		}
		return escaped("resolved to %v (connect failed: %v)", addrs, cerr)
	}
	return escaped("resolved to %v", addrs)
}

func firstNameserver(path string) (string, error) {
	ns, err := resolvconf.Nameservers(path)
	if err != nil {
		return "", err
	}
	return ns[0].String(), nil
}

// dnsQuery sends one query. An answer with records is an escape; REFUSED,
// NXDOMAIN without records, or no answer at all is blocked.
func dnsQuery(ctx context.Context, proto, server, name string, qtype uint16) error {
	m := new(dns.Msg)
	m.SetQuestion(name, qtype)
	c := &dns.Client{Net: proto}
	if dl, ok := ctx.Deadline(); ok {
		c.Timeout = time.Until(dl)
	}
	r, _, err := c.ExchangeContext(ctx, m, server)
	if err != nil {
		return err
	}
	if len(r.Answer) > 0 {
		return escaped("%s answered %s with %d records: %s", server, dns.RcodeToString[r.Rcode], len(r.Answer), r.Answer[0].String())
	}
	return fmt.Errorf("%s answered %s with no records", server, dns.RcodeToString[r.Rcode])
}

func ping(ctx context.Context, addr string) error {
	ip := net.ParseIP(addr)
	if ip == nil {
		return invalid("%q is not an IP address", addr)
	}
	network, proto, typ := "udp4", 1, icmp.Type(ipv4.ICMPTypeEcho)
	if ip.To4() == nil {
		network, proto, typ = "udp6", 58, ipv6.ICMPTypeEchoRequest
	}
	// Docker sets net.ipv4.ping_group_range so every user may open an
	// unprivileged ICMP socket: this is what `ping` would do.
	c, err := icmp.ListenPacket(network, "")
	if err != nil {
		return fmt.Errorf("cannot open an ICMP socket: %w", err)
	}
	defer c.Close()
	msg := icmp.Message{Type: typ, Body: &icmp.Echo{ID: os.Getpid() & 0xffff, Seq: 1, Data: []byte("devbox-escape")}}
	b, err := msg.Marshal(nil)
	if err != nil {
		return invalid("%v", err)
	}
	if _, err := c.WriteTo(b, &net.UDPAddr{IP: ip}); err != nil {
		return fmt.Errorf("send: %w", err)
	}
	setDeadline(ctx, c)
	buf := make([]byte, 1500)
	for {
		n, from, err := c.ReadFrom(buf)
		if err != nil {
			return fmt.Errorf("no reply: %w", err)
		}
		m, err := icmp.ParseMessage(proto, buf[:n])
		if err != nil {
			continue
		}
		if m.Type == ipv4.ICMPTypeEchoReply || m.Type == ipv6.ICMPTypeEchoReply {
			return escaped("echo reply from %v", from)
		}
	}
}

type deadliner interface{ SetDeadline(time.Time) error }

func setDeadline(ctx context.Context, c deadliner) {
	if dl, ok := ctx.Deadline(); ok {
		c.SetDeadline(dl)
	}
}

// dial connects to addr; reads and writes on the connection end at ctx's
// deadline.
func dial(ctx context.Context, network, addr string) (net.Conn, error) {
	c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	setDeadline(ctx, c)
	return c, nil
}

// udpEcho sends a datagram and waits for the world's echo of it.
func udpEcho(ctx context.Context, addr, nonce string) error {
	c, err := dial(ctx, "udp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	payload := []byte("devbox-escape " + nonce)
	if _, err := c.Write(payload); err != nil {
		return fmt.Errorf("send: %w", err)
	}
	buf := make([]byte, 1500)
	n, err := c.Read(buf)
	if err != nil {
		return fmt.Errorf("no reply: %w", err)
	}
	return escaped("%d-byte reply from %s", n, addr)
}

// command runs argv; exit status 0 is an escape.
func command(ctx context.Context, argv []string) error {
	if _, err := exec.LookPath(argv[0]); err != nil {
		return fmt.Errorf("%s not installed", argv[0])
	}
	out, err := exec.CommandContext(ctx, argv[0], argv[1:]...).CombinedOutput()
	if err == nil {
		return escaped("exit 0: %s", strings.TrimSpace(string(out)))
	}
	return fmt.Errorf("%v: %s", err, strings.TrimSpace(string(out)))
}

// becomeRoot runs argv (which prints `id -u`); printing 0 is an escape.
func becomeRoot(ctx context.Context, argv []string) error {
	if _, err := exec.LookPath(argv[0]); err != nil {
		return fmt.Errorf("%s not installed", argv[0])
	}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Stdin = strings.NewReader("")
	out, err := cmd.CombinedOutput()
	if strings.TrimSpace(string(out)) == "0" {
		return escaped("became root")
	}
	if err == nil {
		return escaped("exit 0 without root: %s", strings.TrimSpace(string(out)))
	}
	return fmt.Errorf("%v: %s", err, strings.TrimSpace(string(out)))
}

func rawSocket(domain, typ, proto int) error {
	fd, err := syscall.Socket(domain, typ, proto)
	if err != nil {
		return err
	}
	syscall.Close(fd)
	return escaped("opened")
}

// uidProcesses lists the pids whose real uid is uid.
func uidProcesses(uid int) ([]int, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "status"))
		if err != nil {
			continue
		}
		uidMatch, zombie := false, false
		for _, line := range strings.Split(string(b), "\n") {
			f := strings.Fields(line)
			if len(f) >= 2 && f[0] == "Uid:" && f[1] == strconv.Itoa(uid) {
				uidMatch = true
			}
			if len(f) >= 2 && f[0] == "State:" && f[1] == "Z" {
				zombie = true
			}
		}
		if uidMatch && !zombie {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}

func signalUID(uid int, sig syscall.Signal) error {
	pids, err := uidProcesses(uid)
	if err != nil {
		return invalid("%v", err)
	}
	if len(pids) == 0 {
		return invalid("no process with uid %d: the DNS filter is not running", uid)
	}
	var errs []string
	for _, pid := range pids {
		if err := syscall.Kill(pid, sig); err == nil {
			return escaped("signalled pid %d", pid)
		} else {
			errs = append(errs, fmt.Sprintf("pid %d: %v", pid, err))
		}
	}
	return errors.New(strings.Join(errs, "; "))
}

func bindBoth(addr string) error {
	lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
		return c.Control(func(fd uintptr) {
			// Both reuse options: the strongest attempt at sharing the
			// filter's port.
			syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_REUSEADDR, 1)
			syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, 0xf /* SO_REUSEPORT */, 1)
		})
	}}
	var errs []string
	if pc, err := lc.ListenPacket(context.Background(), "udp", addr); err == nil {
		pc.Close()
		return escaped("bound udp %s", addr)
	} else {
		errs = append(errs, "udp: "+err.Error())
	}
	if l, err := lc.Listen(context.Background(), "tcp", addr); err == nil {
		l.Close()
		return escaped("bound tcp %s", addr)
	} else {
		errs = append(errs, "tcp: "+err.Error())
	}
	return errors.New(strings.Join(errs, "; "))
}

// writeFile opens p for writing without changing it: append mode and no
// bytes written, or a fresh file removed again. Success is the escape.
func writeFile(p string) error {
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
	if errors.Is(err, fs.ErrNotExist) {
		f, err = os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
		if err == nil {
			f.Close()
			os.Remove(p)
			return escaped("created %s", p)
		}
	}
	if err != nil {
		return err
	}
	f.Close()
	return escaped("opened %s for writing", p)
}

func renameAway(p string) error {
	if _, err := os.Stat(p); err != nil {
		return invalid("%v", err)
	}
	tmp := p + ".devbox-escape"
	if err := os.Rename(p, tmp); err != nil {
		return err
	}
	os.Rename(tmp, p)
	return escaped("renamed %s", p)
}

func readFile(p string) error {
	fi, err := os.Stat(p)
	if err != nil && !errors.Is(err, fs.ErrPermission) {
		return invalid("%v", err)
	}
	if err == nil && fi.IsDir() {
		if _, err := os.ReadDir(p); err != nil {
			return err
		}
		return escaped("listed %s", p)
	}
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	n, err := io.Copy(io.Discard, f)
	if err != nil {
		return err
	}
	return escaped("read %d bytes", n)
}

func resolve(ctx context.Context, name string) error {
	addrs, err := net.DefaultResolver.LookupHost(ctx, name)
	if err != nil {
		return err
	}
	return &escapedError{fmt.Sprintf("%v", addrs)}
}

func httpGet(ctx context.Context, u string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return invalid("%v", err)
	}
	// No proxy: the fence must work for tools that ignore HTTP_PROXY.
	tr := &http.Transport{Proxy: nil, DisableKeepAlives: true}
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("status %s", resp.Status)
	}
	return &escapedError{resp.Status}
}

// dialName resolves an allowed name and connects to its first address, as
// any client would: the address is in the sets because the name is allowed.
func dialName(ctx context.Context, hostport string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		return nil, invalid("%q: %v", hostport, err)
	}
	addrs, err := net.DefaultResolver.LookupHost(ctx, host)
	if err != nil {
		return nil, invalid("%s does not resolve, so the check proves nothing: %v", host, err)
	}
	c, err := dial(ctx, "tcp", net.JoinHostPort(addrs[0], port))
	if err != nil {
		return nil, invalid("%s did not connect, so the check proves nothing: %v", hostport, err)
	}
	return c, nil
}

// sniMismatch sends a ClientHello for sni ("" for none) to an allowed
// name's address. Anything but a TLS alert or a closed connection — a
// ServerHello, or a plain server's first bytes — means it reached a
// server: an escape.
func sniMismatch(ctx context.Context, hostport, sni string) error {
	c, err := dialName(ctx, hostport)
	if err != nil {
		return err
	}
	return sniOver(ctx, c, sni)
}

// sniOver is sniMismatch on a connection already made (and closes it).
func sniOver(ctx context.Context, c net.Conn, sni string) error {
	defer c.Close()
	tc := tls.Client(c, &tls.Config{ServerName: sni, InsecureSkipVerify: true})
	err := tc.HandshakeContext(ctx)
	var rh tls.RecordHeaderError
	var oe *net.OpError
	switch {
	case err == nil:
		return escaped("TLS handshake with %s completed", c.RemoteAddr())
	case errors.As(err, &rh):
		return escaped("a server at %s answered %q", c.RemoteAddr(), rh.RecordHeader[:])
	case errors.As(err, &oe) && oe.Op == "remote error":
		return fmt.Errorf("refused: %v", err)
	}
	return err
}

// hostMismatch sends an HTTP request for host to an allowed name's
// address: any answer is an escape.
func hostMismatch(ctx context.Context, hostport, host string) error {
	c, err := dialName(ctx, hostport)
	if err != nil {
		return err
	}
	return hostOver(c, host)
}

// hostOver is hostMismatch on a connection already made (and closes it).
func hostOver(c net.Conn, host string) error {
	defer c.Close()
	fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", host)
	buf := make([]byte, 64)
	n, err := c.Read(buf)
	if n > 0 {
		return escaped("%s answered %q", c.RemoteAddr(), buf[:n])
	}
	return err
}
