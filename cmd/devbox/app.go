package main

import (
	"fmt"
	"runtime/debug"

	"github.com/urfave/cli/v2"
)

// version and commit are set at link time:
//
//	go build -ldflags "-X main.version=1.2.3 -X main.commit=$(git rev-parse HEAD)"
//
// When unset, commit falls back to the VCS stamp Go embeds in the binary.
var (
	version = "0.1.0-dev"
	commit  = ""
)

func buildCommit() string {
	if commit != "" {
		return commit
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" {
				return s.Value
			}
		}
	}
	return "unknown"
}

func newApp() *cli.App {
	cli.VersionPrinter = func(c *cli.Context) {
		fmt.Fprintf(c.App.Writer, "devbox %s (commit %s)\n", c.App.Version, buildCommit())
	}
	return &cli.App{
		Name:                 "devbox",
		Usage:                "turn a sandbox policy into a fenced dev container for AI coding agents",
		Version:              version,
		EnableBashCompletion: true,
		// Without this, urfave/cli v2 splits slice-flag values on commas.
		DisableSliceFlagSeparator: true,
		CommandNotFound: func(c *cli.Context, name string) {
			fmt.Fprintf(c.App.ErrWriter, "devbox: unknown command %q; see devbox --help\n", name)
			cli.OsExiter(2)
		},
		Commands: []*cli.Command{
			// Each command group lives in its own file; keep this list sorted
			// the way `devbox --help` should show it.
			initCommand,
			upCommand,
			loginCommand,
			claudeCommand,
			shellCommand,
			auditCommand,
			pullCommand,
			policyCommand,
			lockCommand,
			buildCommand,
			pushCommand,
			firewallCommand,
			entrypointCommand,
			kubeCommand,
			secretCommand,
			gatewayCommand,
			runCommand,
			doctorCommand,
			escapeCommand,
			featureCommand,
			completionCommand,
		},
	}
}
