//go:build linux

package firewall

import (
	"fmt"
	"net/netip"
	"os/exec"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/devbox-dev/devbox/internal/devboxtest"
	"github.com/devbox-dev/devbox/internal/testworld"
)

// TestAddBatch loads a large static list in one namespace and checks the
// kernel holds every entry, and that a bad entry fails naming itself.
func TestAddBatch(t *testing.T) {
	devboxtest.RequireRoot(t)
	ns := fmt.Sprintf("dbxb-%d", unix.Getpid())
	if out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add: %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("ip", "netns", "del", ns).Run() })
	var es []entry
	for i := 0; i < 3000; i++ {
		es = append(es, entry{prefix: netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(100 + i/256), byte(i), 0}), 24)})
	}
	ports := portEntries(netip.MustParsePrefix("10.9.0.0/16"), 443)
	err := testworld.InNS(ns, func() error {
		s, err := openSets()
		if err != nil {
			return err
		}
		defer s.Close()
		for _, c := range []struct{ name, kind string }{{"t4", SetAllow}, {"p4", SetAllowPort}} {
			if err := s.create(c.name, c.kind, IPv4); err != nil {
				return err
			}
		}
		if err := addBatch("t4", es, 0); err != nil {
			return err
		}
		if err := addBatch("t4", es[:10], 0); err != nil { // re-adding is not an error
			return fmt.Errorf("re-add: %w", err)
		}
		if err := addBatch("p4", ports, 0); err != nil {
			return err
		}
		for name, want := range map[string]int{"t4": len(es), "p4": 2} {
			if n, err := s.size(name); err != nil || n != want {
				return fmt.Errorf("set %s has %d entries (%v), want %d", name, n, err, want)
			}
		}
		bad := append(append([]entry(nil), es[:5]...), entry{prefix: netip.MustParsePrefix("fd00::/64")})
		err = addBatch("t4", bad, 0)
		if err == nil || !strings.Contains(err.Error(), "fd00::/64") {
			return fmt.Errorf("adding an IPv6 prefix to an IPv4 set: %v, want an error naming it", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
