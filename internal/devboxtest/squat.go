package devboxtest

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Squat is the agent trying to take a daemon's port, run as a helper
// process of a test (under the agent's uid): it binds every "tcp/ADDR" or
// "udp/ADDR" of addrs over and over, with SO_REUSEADDR and SO_REUSEPORT
// (its best chance to share a port), keeps what it gets and says so on
// stdout ("took tcp 127.0.0.1:53443"), until its stdin closes; then it
// prints "tries N" and returns. answer, when not nil, serves each
// connection to a TCP port it took, as a squatter answering a health
// check would.
func Squat(addrs []string, answer func(net.Conn)) int {
	done := make(chan struct{})
	go func() { io.Copy(io.Discard, os.Stdin); close(done) }()
	lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
		return c.Control(func(fd uintptr) {
			unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEADDR, 1)
			unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEPORT, 1)
		})
	}}
	left := append([]string(nil), addrs...)
	var held []io.Closer
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	tries := 0
	fmt.Println("started")
	for {
		select {
		case <-done:
			fmt.Println("tries", tries)
			return 0
		default:
		}
		if len(left) == 0 {
			time.Sleep(10 * time.Millisecond)
			continue
		}
		for i := 0; i < len(left); i++ {
			network, addr, _ := strings.Cut(left[i], "/")
			tries++
			var err error
			if network == "udp" {
				var pc net.PacketConn
				if pc, err = lc.ListenPacket(context.Background(), "udp", addr); err == nil {
					held = append(held, pc)
				}
			} else {
				var l net.Listener
				if l, err = lc.Listen(context.Background(), "tcp", addr); err == nil {
					held = append(held, l)
					go serve(l, answer)
				}
			}
			if err == nil {
				fmt.Println("took", network, addr)
				left = append(left[:i], left[i+1:]...)
				i--
			}
		}
	}
}

func serve(l net.Listener, answer func(net.Conn)) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		if answer != nil {
			answer(c)
		}
		c.Close()
	}
}

// Squatter is a running Squat.
type Squatter struct {
	tb    testing.TB
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan string
}

// StartSquat starts cmd, a test binary that runs Squat, and waits until it
// runs. The test's cleanup stops it.
func StartSquat(tb testing.TB, cmd *exec.Cmd) *Squatter {
	tb.Helper()
	if cmd.Stderr == nil {
		cmd.Stderr = os.Stderr
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		tb.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	s := &Squatter{tb: tb, cmd: cmd, stdin: stdin, lines: make(chan string, 100)}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			s.lines <- sc.Text()
		}
		close(s.lines)
	}()
	tb.Cleanup(func() { stdin.Close(); cmd.Process.Kill(); cmd.Wait() })
	if l := s.Next(); l != "started" {
		tb.Fatalf("squatter: %q", l)
	}
	return s
}

// Next is its next line ("took tcp 127.0.0.1:53443").
func (s *Squatter) Next() string {
	s.tb.Helper()
	select {
	case l, ok := <-s.lines:
		if !ok {
			s.tb.Fatal("squatter: exited")
		}
		return l
	case <-time.After(10 * time.Second):
		s.tb.Fatal("squatter: no line in 10s")
		return ""
	}
}

// Stop ends it and returns what it took ("tcp 127.0.0.1:53443") and how
// many binds it tried.
func (s *Squatter) Stop() (took []string, tries int) {
	s.stdin.Close()
	for l := range s.lines {
		if t, ok := strings.CutPrefix(l, "took "); ok {
			took = append(took, t)
		}
		if n, ok := strings.CutPrefix(l, "tries "); ok {
			tries, _ = strconv.Atoi(n)
		}
	}
	s.cmd.Wait()
	return took, tries
}
