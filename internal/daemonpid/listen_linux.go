//go:build linux

package daemonpid

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// A daemon never binds its own ports. Root makes each listening socket
// before it starts the daemon (Listen) and hands it over at a fixed
// descriptor (Start, Inherit), so:
//   - the socket's owner, as the kernel records it (sk_uid, shown by
//     sock_diag), is root: no other process of the container can make one
//     like it, and Check proves a port is the daemon's by that owner and
//     the socket's inode, recorded in root's pidfile;
//   - every socket has SO_REUSEPORT, so on a restart root binds the
//     successor while the old daemon still holds the port. The kernel lets
//     a socket share a port with SO_REUSEPORT sockets only when its
//     owner's uid is theirs, so the agent's uid can neither join them nor
//     take the port in between.
//   - UDP sockets never set SO_REUSEADDR: two UDP sockets that both set it
//     share a port whatever their owners.
//   - a holder process (HoldEnv, as HolderUID), started with the daemon,
//     keeps the port after the daemon dies (a crash, the out-of-memory killer), until the
//     next apply replaces both: for TCP a second socket bound to the
//     address that never listens (a client is refused at once, as by a
//     closed port), for UDP the daemon's socket itself (a query goes
//     unanswered). So from the first start on, no moment leaves a
//     daemon's port free for another owner.

// Addr is one socket a daemon serves on: a listening "tcp" socket or a
// bound "udp" one, at a loopback address.
type Addr struct {
	Net  string
	Addr netip.AddrPort
}

func (a Addr) String() string { return a.Net + " " + a.Addr.String() }

// Socket is one socket root made for a daemon, as recorded in its pidfile.
type Socket struct {
	Net   string `json:"net"`
	Addr  string `json:"addr"`
	Inode uint64 `json:"inode"`
}

// Listeners are the sockets Listen made, until Start hands them over.
type Listeners struct {
	Sockets []Socket
	// Notes say what was left out and why (IPv6 off in the kernel).
	Notes []string
	files []*os.File
	// held are what the daemon's holder keeps (see HoldEnv): per TCP
	// address a socket bound to it that never listens, and the UDP
	// sockets themselves.
	held []*os.File
}

// ListenEnv names, in the daemon's environment, the sockets it inherits
// from descriptor 3 on: "3/tcp/127.0.0.1:53443,4/tcp/[::1]:53443".
const ListenEnv = "DEVBOX_LISTEN_FDS"

// Listen makes one socket per address, as root, for the daemon name. An
// IPv6 address is left out (with a note) only when the kernel has IPv6 off
// on loopback; any other failure is an error that names the address and,
// for a taken port, who holds it.
func Listen(name string, addrs []Addr) (*Listeners, error) {
	ls := &Listeners{}
	for _, a := range addrs {
		f, err := listen(a)
		if err != nil {
			if a.Addr.Addr().Is6() && ipv6Off() != "" {
				ls.Notes = append(ls.Notes, fmt.Sprintf("%s: no %s listener: %s", name, a, ipv6Off()))
				continue
			}
			ls.Close()
			if errors.Is(err, unix.EADDRINUSE) {
				return nil, fmt.Errorf("%s: %s is taken by a socket devbox did not make (%s): the port must belong to the %s alone", name, a, describe(Holders(a)), name)
			}
			return nil, fmt.Errorf("%s: listen %s: %w", name, a, err)
		}
		var st unix.Stat_t
		if err := unix.Fstat(int(f.Fd()), &st); err != nil {
			f.Close()
			ls.Close()
			return nil, fmt.Errorf("%s: %s: %w", name, a, err)
		}
		ls.files = append(ls.files, f)
		ls.Sockets = append(ls.Sockets, Socket{Net: a.Net, Addr: a.Addr.String(), Inode: st.Ino})
		if a.Net == "udp" {
			ls.held = append(ls.held, f)
			continue
		}
		r, err := reserve(a)
		if err != nil {
			ls.Close()
			return nil, fmt.Errorf("%s: reserve %s: %w", name, a, err)
		}
		ls.held = append(ls.held, r)
	}
	return ls, nil
}

