package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/tailscale/hujson"
	"github.com/urfave/cli/v2"

	"github.com/devbox-dev/devbox/internal/baseline"
	"github.com/devbox-dev/devbox/internal/devcontainer"
	"github.com/devbox-dev/devbox/internal/image"
	"github.com/devbox-dev/devbox/internal/layout"
	"github.com/devbox-dev/devbox/internal/policy"
	"github.com/devbox-dev/devbox/internal/registry"
)

var (
	baselineFlag = &cli.StringFlag{Name: "baseline", Usage: "team baseline policy `FILE` the policy must only narrow " +
		"(default: the baseline label of the image .devcontainer/devcontainer.json names)"}
	noImageBaselineFlag = &cli.BoolFlag{Name: "no-image-baseline", Usage: "do not read the baseline of the image devcontainer.json names (no registry access)"}
)

// findBaseline returns the baseline the policy commands check against:
// --baseline FILE, else layout.BaselinePath when it exists (inside a team
// image), else the label of the image devcontainer.json names, else none
// (nil).
func findBaseline(c *cli.Context) (*policy.Policy, string, error) {
	if f := c.String(baselineFlag.Name); f != "" {
		p, err := baseline.Load(f)
		return p, f, err
	}
	if _, err := os.Stat(layout.BaselinePath); err == nil {
		// Inside a team image.
		p, err := baseline.Load(layout.BaselinePath)
		return p, layout.BaselinePath, err
	}
	if c.Bool(noImageBaselineFlag.Name) {
		return nil, "", nil
	}
	ref, err := devcontainerImage(devcontainer.ConfigFile)
	if err != nil || ref == "" {
		return nil, "", err
	}
	img, err := registry.Pull(c.Context, ref, "linux/amd64")
	if err != nil {
		return nil, "", fmt.Errorf("reading the baseline of %s (from %s; --no-image-baseline skips it): %w", ref, devcontainer.ConfigFile, err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, "", fmt.Errorf("reading the baseline of %s: %w", ref, err)
	}
	value, ok := cf.Config.Labels[image.LabelBaseline]
	if !ok {
		return nil, "", nil // not a team image
	}
	p, err := baseline.FromLabel(value, cf.Config.Labels[image.LabelBaselineDigest])
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w", ref, err)
	}
	return p, ref + " (" + cf.Config.Labels[image.LabelBaselineDigest] + ")", nil
}

// devcontainerImage returns the "image" of the devcontainer.json at path
// ("" when the file or the key is missing: build mode).
func devcontainerImage(path string) (string, error) {
	raw, err := os.ReadFile(filepath.FromSlash(path))
	if os.IsNotExist(err) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	std, err := hujson.Standardize(raw)
	if err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	var cfg struct {
		Image string `json:"image"`
	}
	if err := json.Unmarshal(std, &cfg); err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	return cfg.Image, nil
}
