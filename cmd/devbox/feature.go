package main

import (
	"errors"

	"github.com/urfave/cli/v2"
)

// SCAFFOLD: replaced by the issue that owns this command.
var featureCommand = &cli.Command{
	Name:   "feature",
	Usage:  "(not built yet)",
	Action: func(*cli.Context) error { return errors.New("feature: not built yet") },
}
