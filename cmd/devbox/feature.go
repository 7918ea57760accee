package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/urfave/cli/v2"

	"github.com/devbox-dev/devbox/features"
	"github.com/devbox-dev/devbox/internal/policy"
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
				m, tarball, col, err := buildFeature(c)
				if err != nil {
					return err
				}
				out := c.String("output")
				if err := os.MkdirAll(out, 0o755); err != nil {
					return err
				}
				for name, data := range map[string][]byte{features.TarballName(m.ID): tarball, features.CollectionFile: col} {
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
				m, tarball, col, err := buildFeature(c)
				if err != nil {
					return err
				}
				p, err := features.Publish(c.Context, c.Args().First(), m, tarball, col, remote.WithAuthFromKeychain(authn.DefaultKeychain))
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

// buildFeature reads the feature's files (and only those) and packages them.
func buildFeature(c *cli.Context) (*features.Manifest, []byte, []byte, error) {
	src := c.String("source")
	manifestPath := filepath.Join(src, features.ManifestFile)
	raw, err := os.ReadFile(manifestPath)
	if err != nil {
		return nil, nil, nil, err
	}
	m, err := features.ParseManifest(manifestPath, raw)
	if err != nil {
		return nil, nil, nil, err
	}
	install, err := os.ReadFile(filepath.Join(src, "features", "src", "devbox", "install.sh"))
	if err != nil {
		return nil, nil, nil, err
	}
	bins := map[string][]byte{}
	specs := c.StringSlice("binary")
	if len(specs) == 0 {
		if runtime.GOOS != "linux" {
			return nil, nil, nil, errors.New("--binary ARCH=FILE is required: this devbox is not a Linux binary")
		}
		self, err := os.Executable()
		if err != nil {
			return nil, nil, nil, err
		}
		specs = []string{runtime.GOARCH + "=" + self}
	}
	for _, s := range specs {
		arch, file, ok := strings.Cut(s, "=")
		if !ok {
			return nil, nil, nil, fmt.Errorf("--binary %q: want ARCH=FILE", s)
		}
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("--binary %s: %w", arch, err)
		}
		if !strings.HasPrefix(string(b[:min(4, len(b))]), "\x7fELF") {
			return nil, nil, nil, fmt.Errorf("--binary %s: %s is not a Linux executable", arch, file)
		}
		bins[arch] = b
	}
	// Only the lock's claudeCode section is read: the base image and epoch
	// are an image build's, not the feature's.
	locks := c.StringSlice("claude-lock")
	if len(locks) == 0 {
		if def := filepath.Join(src, "features", "claude-code.lock.json"); fileExists(def) {
			locks = []string{def}
		}
	}
	var claude []policy.LockedClaudeCode
	for _, f := range locks {
		l, err := policy.ReadLock(f)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("--claude-lock: %w", err)
		}
		if l.ClaudeCode.Version == policy.ClaudeCodeNone {
			return nil, nil, nil, fmt.Errorf("--claude-lock %s: the lock pins no Claude Code (claudeCode none)", f)
		}
		claude = append(claude, l.ClaudeCode)
	}
	files, err := features.Source{Manifest: raw, Install: install, Binaries: bins, Claude: claude}.Files()
	if err != nil {
		return nil, nil, nil, err
	}
	// A fixed mtime: the same sources give the same digest.
	tarball, err := features.Tar(files, time.Unix(0, 0))
	if err != nil {
		return nil, nil, nil, err
	}
	col, err := features.Collection(m)
	if err != nil {
		return nil, nil, nil, err
	}
	return m, tarball, col, nil
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
