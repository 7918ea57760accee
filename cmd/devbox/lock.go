package main

import (
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/devbox-dev/devbox/internal/pin"
)

var lockCommand = &cli.Command{
	Name:      "lock",
	Usage:     "pin the build inputs of a policy in devbox.lock.json",
	ArgsUsage: "[FILE]",
	Description: `Resolves the policy's image.base to a digest (credentials from the Docker
config: $DOCKER_CONFIG/config.json or ~/.docker/config.json), pins the
Claude Code native package for each platform by the sha512 integrity the
npm registry publishes ($npm_config_registry, default
https://registry.npmjs.org/), and records the devbox version and the
SOURCE_DATE_EPOCH the image's timestamps are clamped to. The lock is written
beside the policy and prints its path. Debian package versions are not
pinned (the mirror moves); the lock says so in "unpinned".`,
	Flags: []cli.Flag{
		policyFileFlag,
		platformFlag,
		&cli.StringFlag{Name: "npm-registry", Usage: "npm registry `URL` (default $npm_config_registry or https://registry.npmjs.org/)"},
		&cli.Int64Flag{Name: "source-date-epoch", Usage: "clamp image timestamps to `SECONDS` since 1970 (default: the existing lock's, else $SOURCE_DATE_EPOCH, else now)", Value: -1},
	},
	Action: func(c *cli.Context) error {
		p, err := loadPolicyFlag(c)
		if err != nil {
			return err
		}
		o := pinOptions()
		o.NPMRegistry = c.String("npm-registry")
		if e := c.Int64("source-date-epoch"); e >= 0 {
			o.SourceDateEpoch = &e
		}
		path, err := pin.Relock(c.Context, p, platformsFlag(c, pin.DefaultPlatforms), o)
		if err != nil {
			return err
		}
		fmt.Fprintln(c.App.Writer, path)
		return nil
	},
}

// pinOptions are the lock options every command shares: this devbox's
// version, and notes on stderr.
func pinOptions() pin.Options {
	return pin.Options{Devbox: version, Logf: warnf}
}
