package entrypoint

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"time"
)

// processStart is when this process started, for the elapsed time the
// entrypoint prints (the devbox part of container start → fenced).
var processStart = time.Now()

// startEnv passes the parent entrypoint's start time to the child that
// installs the fence, so the elapsed time it prints covers both.
const startEnv = "DEVBOX_ENTRYPOINT_START"

// StartTime is when the entrypoint started: the parent's start when this
// process is the child FenceInChild runs, else this process's own.
func StartTime() time.Time {
	if v, err := strconv.ParseInt(os.Getenv(startEnv), 10, 64); err == nil {
		return time.Unix(0, v)
	}
	return processStart
}

// FenceInChild installs the fence from a child process, argv (this binary's
// `entrypoint` without a command), and waits for it. Fencing in a child
// keeps the DNS filter it starts from being a child of the command this
// process then execs, which would never reap it (a dead filter would
// linger as a zombie); with an init (the label's init: true, docker run
// --init) the orphaned filter is reaped by it.
//
// The error is nil only when the fence is up. A child that failed the
// fence has printed its banner; any other failure (killed, could not
// start) is printed on stderr here.
func FenceInChild(ctx context.Context, argv []string, stdout, stderr io.Writer) error {
	child := exec.CommandContext(ctx, argv[0], argv[1:]...)
	child.Stdout, child.Stderr = stdout, stderr
	child.Env = append(os.Environ(), fmt.Sprintf("%s=%d", startEnv, processStart.UnixNano()))
	err := child.Run()
	if err == nil {
		return nil
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		fmt.Fprintf(stderr, "devbox: entrypoint: installing the fence: %v; egress stays denied\n", err)
	}
	return fmt.Errorf("installing the fence: %w", err)
}
