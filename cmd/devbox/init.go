package main

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/devbox-dev/devbox/internal/devcontainer"
	"github.com/devbox-dev/devbox/internal/gitaudit"
	"github.com/devbox-dev/devbox/internal/pin"
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
			Name: "isolated",
			Usage: "keep the repository in a per-container volume cloned from a read-only bind of this checkout, " +
				"so the container never writes the checkout; bring commits back with `devbox pull` (docs/git.md)",
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
			Name: "engine",
			Usage: "container `ENGINE` the dev container runs on: docker, podman (rootless) or podman-rootful " +
				"(adds runArgs " + devcontainer.PodmanRootfulRunArg + ", which rootful Podman needs; docs/runtime.md)",
			Value: "docker",
		},
		// devbox up runs init and then starts the container itself: the
		// "next:" hint would name a step it is already taking.
		&cli.BoolFlag{Name: "no-next", Hidden: true},
		&cli.StringFlag{
			Name:  "platform",
			Usage: "image `PLATFORM` for build mode: linux/amd64 or linux/arm64",
			Value: "linux/" + runtime.GOARCH,
		},
	},
	Action: func(c *cli.Context) error {
		root, err := dirArg(c, "init")
		if err != nil {
			return err
		}
		opts := devcontainer.InitOptions{
			Root:     root,
			Image:    c.String("image"),
			Force:    c.Bool("force"),
			Binary:   c.String("binary"),
			Isolated: c.Bool("isolated"),
			Engine:   c.String("engine"),
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
		initRepo := devcontainer.Init
		if c.Bool("lock") && opts.Image == "" {
			initRepo = func(opts devcontainer.InitOptions) ([]devcontainer.FileResult, error) {
				return pin.InitLocked(c.Context, opts, pinOptions())
			}
		}
		results, err := initRepo(opts)
		if err != nil {
			return err
		}
		for _, r := range results {
			fmt.Fprintln(c.App.Writer, r)
		}
		if err := auditBaseline(c, opts.Root); err != nil {
			return err
		}
		if c.Bool("no-next") {
			return nil
		}
		for _, l := range devcontainer.NextStep(opts.Root, opts.Engine, results, exec.LookPath) {
			fmt.Fprintln(c.App.Writer, l)
		}
		return nil
	},
}

// auditBaseline records the git audit's first state for the workspace, so
// that the first start passes `devbox audit` in the initializeCommand: what
// is in the checkout when the user sets devbox up was put there before any
// container ran. It prints what it accepted that could run (hooks, keys),
// for the user to look at once.
func auditBaseline(c *cli.Context, root string) error {
	d, path, created, err := gitaudit.Baseline(root, "", time.Now())
	if err != nil {
		return fmt.Errorf("init: recording the git audit's first state: %w", err)
	}
	if !created {
		return nil
	}
	var risky []gitaudit.Change
	for _, ch := range d.Changes {
		if ch.Kind != gitaudit.GitDir && ch.Kind != gitaudit.GitLink && ch.Kind != gitaudit.File { // File: hook samples and other non-data files git does not run
			risky = append(risky, ch)
		}
	}
	fmt.Fprintf(c.App.Writer, "recorded    the git audit's first state (%s): %d git directories, links and other files", path, len(d.Changes)-len(risky))
	if len(risky) > 0 {
		fmt.Fprintf(c.App.Writer, ", and these, accepted as they are now:")
		for _, ch := range risky {
			fmt.Fprintf(c.App.Writer, "\n    %s", ch)
		}
	}
	fmt.Fprintln(c.App.Writer)
	return nil
}
