//go:build linux

package escape

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/devbox-dev/devbox/internal/testworld"
)

// TestGateSites judges the gate's adversary cases by what the world says
// it read, on loopback ("localhost" for the allowed name): a site recorder
// with nothing in front reads every other name (escaped); in front of it,
// a gate that refuses every connection blocks the single ones and leaves
// the two-step ones (a retry, a second request) unproved; a server that
// does not say what it read (ServeTCP's) proves nothing.
func TestGateSites(t *testing.T) {
	listen := func() (net.Listener, string) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		_, port, _ := net.SplitHostPort(l.Addr().String())
		return l, net.JoinHostPort("localhost", port)
	}
	var rec testworld.Recorder
	t.Cleanup(rec.Close)
	l, sites := listen()
	rec.ServeSites(l)
	l, plain := listen()
	rec.ServeTCP(l)
	l, gate := listen()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				b := make([]byte, 4096)
				n, _ := c.Read(b)
				if n > 0 && b[0] == 22 {
					c.Write([]byte{21, 3, 3, 0, 2, 2, 49}) // access_denied, as the gate
					return
				}
				c.(*net.TCPConn).SetLinger(0)
			}()
		}
	}()
	const other = "gate-n1.exfil.test"
	twoStep := map[string]bool{"tls hrr": true, "http pipelined": true, "http keep-alive": true}
	for _, s := range gateSites {
		for _, tc := range []struct {
			world string
			want  Outcome
		}{{sites, Escaped}, {gate, Blocked}, {plain, Invalid}} {
			want := tc.want
			if tc.world == gate && twoStep[s.what] {
				want = Invalid
			}
			allowed, _, _ := net.SplitHostPort(tc.world)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			got, detail := classify(MustFail, s.run(ctx, tc.world, allowed, other))
			cancel()
			if got != want {
				t.Errorf("%s against %s: %s (%s), want %s", s.name, tc.world, got, detail, want)
			}
		}
	}
	n := 0
	for _, st := range rec.Sites() {
		for _, name := range st.Names {
			if strings.Contains(strings.ToLower(name), other) {
				n++
			}
		}
	}
	if n == 0 {
		t.Error("the site recorder never recorded the other name")
	}
}
