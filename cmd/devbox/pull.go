package main

import (
	"fmt"
	"path/filepath"

	"github.com/urfave/cli/v2"

	"github.com/devbox-dev/devbox/internal/devcontainer"
	"github.com/devbox-dev/devbox/internal/isolated"
	"github.com/devbox-dev/devbox/internal/policy"
	"github.com/devbox-dev/devbox/internal/workspace"
)

var pullCommand = &cli.Command{
	Name:      "pull",
	Usage:     "on the host, isolated mode: fetch the dev container's branches into this repository as refs/remotes/devbox/*",
	ArgsUsage: "[DIR]",
	Description: `With ` + "`devbox init --isolated`" + ` the repository lives in a per-container volume and
the container never writes the checkout. devbox pull brings the work back:
the container bundles its branches (git bundle, run as the policy's user,
never root), and git on this host fetches the bundle with hooks, fsmonitor
and every transport but the bundle off, checking each object as it
arrives. Only objects and refs move; local branches are left alone: review
and merge refs/remotes/devbox/BRANCH yourself.`,
	Flags: []cli.Flag{
		dockerPathFlag, containerFlag,
		&cli.StringFlag{Name: "remote", Value: "devbox", Usage: "branches land in refs/remotes/`NAME`/"},
	},
	Action: func(c *cli.Context) error {
		root, err := dirArg(c, "pull")
		if err != nil {
			return err
		}
		p, err := policy.Load(filepath.Join(root, devcontainer.PolicyFile))
		if err != nil {
			return fmt.Errorf("pull: the agent's user comes from the policy: %w", err)
		}
		docker, err := engine(c)
		if err != nil {
			return fmt.Errorf("pull: %w", err)
		}
		refs, err := isolated.Pull(c.Context, isolated.PullOptions{
			Root:      root,
			Docker:    docker,
			Container: c.String("container"),
			User:      p.Image.User.Name,
			Remote:    c.String("remote"),
			Run:       workspace.ExecRunner{},
		})
		if err != nil {
			return fmt.Errorf("pull: %w", err)
		}
		fmt.Fprint(c.App.Writer, refs)
		return nil
	},
}
