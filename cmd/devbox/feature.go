package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/urfave/cli/v2"

	"github.com/devbox-dev/devbox/features"
)

var featureFlags = []cli.Flag{
	&cli.StringFlag{Name: "source", Value: ".", Usage: "repository `DIR` holding devcontainer-feature.json and features/src/devbox/install.sh"},
	&cli.StringSliceFlag{Name: "claude-lock", Usage: "devbox.lock.json `FILE` (from `devbox lock`) whose Claude Code pins the claudeCode option accepts; repeatable (default: features/claude-code.lock.json under --source, if present)"},
	&cli.StringSliceFlag{Name: "binary", Usage: "Linux devbox binary to ship, as `ARCH=FILE` (amd64, arm64); repeatable (default: this devbox, on Linux)"},
}

var featureCommand = &cli.Command{
	Name:  "feature",
	Usage: "package or publish the devbox Dev Container Feature",
	Subcommands: []*cli.Command{
		{
			Name:  "package",
			Usage: "write devcontainer-feature-devbox.tgz and devcontainer-collection.json",
			Flags: append([]cli.Flag{&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Value: "output", Usage: "output `DIR`"}}, featureFlags...),
			Action: func(c *cli.Context) error {
				pkg, err := buildFeature(c)
				if err != nil {
					return err
				}
				out := c.String("output")
				if err := os.MkdirAll(out, 0o755); err != nil {
					return err
				}
				for name, data := range map[string][]byte{features.TarballName(pkg.Manifest.ID): pkg.Tarball, features.CollectionFile: pkg.Collection} {
					if err := os.WriteFile(filepath.Join(out, name), data, 0o644); err != nil {
						return err
					}
					fmt.Fprintf(c.App.Writer, "wrote %s (%d bytes)\n", filepath.Join(out, name), len(data))
				}
				return nil
			},
		},
		{
			Name:      "publish",
			Usage:     "push the feature to NAMESPACE/devbox with tags X, X.Y, X.Y.Z, latest, and the collection to NAMESPACE",
			ArgsUsage: "NAMESPACE",
			Flags:     featureFlags,
			Action: func(c *cli.Context) error {
				if c.NArg() != 1 {
					return errors.New("feature publish: want one NAMESPACE argument (registry/owner/repo)")
				}
				pkg, err := buildFeature(c)
				if err != nil {
					return err
				}
				p, err := features.Publish(c.Context, c.Args().First(), pkg.Manifest, pkg.Tarball, pkg.Collection, remote.WithAuthFromKeychain(authn.DefaultKeychain))
				if err != nil {
					return err
				}
				fmt.Fprintf(c.App.Writer, "tags %s\n", strings.Join(p.Tags, ", "))
				for _, s := range p.Skipped {
					fmt.Fprintf(c.App.Writer, "kept tag %s: it points at a newer version\n", s)
				}
				fmt.Fprintf(c.App.Writer, "collection %s\n", p.Collection)
				fmt.Fprintln(c.App.Writer, p.Feature)
				return nil
			},
		},
	},
}

// buildFeature packages the feature from the flags: --binary ARCH=FILE
// (default: this devbox, on Linux), --claude-lock, --source.
func buildFeature(c *cli.Context) (*features.Package, error) {
	o := features.BuildOptions{Source: c.String("source"), Binaries: map[string]string{}, ClaudeLocks: c.StringSlice("claude-lock")}
	specs := c.StringSlice("binary")
	if len(specs) == 0 {
		if runtime.GOOS != "linux" {
			return nil, errors.New("--binary ARCH=FILE is required: this devbox is not a Linux binary")
		}
		self, err := os.Executable()
		if err != nil {
			return nil, err
		}
		specs = []string{runtime.GOARCH + "=" + self}
	}
	for _, s := range specs {
		arch, file, ok := strings.Cut(s, "=")
		if !ok {
			return nil, fmt.Errorf("--binary %q: want ARCH=FILE", s)
		}
		o.Binaries[arch] = file
	}
	return features.Build(o)
}
