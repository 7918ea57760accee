package main

import (
	"errors"

	"github.com/urfave/cli/v2"
)

// SCAFFOLD: replaced by the issue that owns this command.
var runCommand = &cli.Command{
	Name:   "run",
	Usage:  "(not built yet)",
	Action: func(*cli.Context) error { return errors.New("run: not built yet") },
}
