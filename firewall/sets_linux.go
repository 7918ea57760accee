//go:build linux

package firewall

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// sets writes devbox's kernel sets through one netlink socket: no process
// per address.
type sets struct {
	mu sync.Mutex
	h  *netlink.Handle
}

func openSets() (*sets, error) {
	h, err := netlink.NewHandle(unix.NETLINK_NETFILTER)
	if err != nil {
		return nil, fmt.Errorf("open netfilter netlink socket: %w", err)
	}
	return &sets{h: h}, nil
}

func (s *sets) Close() { s.h.Close() }

func nlFamily(f Family) uint8 {
	if f == IPv4 {
		return unix.AF_INET
	}
	return unix.AF_INET6
}

// create makes a set (kind, family) under name, keeping it when it exists.
// Every set supports per-entry timeouts; timeout 0 makes an entry permanent.
func (s *sets) create(name, kind string, f Family) error {
	zero := uint32(0)
	err := s.h.IpsetCreate(name, setType(kind), netlink.IpsetCreateOptions{
		Replace: true, Family: nlFamily(f), Timeout: &zero, MaxElements: 1 << 20,
	})
	if err != nil && !errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("create set %s: %w", name, err)
	}
	return nil
}

func (s *sets) add(name string, e entry, timeout time.Duration) error {
	to := uint32(timeout / time.Second)
	ne := &netlink.IPSetEntry{
		IP:      net.IP(e.prefix.Addr().AsSlice()),
		CIDR:    uint8(e.prefix.Bits()),
		Timeout: &to,
		Replace: true,
	}
	if e.proto != 0 {
		p, port := e.proto, e.port
		ne.Protocol, ne.Port = &p, &port
	}
	s.mu.Lock()
	err := s.h.IpsetAdd(name, ne)
	s.mu.Unlock()
	if err != nil {
		return fmt.Errorf("add %s to set %s: %w", e, name, err)
	}
	return nil
}

// size returns the number of members of a set.
func (s *sets) size(name string) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, err := s.h.IpsetList(name)
	if err != nil {
		return 0, err
	}
	if r.NumEntries != 0 || len(r.Entries) == 0 {
		return int(r.NumEntries), nil
	}
	return len(r.Entries), nil
}

// loadSets makes every set exist and replaces its members with the Config's
// static entries: each set is filled under a temporary name and swapped in,
// so a set is never seen half-filled. Deny sets are swapped before allow
// sets, so no moment has the new allows with the old denies.
func (s *sets) loadSets(cfg Config) (int, error) {
	static := staticEntries(cfg)
	n := 0
	for _, kind := range []string{SetProtect, SetDeny, SetDenyPort, SetAllow, SetAllowPort, SetNamed, SetNamedPort} {
		for _, f := range Families {
			name := SetName(kind, f)
			tmp := name + "-new"
			if err := s.create(name, kind, f); err != nil {
				return n, err
			}
			s.h.IpsetDestroy(tmp) // a leftover of an interrupted apply
			if err := s.create(tmp, kind, f); err != nil {
				return n, err
			}
			if err := addBatch(tmp, static[name], 0); err != nil {
				s.h.IpsetDestroy(tmp)
				return n, err
			}
			n += len(static[name])
			if err := s.h.IpsetSwap(tmp, name); err != nil {
				s.h.IpsetDestroy(tmp)
				return n, fmt.Errorf("swap set %s: %w", name, err)
			}
			if err := s.h.IpsetDestroy(tmp); err != nil {
				return n, fmt.Errorf("destroy set %s: %w", tmp, err)
			}
		}
	}
	return n, nil
}
