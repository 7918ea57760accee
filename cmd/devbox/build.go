package main

import (
	"errors"

	"github.com/urfave/cli/v2"
)

// SCAFFOLD: replaced by the issue that owns this command.
var buildCommand = &cli.Command{
	Name:   "build",
	Usage:  "(not built yet)",
	Action: func(*cli.Context) error { return errors.New("build: not built yet") },
}
