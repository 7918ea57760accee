package main

import (
	"errors"

	"github.com/urfave/cli/v2"
)

// SCAFFOLD: replaced by the issue that owns this command.
var pushCommand = &cli.Command{
	Name:   "push",
	Usage:  "(not built yet)",
	Action: func(*cli.Context) error { return errors.New("push: not built yet") },
}
