package main

import (
	"errors"

	"github.com/urfave/cli/v2"
)

// SCAFFOLD: replaced by the issue that owns this command.
var entrypointCommand = &cli.Command{
	Name:   "entrypoint",
	Usage:  "(not built yet)",
	Action: func(*cli.Context) error { return errors.New("entrypoint: not built yet") },
}
