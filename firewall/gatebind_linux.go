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
//	L EVENT-JSON  → no answer; the filter appends the event to the log
//
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
	sc.Buffer(make([]byte, 4096), 64<<10)
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
			if json.Unmarshal([]byte(line[2:]), &e) == nil {
				f.log.write(e)
			}
		default:
			return
		}
	}
}

// bindClient is the gate's end: a few reused connections to the filter.
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

func (b *bindClient) get() (*bindConn, error) {
	select {
	case bc := <-b.idle:
		return bc, nil
	default:
	}
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

// names asks the filter which names resolved to a.
func (b *bindClient) names(a netip.Addr) ([]string, error) {
	bc, err := b.get()
	if err != nil {
		return nil, err
	}
	bc.c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := fmt.Fprintf(bc.c, "B %s\n", a.Unmap()); err != nil {
		bc.c.Close()
		return nil, err
	}
	line, err := bc.r.ReadString('\n')
	if err != nil {
		bc.c.Close()
		return nil, fmt.Errorf("DNS filter's bindings: %w", err)
	}
	b.put(bc)
	return strings.Fields(line), nil
}

// log hands an event to the filter, the log file's one writer.
func (b *bindClient) log(e Event) error {
	raw, err := json.Marshal(e)
	if err != nil {
		return err
	}
	bc, err := b.get()
	if err != nil {
		return err
	}
	bc.c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := bc.c.Write(append(append([]byte("L "), raw...), '\n')); err != nil {
		bc.c.Close()
		return err
	}
	b.put(bc)
	return nil
}
