//go:build linux

package daemonpid

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// Spec is one detached daemon for Start.
type Spec struct {
	// Name is what errors call it: "DNS filter", "name gate", …
	Name string
	// Argv runs the daemon in the foreground. Required.
	Argv []string
	// Env is its whole environment (nil: empty).
	Env []string
	// Dir is its working directory ("": the caller's).
	Dir string
	// UID and GID it runs as, with no supplementary group; UID -1 keeps
	// the caller's.
	UID, GID int
	// Caps are the ambient capabilities it keeps under UID (none by
	// default: a daemon gets only what it needs, and most need nothing).
	Caps []uintptr
	// Output receives its stdout and stderr.
	Output *os.File
	// PIDFile is where Start records it (see Write).
	PIDFile string
	// Listeners are the sockets it serves on, made by Listen before the
	// daemon it replaces was stopped. Start hands them over at descriptors
	// 3, 4, … (ListenEnv says which is which), starts a holder (Argv[0]
	// with HoldEnv, as HolderUID) that keeps the ports after the daemon dies,
	// closes its own copies and records both in PIDFile; readiness then
	// also needs every socket to be the only one at its address (Check).
	Listeners *Listeners
	// Ready reports whether the process pid answers; Start calls it every
	// Poll until it returns nil, the process exits, or Wait passes.
	Ready func(ctx context.Context, pid int) error
	// Wait bounds the wait for Ready (default 5s); Poll is the pause
	// between tries (default 5ms).
	Wait, Poll time.Duration
	// Tail returns what to show when the daemon exits before it answers:
	// the last lines of its output.
	Tail func() string
}

// Start starts s detached (its own session, so the caller's signals and
// exit leave it alone), records it in s.PIDFile, and returns its pid once
// s.Ready accepts it. A daemon that exits first, or does not answer within
// s.Wait, is an error naming s.Name; the latter is killed.
func Start(ctx context.Context, s Spec) (int, error) {
	if s.Wait == 0 {
		s.Wait = 5 * time.Second
	}
	if s.Poll == 0 {
		s.Poll = 5 * time.Millisecond
	}
	cmd := exec.Command(s.Argv[0], s.Argv[1:]...)
	cmd.Env = s.Env
	rec := Record{UID: s.UID}
	if s.UID < 0 {
		rec.UID = os.Geteuid()
	}
	if s.Listeners != nil {
		defer s.Listeners.Close()
		cmd.ExtraFiles = s.Listeners.files
		cmd.Env = append(append([]string(nil), s.Env...), s.Listeners.env(3))
		rec.Sockets, rec.Notes = s.Listeners.Sockets, s.Listeners.Notes
		for _, n := range rec.Notes {
			fmt.Fprintln(s.Output, n)
		}
	}
	cmd.Dir = s.Dir
	cmd.Stdout, cmd.Stderr = s.Output, s.Output
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if s.UID >= 0 {
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uint32(s.UID), Gid: uint32(s.GID), Groups: []uint32{}}
		cmd.SysProcAttr.AmbientCaps = s.Caps
	}
	stopHolder := func() {}
	if s.Listeners != nil && len(s.Listeners.held) > 0 {
		// The holder first: from here on, a process other than root's
		// apply keeps the ports, whatever becomes of the daemon.
		h := holdCommand(s.Argv[0])
		h.Dir = "/"
		h.ExtraFiles = s.Listeners.held
		h.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		rec.HolderUID = rec.UID
		if s.UID >= 0 {
			h.SysProcAttr.Credential = &syscall.Credential{Uid: HolderUID, Gid: HolderUID, Groups: []uint32{}}
			rec.HolderUID = HolderUID
		}
		if err := h.Start(); err != nil {
			return 0, fmt.Errorf("start the holder of the %s's ports %q: %w", s.Name, s.Argv[0], err)
		}
		go h.Wait()
		rec.Holder = h.Process.Pid
		stopHolder = func() { h.Process.Kill() }
	}
	if err := cmd.Start(); err != nil {
		stopHolder()
		return 0, fmt.Errorf("start %s %q: %w", s.Name, s.Argv[0], err)
	}
	// The daemon and its holder have the sockets now: root's copies go.
	s.Listeners.Close()
	pid := cmd.Process.Pid
	rec.PID = pid
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	died := func(werr error) error {
		tail := ""
		if s.Tail != nil {
			tail = s.Tail()
		}
		stopHolder()
		return fmt.Errorf("%s exited (%v): %s", s.Name, werr, tail)
	}
	if err := Write(s.PIDFile, rec); err != nil {
		// Most often it has exited already (a bad config): say that.
		select {
		case werr := <-exited:
			return 0, died(werr)
		case <-time.After(100 * time.Millisecond):
		}
		cmd.Process.Kill()
		stopHolder()
		return 0, fmt.Errorf("%s: %w", s.Name, err)
	}
	deadline := time.Now().Add(s.Wait)
	for {
		err := s.Ready(ctx, pid)
		if err == nil {
			// It answers; but from its own sockets?
			err = rec.owns(s.Name)
		}
		if err == nil {
			return pid, nil
		}
		select {
		case werr := <-exited:
			return 0, died(werr)
		case <-time.After(s.Poll):
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			stopHolder()
			return 0, fmt.Errorf("%s did not answer within %v: %w", s.Name, s.Wait, err)
		}
	}
}
