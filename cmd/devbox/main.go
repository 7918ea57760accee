// Command devbox turns a sandbox policy into a fenced dev container for AI
// coding agents. See README.md.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := newApp().RunContext(ctx, os.Args)
	stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "devbox: %v\n", err)
		os.Exit(exitCode(err))
	}
}
