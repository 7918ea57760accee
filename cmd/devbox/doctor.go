package main

import (
	"errors"

	"github.com/urfave/cli/v2"
)

// SCAFFOLD: replaced by the issue that owns this command.
var doctorCommand = &cli.Command{
	Name:   "doctor",
	Usage:  "(not built yet)",
	Action: func(*cli.Context) error { return errors.New("doctor: not built yet") },
}
