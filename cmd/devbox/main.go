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
		// A command that must exit with another status (`devbox run`
		// passes its command's through) returns cli.Exit, which urfave/cli
		// turns into os.Exit before Run returns; whatever gets here is 1.
		fmt.Fprintf(os.Stderr, "devbox: %v\n", err)
		os.Exit(1)
	}
}
