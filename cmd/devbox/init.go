package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"

	"github.com/urfave/cli/v2"

	"github.com/devbox-dev/devbox/internal/devcontainer"
	"github.com/devbox-dev/devbox/internal/policy"
)

var initCommand = &cli.Command{
	Name:      "init",
	Usage:     "write .devcontainer/ (policy, devcontainer.json, Dockerfile) for this repository",
	ArgsUsage: "[DIR]",
	Description: `Writes .devcontainer/devbox.policy.jsonc (the default policy, with the
presets the repository's files call for) and .devcontainer/devcontainer.json,
so VS Code "Reopen in Container" or "devcontainer up" starts a fenced
container. An existing devcontainer.json is patched in place, comments kept,
and every changed key is printed. Running init again changes nothing.

By default the image is built from the repository: init writes
.devcontainer/Dockerfile and copies its own binary (Linux only; see
--binary) to .devcontainer/.devbox/devbox, which is git-ignored. With
--image the dev container uses a prebuilt image pinned by digest instead.`,
	Flags: []cli.Flag{
		&cli.StringFlag{
			Name:  "image",
			Usage: "use the prebuilt image `REF@sha256:DIGEST` instead of building from the repository",
		},
		&cli.BoolFlag{
			Name:  "force",
			Usage: "overwrite existing files with fresh ones instead of keeping or patching them",
		},
		&cli.StringFlag{
			Name:    "binary",
			Usage:   "Linux devbox binary `FILE` to copy into the build context (default: this devbox, on Linux)",
			EnvVars: []string{"DEVBOX_LINUX_BINARY"},
		},
		&cli.BoolFlag{
			Name: "lock",
			Usage: "build mode: resolve .devcontainer/devbox.lock.json when it is missing or stale, so the Dockerfile " +
				"is written in this one run (contacts the base image's registry and the npm registry; without it init never touches the network)",
		},
		&cli.StringFlag{
			Name:  "platform",
			Usage: "image `PLATFORM` for build mode: linux/amd64 or linux/arm64",
			Value: "linux/" + runtime.GOARCH,
		},
	},
	Action: func(c *cli.Context) error {
		if c.NArg() > 1 {
			return errors.New("init: at most one DIR argument")
		}
		opts := devcontainer.InitOptions{
			Root:   ".",
			Image:  c.String("image"),
			Force:  c.Bool("force"),
			Binary: c.String("binary"),
		}
		if c.NArg() == 1 {
			opts.Root = c.Args().First()
		}
		if fi, err := os.Stat(opts.Root); err != nil || !fi.IsDir() {
			return fmt.Errorf("init: %s is not a directory", opts.Root)
		}
		if opts.Image == "" {
			opts.Platform = c.String("platform")
			opts.Version = version
			if opts.Binary == "" {
				if runtime.GOOS != "linux" {
					return fmt.Errorf("init: this devbox is built for %s; pass --binary with a Linux build (GOOS=linux go build ./cmd/devbox) or use --image", runtime.GOOS)
				}
				self, err := os.Executable()
				if err != nil {
					return fmt.Errorf("init: finding this binary to copy: %w", err)
				}
				opts.Binary = self
			}
		}
		lock := c.Bool("lock") && opts.Image == ""
		polPath := filepath.Join(opts.Root, devcontainer.PolicyFile)
		if _, err := os.Stat(polPath); lock && err == nil {
			// The policy is there: lock it first, so a stale lock is
			// updated before init checks the build against it.
			if err := lockPolicy(c.Context, polPath, opts.Platform); err != nil {
				return err
			}
			lock = false
		}
		results, err := devcontainer.Init(opts)
		if err != nil {
			return err
		}
		if lock && pending(results) {
			// A new policy: init wrote it, now lock it and write what
			// waited for the lock.
			if results, err = lockAndInitAgain(c.Context, opts, results); err != nil {
				return err
			}
		}
		for _, r := range results {
			fmt.Fprintln(c.App.Writer, r)
		}
		return nil
	},
}

// lockPolicy makes the lock beside the policy at path current for platform,
// resolving it over the network when it is missing or stale.
func lockPolicy(ctx context.Context, path, platform string) error {
	p, err := policy.Load(path)
	if err != nil {
		return err
	}
	if _, err := ensureLock(ctx, p, []string{platform}, false); err != nil {
		return fmt.Errorf("init --lock: %w", err)
	}
	return nil
}

func pending(results []devcontainer.FileResult) bool {
	for _, r := range results {
		if r.Status == devcontainer.Pending {
			return true
		}
	}
	return false
}

// lockAndInitAgain resolves the lock of the policy the first init run wrote
// or kept, then runs init again so the pending build files are written. It
// reports, per file, what happened over both runs: a file the first run
// created stays "created", not "unchanged".
func lockAndInitAgain(ctx context.Context, opts devcontainer.InitOptions, first []devcontainer.FileResult) ([]devcontainer.FileResult, error) {
	if err := lockPolicy(ctx, filepath.Join(opts.Root, devcontainer.PolicyFile), opts.Platform); err != nil {
		return nil, err
	}
	second, err := devcontainer.Init(opts)
	if err != nil {
		return nil, err
	}
	byPath := map[string]devcontainer.FileResult{}
	for _, r := range first {
		byPath[r.Path] = r
	}
	for i, r := range second {
		if f, ok := byPath[r.Path]; ok && r.Status == devcontainer.Unchanged {
			second[i] = f
		}
	}
	return second, nil
}
