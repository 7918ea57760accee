//go:build linux

package firewall

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/devbox-dev/devbox/internal/layout"
)

// The DNS filter and the gate talk over a Unix socket in a directory of
// the filter's own (StateDir/dns, made by StartDNS, owned by the filter's
// user inside the root-owned StateDir): nothing the agent's user can write
// is ever read by the gate. One request per line:
//
//	B ADDR        → the names bound to ADDR, space-separated, one line
//	L EVENT-JSON  → "ok" once the filter appended the event to the log
//
// A line longer than maxLogLine ends the connection (the gate bounds its
// events' fields well under it).
// The filter answers only root and the gate's uid (SO_PEERCRED).
const (
	bindDirName  = "dns"
	bindSockName = "bind.sock"
)

func bindSocketPath(cfg Config) string {
	return filepath.Join(cfg.StateDir, bindDirName, bindSockName)
}

// listenBindings opens the filter's end of the socket.
func listenBindings(cfg Config) (*net.UnixListener, error) {
	path := bindSocketPath(cfg)
	os.Remove(path) // a previous filter's
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("gate bindings socket: %w", err)
	}
	// Connecting needs write permission; who may talk is checked per
	// connection by credentials, not by the file mode.
	if err := os.Chmod(path, 0o666); err != nil {
		l.Close()
		return nil, fmt.Errorf("gate bindings socket: %w", err)
	}
	return l, nil
}

// serveBindings answers the gate until l is closed.
func (f *filter) serveBindings(l *net.UnixListener) error {
	for {
		c, err := l.AcceptUnix()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			return err
		}
		go f.bindConn(c)
	}
}

func peerUID(c *net.UnixConn) (int, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return -1, err
	}
	var cred *unix.Ucred
	var cerr error
	if err := rc.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return -1, err
	}
	if cerr != nil {
		return -1, cerr
	}
	return int(cred.Uid), nil
}

func (f *filter) bindConn(c *net.UnixConn) {
	defer c.Close()
	if uid, err := peerUID(c); err != nil || (uid != 0 && uid != layout.GateUID) {
		return
	}
	sc := bufio.NewScanner(c)
	sc.Buffer(make([]byte, 4096), maxLogLine)
	w := bufio.NewWriter(c)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "B "):
			a, err := netip.ParseAddr(line[2:])
			if err == nil {
				w.WriteString(strings.Join(f.bound.names(a, time.Now()), " "))
			}
			w.WriteByte('\n')
			if w.Flush() != nil {
				return
			}
		case strings.HasPrefix(line, "L "):
			var e Event
			if json.Unmarshal([]byte(line[2:]), &e) != nil {
				return
			}
			f.log.Append(e)
			w.WriteString("ok\n")
			if w.Flush() != nil {
				return
			}
		default:
			return
		}
	}
}

// maxLogLine bounds one request line to the filter.
const maxLogLine = 64 << 10

// bindClient is the gate's end: a few reused connections to the filter.
// A connection that failed in any way is closed, never pooled again, and
// a request that failed on a reused connection (which the filter may have
// closed since) is tried once more on a new one.
type bindClient struct {
	path string
	idle chan *bindConn
}

type bindConn struct {
	c net.Conn
	r *bufio.Reader
}

func newBindClient(path string) *bindClient {
	return &bindClient{path: path, idle: make(chan *bindConn, 64)}
}

func (b *bindClient) dial() (*bindConn, error) {
	c, err := net.DialTimeout("unix", b.path, time.Second)
	if err != nil {
		return nil, fmt.Errorf("DNS filter's bindings: %w", err)
	}
	return &bindConn{c: c, r: bufio.NewReader(c)}, nil
}

func (b *bindClient) put(bc *bindConn) {
	select {
	case b.idle <- bc:
	default:
		bc.c.Close()
	}
}

// ask sends one request line and returns the answer line.
func (b *bindClient) ask(req []byte) (string, error) {
	try := func(bc *bindConn) (string, error) {
		bc.c.SetDeadline(time.Now().Add(2 * time.Second))
		if _, err := bc.c.Write(req); err != nil {
			bc.c.Close()
			return "", err
		}
		line, err := bc.r.ReadString('\n')
		if err != nil {
			bc.c.Close()
			return "", fmt.Errorf("DNS filter's bindings: %w", err)
		}
		b.put(bc)
		return line, nil
	}
	select {
	case bc := <-b.idle:
		if line, err := try(bc); err == nil {
			return line, nil
		}
	default:
	}
	bc, err := b.dial()
	if err != nil {
		return "", err
	}
	return try(bc)
}

// names asks the filter which names resolved to a.
func (b *bindClient) names(a netip.Addr) ([]string, error) {
	line, err := b.ask([]byte("B " + a.Unmap().String() + "\n"))
	if err != nil {
		return nil, err
	}
	return strings.Fields(line), nil
}

// log hands an event to the filter, the log file's one writer, and waits
// for it to be written.
func (b *bindClient) log(e Event) error {
	raw, err := json.Marshal(e)
	if err != nil {
		return err
	}
	req := append(append([]byte("L "), raw...), '\n')
	if len(req) > maxLogLine {
		return fmt.Errorf("event of %d bytes exceeds the filter's %d", len(req), maxLogLine)
	}
	line, err := b.ask(req)
	if err == nil && line != "ok\n" {
		err = fmt.Errorf("DNS filter's log: answered %q", line)
	}
	return err
}
