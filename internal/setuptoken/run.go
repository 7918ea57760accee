package setuptoken

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"

	"github.com/containerd/console"
	"golang.org/x/term"
)

// MinWidth is the fewest columns the program's terminal gets: a token
// (about 110 characters) must fit on one line, or a program that wraps
// its output to the terminal's width would split it.
const MinWidth = 200

// Options say what to run and where the user is.
type Options struct {
	// Command runs the sign-in, e.g. `docker exec -i -t -u root ID …
	// claude setup-token`. It gets a terminal of its own.
	Command []string
	// In is the user's input. A terminal is put in raw mode while the
	// command runs, so each key reaches the command's terminal, which
	// echoes it.
	In io.Reader
	// Out is the user's screen: the command's output, token redacted.
	Out io.Writer
}

// Run runs o.Command on a new pseudo-terminal, copies the user's input to
// it and its output, through a Redactor, to o.Out, and returns the token
// the command printed. The token is held in memory only: nothing is
// written to a file.
func Run(ctx context.Context, o Options) (string, error) {
	if len(o.Command) == 0 {
		return "", errors.New("setuptoken: no command")
	}
	master, slavePath, err := console.NewPty()
	if err != nil {
		return "", fmt.Errorf("setuptoken: opening a pseudo-terminal: %w", err)
	}
	defer master.Close()
	slave, err := os.OpenFile(slavePath, os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		return "", fmt.Errorf("setuptoken: opening %s: %w", slavePath, err)
	}
	defer slave.Close()

	size := console.WinSize{Width: MinWidth, Height: 24}
	if f, ok := o.In.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		fd := int(f.Fd())
		if w, h, err := term.GetSize(fd); err == nil {
			size.Height = uint16(h)
			size.Width = uint16(max(w, MinWidth))
		}
		old, err := term.MakeRaw(fd)
		if err != nil {
			return "", fmt.Errorf("setuptoken: terminal: %w", err)
		}
		defer term.Restore(fd, old)
	}
	if err := master.Resize(size); err != nil {
		return "", fmt.Errorf("setuptoken: terminal size: %w", err)
	}

	cmd := exec.CommandContext(ctx, o.Command[0], o.Command[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
	// Its own session with the pseudo-terminal as controlling terminal,
	// as a shell would start it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := cmd.Start(); err != nil {
		return "", fmt.Errorf("setuptoken: %s: %w", o.Command[0], err)
	}
	slave.Close()

	// The copy of the user's input ends with the input, or never (a
	// terminal); it does not hold up the return.
	go io.Copy(master, o.In)

	red := &Redactor{W: o.Out}
	_, copyErr := io.Copy(red, master)
	if errors.Is(copyErr, syscall.EIO) {
		// Linux reports the end of a pseudo-terminal, once the command and
		// its children closed it, as EIO.
		copyErr = nil
	}
	closeErr := red.Close()
	waitErr := cmd.Wait()
	switch {
	case waitErr != nil:
		return "", fmt.Errorf("the sign-in (%s) failed: %v; nothing was stored", filepath.Base(o.Command[0]), waitErr)
	case copyErr != nil:
		return "", fmt.Errorf("setuptoken: reading the output: %w", copyErr)
	case closeErr != nil:
		return "", closeErr
	case red.Token() == "":
		return "", fmt.Errorf("the sign-in printed no token (%s…); nothing was stored", TokenPrefix)
	}
	return red.Token(), nil
}
