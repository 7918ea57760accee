package main

import (
	"errors"

	"github.com/urfave/cli/v2"
)

// SCAFFOLD: replaced by the issue that owns this command.
var lockCommand = &cli.Command{
	Name:   "lock",
	Usage:  "(not built yet)",
	Action: func(*cli.Context) error { return errors.New("lock: not built yet") },
}
