package main

import (
	"errors"
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/devbox-dev/devbox/internal/registry"
)

var pushCommand = &cli.Command{
	Name:      "push",
	Usage:     "copy a built image (OCI layout directory or tarball) to registries",
	ArgsUsage: "SRC DEST...",
	Description: `Copies the image in SRC (what "devbox build --output oci=DIR" or
oci=FILE.tar wrote) to each DEST ("host/repo" or "host/repo:tag") without
changing a byte, so the digest stays the one that was built and tested.
Prints DEST-REPO@sha256:… per destination. Credentials come from the Docker
config ($DOCKER_CONFIG/config.json or ~/.docker/config.json).`,
	Action: func(c *cli.Context) error {
		if c.NArg() < 2 {
			return errors.New("push: want SRC and at least one DEST")
		}
		src := c.Args().First()
		b, err := registry.Open(src)
		if err != nil {
			return fmt.Errorf("push: %w", err)
		}
		defer b.Close()
		for _, dest := range c.Args().Tail() {
			d, err := registry.Copy(c.Context, b, dest)
			if err != nil {
				return fmt.Errorf("push: %w", err)
			}
			fmt.Fprintln(c.App.Writer, d.String())
		}
		return nil
	},
}
