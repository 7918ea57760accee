//go:build !linux

package main

import (
	"errors"

	"github.com/urfave/cli/v2"
)

var escapeCommand = &cli.Command{
	Name:  "escape",
	Usage: "score the sandbox this runs in (Linux only)",
	Action: func(*cli.Context) error {
		return errors.New("devbox escape runs inside a Linux sandbox")
	},
}
