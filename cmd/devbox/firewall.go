package main

import (
	"errors"

	"github.com/urfave/cli/v2"
)

// SCAFFOLD: replaced by the issue that owns this command.
var firewallCommand = &cli.Command{
	Name:   "firewall",
	Usage:  "(not built yet)",
	Action: func(*cli.Context) error { return errors.New("firewall: not built yet") },
}
