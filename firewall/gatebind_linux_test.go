//go:build linux

package firewall

import (
	"bufio"
	"net"
	"net/netip"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestBindClientRedials: a pooled connection that the filter closed (as
// it does after a line it cannot read) is discarded, and the request goes
// out again on a new one: no answer is lost, no refusal follows.
func TestBindClientRedials(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bind.sock")
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var conns atomic.Int32
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			conns.Add(1)
			go func() {
				// One answer per connection, then close it.
				defer c.Close()
				line, err := bufio.NewReader(c).ReadString('\n')
				if err != nil {
					return
				}
				if strings.HasPrefix(line, "L ") {
					c.Write([]byte("ok\n"))
					return
				}
				c.Write([]byte("good.test\n"))
			}()
		}
	}()
	b := newBindClient(path)
	a := netip.MustParseAddr("10.77.0.5")
	for i := range 3 {
		names, err := b.names(a)
		if err != nil || len(names) != 1 || names[0] != "good.test" {
			t.Fatalf("request %d: %v %v", i, names, err)
		}
		time.Sleep(10 * time.Millisecond) // the filter's close lands
	}
	// The gate cuts a name before it logs it.
	if err := b.log(Event{Reason: GateNotAllowed, Name: boundField(strings.Repeat("&", 20000))}); err != nil {
		t.Errorf("log after closed connections: %v", err)
	}
	if n := conns.Load(); n != 4 {
		t.Errorf("%d connections, want 4 (each closed one replaced)", n)
	}
	if err := b.log(Event{Reason: GateNotAllowed, Name: strings.Repeat("&", 20000)}); err == nil {
		// 20,000 '&' escape to 120 KB: over the filter's line limit.
		t.Error("an event over maxLogLine was sent")
	}
}
