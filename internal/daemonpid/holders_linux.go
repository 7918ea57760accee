//go:build linux

package daemonpid

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Holder is a socket bound to a daemon's address, as the kernel's socket
// diagnostics (NETLINK_SOCK_DIAG) report it: any process may ask, no
// capability needed, so the agent's `devbox doctor` proves the same thing
// root's apply does.
type Holder struct {
	UID   uint32
	Inode uint64
	Addr  netip.AddrPort
}

func (h Holder) String() string {
	return fmt.Sprintf("uid %d, socket inode %d, bound to %v", h.UID, h.Inode, h.Addr)
}

// tcpListen is TCP_LISTEN in the kernel's TCP states (include/net/tcp_states.h).
const tcpListen = 10

// Holders lists the sockets that would receive what is sent to a: TCP
// listeners, or UDP sockets, bound to a's port at a's address or at the
// wildcard address of either family.
func Holders(a Addr) ([]Holder, error) {
	var out []Holder
	for _, fam := range []uint8{unix.AF_INET, unix.AF_INET6} {
		var (
			socks []*netlink.Socket
			err   error
		)
		if a.Net == "udp" {
			socks, err = netlink.SocketDiagUDP(fam)
		} else {
			socks, err = netlink.SocketDiagTCP(fam)
		}
		if err != nil {
			if fam == unix.AF_INET6 && ipv6Off() != "" {
				continue
			}
			return nil, fmt.Errorf("sock_diag %s: %w", a.Net, err)
		}
		for _, s := range socks {
			if s.ID.SourcePort != a.Addr.Port() || (a.Net == "tcp" && s.State != tcpListen) {
				continue
			}
			ip, ok := netip.AddrFromSlice(s.ID.Source)
			if !ok {
				continue
			}
			ip = ip.Unmap()
			if ip != a.Addr.Addr() && !ip.IsUnspecified() {
				continue
			}
			out = append(out, Holder{UID: s.UID, Inode: uint64(s.INode), Addr: netip.AddrPortFrom(ip, s.ID.SourcePort)})
		}
	}
	return out, nil
}

// describe lists holders for an error message.
func describe(hs []Holder, err error) string {
	if err != nil {
		return err.Error()
	}
	if len(hs) == 0 {
		return "no holder seen"
	}
	var s []string
	for _, h := range hs {
		s = append(s, h.String())
	}
	return strings.Join(s, "; ")
}

// Check proves that the daemon recorded in path serves, from its own
// sockets: the pidfile is root's (Load), its process is alive, started
// when recorded and running as its uid (Alive), and at every recorded
// address the only socket is the one root made for it (same inode, owner
// uid 0). The error names what does not hold: a taken port names the
// address and its holder's uid and inode.
func Check(path, name string) (Record, error) {
	r, err := Load(path)
	if err != nil {
		return r, fmt.Errorf("%s: %w", name, err)
	}
	if err := r.Alive("/proc"); err != nil {
		err = fmt.Errorf("%s is not running (%s): %w", name, path, err)
		if terr := r.taken(name); terr != nil {
			err = fmt.Errorf("%w; and %w", err, terr)
		}
		return r, err
	}
	if err := r.owns(name); err != nil {
		return r, err
	}
	// Without its holder, a crash of the daemon would free its ports.
	if err := r.HolderAlive("/proc"); err != nil {
		return r, fmt.Errorf("%s: %w", name, err)
	}
	return r, nil
}

// Taken reports the sockets of other owners bound to the addresses of the
// daemon recorded in path (nil when there are none, or no record): what
// status says beside "not running" when a port was taken after a crash.
func Taken(path, name string) error {
	r, err := Load(path)
	if err != nil {
		return nil
	}
	return r.taken(name)
}

// owns checks every recorded address holds the daemon's socket and no
// other.
func (r Record) owns(name string) error { return r.check(name, true) }

// taken checks no recorded address holds another owner's socket.
func (r Record) taken(name string) error { return r.check(name, false) }

func (r Record) check(name string, needMine bool) error {
	var problems []string
	for _, s := range r.Sockets {
		ap, err := netip.ParseAddrPort(s.Addr)
		if err != nil {
			return fmt.Errorf("%s: pidfile address %q: %w", name, s.Addr, err)
		}
		a := Addr{Net: s.Net, Addr: ap}
		hs, err := Holders(a)
		if err != nil {
			return fmt.Errorf("%s: %s: %w", name, a, err)
		}
		mine := false
		var foreign []Holder
		for _, h := range hs {
			if h.Inode == s.Inode && h.UID == 0 {
				mine = true
			} else {
				foreign = append(foreign, h)
			}
		}
		switch {
		case len(foreign) > 0:
			problems = append(problems, fmt.Sprintf("%s is taken by a socket that is not the %s's (%s)", a, name, describe(foreign, nil)))
		case !mine && needMine:
			problems = append(problems, fmt.Sprintf("%s: the %s's socket (inode %d) is gone", a, name, s.Inode))
		}
	}
	if problems != nil {
		return fmt.Errorf("%s", strings.Join(problems, "; "))
	}
	return nil
}
