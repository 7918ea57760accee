package sandbox

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path"
	"strconv"
	"strings"
	"syscall"
)

// Prepare creates the empty placeholders of spec's protected paths that do
// not exist yet, so that bwrap can put read-only mounts on them. It returns
// the paths it created. Placeholders stay after the run: removing one while
// another sandbox still has a mount on it would lift that sandbox's mount
// (the kernel detaches mounts whose mount point is unlinked).
func Prepare(spec Spec) ([]string, error) {
	var created []string
	for _, m := range spec.Mounts {
		if m.Placeholder == Missing {
			continue
		}
		if err := os.MkdirAll(path.Dir(m.Path), 0o755); err != nil {
			return created, fmt.Errorf("sandbox: placeholder for %s: %w", m.Path, err)
		}
		var err error
		if m.Placeholder == Dir {
			err = os.Mkdir(m.Path, 0o755)
		} else {
			var f *os.File
			f, err = os.OpenFile(m.Path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
			if err == nil {
				err = f.Close()
			}
		}
		switch {
		case errors.Is(err, os.ErrExist):
			// Made by a concurrent run, or appeared since the plan: either
			// way there is now something to mount on.
		case err != nil:
			return created, fmt.Errorf("sandbox: placeholder for %s: %w", m.Path, err)
		default:
			created = append(created, m.Path)
		}
	}
	return created, nil
}

// Stdio are the command's standard streams. Nil means /dev/null, as for
// exec.Cmd.
type Stdio struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
}

// ErrSetup is returned by Run when bwrap failed before the command started;
// bwrap's own message went to Stderr.
var ErrSetup = errors.New("bubblewrap could not set up the sandbox")

// forwarded are the signals Run passes to the sandboxed command. The command
// is in its own session, so terminal signals (Ctrl-C, window size) reach
// devbox only; devbox hands them on.
var forwarded = []os.Signal{
	syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT,
	syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGWINCH,
}

// Run runs spec's command under bwrap and returns its exit status (128+N
// when a signal N ended it). It does not kill the command when ctx is done:
// signals are forwarded instead, so the command decides how to stop.
func Run(ctx context.Context, bwrap string, spec Spec, stdio Stdio) (int, error) {
	statusR, statusW, err := os.Pipe()
	if err != nil {
		return 0, err
	}
	defer statusR.Close()
	spec.StatusFD = 3 // the first of ExtraFiles
	extra := []*os.File{statusW}
	if filter, err := SeccompFilter(); err == nil {
		// A few hundred bytes: the pipe holds them until bwrap reads.
		fr, fw, err := os.Pipe()
		if err != nil {
			return 0, err
		}
		_, err = fw.Write(filter)
		fw.Close()
		defer fr.Close()
		if err != nil {
			return 0, err
		}
		spec.SeccompFD = 4
		extra = append(extra, fr)
	}
	cmd := exec.Command(bwrap, Args(spec)...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdio.Stdin, stdio.Stdout, stdio.Stderr
	cmd.ExtraFiles = extra
	if spec.NewSession {
		// Out of the terminal's foreground group, so that Ctrl-C does not
		// kill bwrap (and with it, the command) before devbox forwards it.
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	}
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, forwarded...)
	defer signal.Stop(sigs)
	if err := cmd.Start(); err != nil {
		statusW.Close()
		return 0, fmt.Errorf("sandbox: start %s: %w", bwrap, err)
	}
	statusW.Close()

	type status struct {
		ChildPID *int `json:"child-pid"`
		ExitCode *int `json:"exit-code"`
	}
	childPID := make(chan int, 1)
	exitCode := make(chan int, 1)
	go func() {
		sc := bufio.NewScanner(statusR)
		for sc.Scan() {
			var st status
			if json.Unmarshal(sc.Bytes(), &st) != nil {
				continue
			}
			if st.ChildPID != nil {
				childPID <- *st.ChildPID
			}
			if st.ExitCode != nil {
				exitCode <- *st.ExitCode
			}
		}
		close(childPID)
	}()
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()

	started := false
	pid := 0
	for {
		select {
		case p, ok := <-childPID:
			if ok {
				started, pid = true, p
			} else {
				childPID = nil
			}
		case s := <-sigs:
			if pid != 0 {
				signalCommand(pid, s.(syscall.Signal))
			} else if cmd.Process != nil && s != syscall.SIGWINCH {
				// Not started yet: stop bwrap itself.
				cmd.Process.Signal(s)
			}
		case err := <-waited:
			// Drain what bwrap wrote last (the exit code) before deciding.
			if childPID != nil {
				for p := range childPID {
					started, pid = true, p
				}
			}
			if !started {
				return 1, ErrSetup
			}
			select {
			case c := <-exitCode:
				return c, nil
			default:
			}
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
					return 128 + int(ws.Signal()), nil
				}
				return ee.ExitCode(), nil
			}
			if err != nil {
				return 1, err
			}
			return 0, nil
		case <-ctx.Done():
			// Forwarded as a signal already; keep waiting for the command.
			ctx = context.Background()
		}
	}
}

// signalCommand sends sig to the sandboxed command. bwrap reports the pid of
// the sandbox's init (pid 1 inside); the command is its child, and leads its
// own process group, so the whole group gets it, as from a terminal.
func signalCommand(initPID int, sig syscall.Signal) {
	target := initPID
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", initPID, initPID)); err == nil {
		if f := strings.Fields(string(b)); len(f) > 0 {
			if p, err := strconv.Atoi(f[0]); err == nil {
				target = p
			}
		}
	}
	if syscall.Kill(-target, sig) != nil {
		syscall.Kill(target, sig)
	}
}