// reserve binds a TCP socket to a without listening: it keeps the port
// from every other owner (SO_REUSEPORT, owner uid 0, and no SO_REUSEADDR,
// which a bind of the agent's would need to share it with a socket that
// does not listen), yet no connection ever reaches it, so with the
// daemon gone a client is refused at once, as by a closed port.
func reserve(a Addr) (*os.File, error) {
	family, sa := sockaddr(a.Addr)
	fd, err := unix.Socket(family, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, os.NewSyscallError("socket", err)
	}
	err = os.NewSyscallError("setsockopt", unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEPORT, 1))
	if err == nil && family == unix.AF_INET6 {
		err = os.NewSyscallError("setsockopt", unix.SetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_V6ONLY, 1))
	}
	if err == nil {
		err = os.NewSyscallError("bind", unix.Bind(fd, sa))
	}
	if err != nil {
		unix.Close(fd)
		return nil, err
	}
	return os.NewFile(uintptr(fd), "reserve "+a.String()), nil
}

func sockaddr(ap netip.AddrPort) (int, unix.Sockaddr) {
	if ip := ap.Addr(); ip.Is4() {
		return unix.AF_INET, &unix.SockaddrInet4{Port: int(ap.Port()), Addr: ip.As4()}
	}
	return unix.AF_INET6, &unix.SockaddrInet6{Port: int(ap.Port()), Addr: ap.Addr().As16()}
}

func listen(a Addr) (*os.File, error) {
	family, sa := sockaddr(a.Addr)
	typ := unix.SOCK_STREAM
	if a.Net == "udp" {
		typ = unix.SOCK_DGRAM
	} else if a.Net != "tcp" {
		return nil, fmt.Errorf("network %q: want tcp or udp", a.Net)
	}
	if !a.Addr.Addr().IsLoopback() {
		return nil, errors.New("not a loopback address")
	}
	fd, err := unix.Socket(family, typ|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, os.NewSyscallError("socket", err)
	}
	set := func(level, opt int) error {
		return os.NewSyscallError("setsockopt", unix.SetsockoptInt(fd, level, opt, 1))
	}
	err = set(unix.SOL_SOCKET, unix.SO_REUSEPORT)
	if err == nil && typ == unix.SOCK_STREAM {
		// TIME_WAIT connections of the old daemon must not block the
		// bind; a listening socket still excludes every other owner.
		err = set(unix.SOL_SOCKET, unix.SO_REUSEADDR)
	}
	if err == nil && family == unix.AF_INET6 {
		err = set(unix.IPPROTO_IPV6, unix.IPV6_V6ONLY)
	}
	if err == nil {
		err = os.NewSyscallError("bind", unix.Bind(fd, sa))
	}
	if err == nil && typ == unix.SOCK_STREAM {
		err = os.NewSyscallError("listen", unix.Listen(fd, unix.SOMAXCONN))
	}
	if err != nil {
		unix.Close(fd)
		return nil, err
	}
	return os.NewFile(uintptr(fd), a.String()), nil
}

// ipv6Off says why the kernel has no IPv6 on loopback ("" when it has).
func ipv6Off() string {
	fd, err := unix.Socket(unix.AF_INET6, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return "IPv6 is disabled in this kernel (socket(AF_INET6): " + err.Error() + ")"
	}
	unix.Close(fd)
	b, err := os.ReadFile("/proc/sys/net/ipv6/conf/lo/disable_ipv6")
	if err == nil && strings.TrimSpace(string(b)) == "1" {
		return "IPv6 is disabled in this kernel on loopback (net.ipv6.conf.lo.disable_ipv6 = 1)"
	}
	return ""
}

// Close closes the sockets still held here.
func (ls *Listeners) Close() {
	if ls == nil {
		return
	}
	for _, f := range ls.files {
		f.Close()
	}
	for _, f := range ls.held {
		f.Close() // a UDP socket's second Close is a no-op
	}
	ls.files, ls.held = nil, nil
}

