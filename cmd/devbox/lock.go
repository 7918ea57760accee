package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/devbox-dev/devbox/internal/image"
	"github.com/devbox-dev/devbox/internal/policy"
	"github.com/devbox-dev/devbox/internal/registry"
)

// lockPlatforms are pinned by default: the npm metadata is small, and a lock
// that covers both lets anyone build for either.
var lockPlatforms = []string{"linux/amd64", "linux/arm64"}

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
		path := policy.LockPath(p.Path)
		old, err := policy.ReadLock(path)
		if err != nil && !errors.Is(err, policy.ErrNoLock) {
			warnf("replacing the unreadable lock: %v", err)
			old = nil
		}
		epoch := c.Int64("source-date-epoch")
		l, err := resolveLock(c.Context, p, old, platformsFlag(c, lockPlatforms), c.String("npm-registry"), epoch)
		if err != nil {
			return err
		}
		if err := policy.WriteLock(path, l); err != nil {
			return err
		}
		fmt.Fprintln(c.App.Writer, path)
		return nil
	},
}

// resolveLock pins p's build inputs for plats. It keeps old's
// SOURCE_DATE_EPOCH when there is one, so relocking changes only what moved.
func resolveLock(ctx context.Context, p *policy.Policy, old *policy.Lock, plats []string, npmRegistry string, epoch int64) (*policy.Lock, error) {
	if p.Image.Base == "" {
		return nil, fmt.Errorf("%s: image.base is empty: nothing to lock", p.Path)
	}
	l := &policy.Lock{
		Version: policy.LockVersion,
		Devbox:  version,
		Unpinned: []string{
			"Debian packages: versions come from the Debian mirror at build time (no snapshot pinned)",
		},
	}
	switch {
	case epoch >= 0:
		l.SourceDateEpoch = epoch
	case old != nil:
		l.SourceDateEpoch = old.SourceDateEpoch
	case os.Getenv("SOURCE_DATE_EPOCH") != "":
		e, err := strconv.ParseInt(os.Getenv("SOURCE_DATE_EPOCH"), 10, 64)
		if err != nil || e < 0 {
			return nil, fmt.Errorf("SOURCE_DATE_EPOCH %q is not a number of seconds", os.Getenv("SOURCE_DATE_EPOCH"))
		}
		l.SourceDateEpoch = e
	default:
		l.SourceDateEpoch = time.Now().Unix()
	}

	d, err := registry.Resolve(ctx, p.Image.Base)
	if err != nil {
		return nil, fmt.Errorf("%s: image.base: %w", p.Path, err)
	}
	l.Base = policy.LockedImage{Ref: p.Image.Base, Digest: d.DigestStr()}

	l.ClaudeCode.Version = p.Agent.ClaudeCode
	if p.Agent.ClaudeCode != policy.ClaudeCodeNone {
		if npmRegistry == "" {
			npmRegistry = registry.NPMRegistry()
		}
		l.ClaudeCode.Platforms = map[string]policy.LockedPackage{}
		for _, plat := range plats {
			pkg, err := image.ClaudePackage(plat)
			if err != nil {
				return nil, fmt.Errorf("--platform: %w", err)
			}
			lp, err := registry.NPMPackage(ctx, npmRegistry, pkg, p.Agent.ClaudeCode)
			if err != nil {
				return nil, fmt.Errorf("%s: agent.claudeCode %s: %w", p.Path, p.Agent.ClaudeCode, err)
			}
			l.ClaudeCode.Platforms[plat] = lp
		}
	}
	return l, nil
}
