package main

import (
	"errors"

	"github.com/urfave/cli/v2"
)

// SCAFFOLD: replaced by the issue that owns this command.
var policyCommand = &cli.Command{
	Name:   "policy",
	Usage:  "(not built yet)",
	Action: func(*cli.Context) error { return errors.New("policy: not built yet") },
}