// env is ListenEnv's value for the sockets at descriptors first, first+1, …
func (ls *Listeners) env(first int) string {
	var parts []string
	for i, s := range ls.Sockets {
		parts = append(parts, fmt.Sprintf("%d/%s/%s", first+i, s.Net, s.Addr))
	}
	return ListenEnv + "=" + strings.Join(parts, ",")
}

// Export makes this process the daemon: it sets ListenEnv to the sockets'
// own descriptors, so a daemon body run in-process (tests) finds them
// with Inherit.
func (ls *Listeners) Export() error {
	var parts []string
	for i, s := range ls.Sockets {
		// A descriptor of its own: Inherit closes it, and the *os.File
		// closes (here) only what it owns.
		fd, err := unix.Dup(int(ls.files[i].Fd()))
		if err != nil {
			return os.NewSyscallError("dup", err)
		}
		parts = append(parts, fmt.Sprintf("%d/%s/%s", fd, s.Net, s.Addr))
	}
	ls.Close()
	return os.Setenv(ListenEnv, strings.Join(parts, ","))
}

// Inherited are the sockets a daemon got from root.
type Inherited struct {
	TCP []net.Listener
	UDP []net.PacketConn
}

// Close closes them all.
func (in Inherited) Close() {
	for _, l := range in.TCP {
		l.Close()
	}
	for _, pc := range in.UDP {
		pc.Close()
	}
}

// Inherit takes the sockets ListenEnv names, checks each is the socket the
// variable says (type and local address), and clears the variable. With
// none it is an error: a daemon never binds its ports itself.
func Inherit(name string) (Inherited, error) {
	var in Inherited
	v, ok := os.LookupEnv(ListenEnv)
	os.Unsetenv(ListenEnv)
	if !ok || v == "" {
		return in, fmt.Errorf("%s: no sockets handed over (%s unset): the %s does not bind its own ports; root starts it with them", name, ListenEnv, name)
	}
	for _, e := range strings.Split(v, ",") {
		parts := strings.SplitN(e, "/", 3)
		var fd int
		var ap netip.AddrPort
		err := errors.New("want FD/NET/ADDR")
		if len(parts) == 3 {
			if fd, err = strconv.Atoi(parts[0]); err == nil {
				ap, err = netip.ParseAddrPort(parts[2])
			}
		}
		if err == nil {
			err = inherit(&in, fd, parts[1], ap)
		}
		if err != nil {
			in.Close()
			return Inherited{}, fmt.Errorf("%s: %s %q: %w", name, ListenEnv, e, err)
		}
	}
	return in, nil
}

func inherit(in *Inherited, fd int, network string, want netip.AddrPort) error {
	sa, err := unix.Getsockname(fd)
	if err != nil {
		return os.NewSyscallError("getsockname", err)
	}
	var got netip.AddrPort
	switch sa := sa.(type) {
	case *unix.SockaddrInet4:
		got = netip.AddrPortFrom(netip.AddrFrom4(sa.Addr), uint16(sa.Port))
	case *unix.SockaddrInet6:
		got = netip.AddrPortFrom(netip.AddrFrom16(sa.Addr), uint16(sa.Port))
	}
	typ, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TYPE)
	if err != nil {
		return os.NewSyscallError("getsockopt", err)
	}
	wantType := map[string]int{"tcp": unix.SOCK_STREAM, "udp": unix.SOCK_DGRAM}[network]
	if got != want || typ != wantType {
		return fmt.Errorf("descriptor %d is bound to %v (type %d), not %s %v", fd, got, typ, network, want)
	}
	f := os.NewFile(uintptr(fd), network+" "+want.String())
	defer f.Close() // the net package keeps its own descriptor
	if network == "tcp" {
		l, err := net.FileListener(f)
		if err != nil {
			return err
		}
		in.TCP = append(in.TCP, l)
		return nil
	}
	pc, err := net.FilePacketConn(f)
	if err != nil {
		return err
	}
	in.UDP = append(in.UDP, pc)
	return nil
}
