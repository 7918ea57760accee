package main

import (
	"errors"

	"github.com/urfave/cli/v2"
)

// SCAFFOLD: replaced by the issue that owns this command.
var initCommand = &cli.Command{
	Name:   "init",
	Usage:  "(not built yet)",
	Action: func(*cli.Context) error { return errors.New("init: not built yet") },
}
