// Package pin keeps a policy's lock (devbox.lock.json, beside the policy)
// current: it resolves the build inputs the policy names, the base image to
// a digest and Claude Code to the sha512 of each platform's npm package, as
// `devbox lock`, `devbox build` and `devbox init --lock` need them.
package pin

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"time"

	"github.com/devbox-dev/devbox/internal/image"
	"github.com/devbox-dev/devbox/internal/policy"
	"github.com/devbox-dev/devbox/internal/registry"
)

// DefaultPlatforms are pinned by default: the npm metadata is small, and a
// lock that covers both lets anyone build for either.
var DefaultPlatforms = []string{"linux/amd64", "linux/arm64"}

// Options say how to resolve a lock.
type Options struct {
	// Devbox is this devbox's version. It is recorded in the lock, and a
	// lock another version wrote is stale.
	Devbox string
	// NPMRegistry is the npm registry's URL (default
	// registry.NPMRegistry(): $npm_config_registry, else npmjs.org).
	NPMRegistry string
	// SourceDateEpoch clamps the image's timestamps, in seconds since
	// 1970. nil keeps the old lock's, else takes $SOURCE_DATE_EPOCH, else
	// now.
	SourceDateEpoch *int64
	// Logf gets what the caller should tell the user: a lock missing,
	// stale or unreadable and therefore resolved again (default: dropped).
	Logf func(format string, args ...any)
}

func (o Options) logf(format string, args ...any) {
	if o.Logf != nil {
		o.Logf(format, args...)
	}
}

// Resolve pins p's build inputs for plats, over the network (the base
// image's registry, the npm registry). It keeps old's SOURCE_DATE_EPOCH
// when there is one, so relocking changes only what moved.
func Resolve(ctx context.Context, p *policy.Policy, old *policy.Lock, plats []string, o Options) (*policy.Lock, error) {
	if p.Image.Base == "" {
		return nil, fmt.Errorf("%s: image.base is empty: nothing to lock", p.Path)
	}
	l := &policy.Lock{
		Version: policy.LockVersion,
		Devbox:  o.Devbox,
		Unpinned: []string{
			"Debian packages: versions come from the Debian mirror at build time (no snapshot pinned)",
		},
	}
	switch env := os.Getenv("SOURCE_DATE_EPOCH"); {
	case o.SourceDateEpoch != nil:
		l.SourceDateEpoch = *o.SourceDateEpoch
	case old != nil:
		l.SourceDateEpoch = old.SourceDateEpoch
	case env != "":
		e, err := strconv.ParseInt(env, 10, 64)
		if err != nil || e < 0 {
			return nil, fmt.Errorf("SOURCE_DATE_EPOCH %q is not a number of seconds", env)
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
		npm := o.NPMRegistry
		if npm == "" {
			npm = registry.NPMRegistry()
		}
		l.ClaudeCode.Platforms = map[string]policy.LockedPackage{}
		for _, plat := range plats {
			pkg, err := image.ClaudePackage(plat)
			if err != nil {
				return nil, fmt.Errorf("--platform: %w", err)
			}
			lp, err := registry.NPMPackage(ctx, npm, pkg, p.Agent.ClaudeCode)
			if err != nil {
				return nil, fmt.Errorf("%s: agent.claudeCode %s: %w", p.Path, p.Agent.ClaudeCode, err)
			}
			l.ClaudeCode.Platforms[plat] = lp
		}
	}
	return l, nil
}

// Relock resolves p's lock for plats again and writes it beside p, whatever
// is there (`devbox lock`). It returns the lock's path.
func Relock(ctx context.Context, p *policy.Policy, plats []string, o Options) (string, error) {
	path := policy.LockPath(p.Path)
	old, err := policy.ReadLock(path)
	if err != nil && !errors.Is(err, policy.ErrNoLock) {
		o.logf("replacing the unreadable lock: %v", err)
		old = nil
	}
	l, err := Resolve(ctx, p, old, plats, o)
	if err != nil {
		return "", err
	}
	return path, policy.WriteLock(path, l)
}

// Ensure returns p's lock for plats. A current lock is returned as it is,
// without the network. With frozen a missing or stale lock is an error;
// otherwise it is resolved again (for plats and DefaultPlatforms) and
// written.
func Ensure(ctx context.Context, p *policy.Policy, plats []string, frozen bool, o Options) (*policy.Lock, error) {
	path := policy.LockPath(p.Path)
	l, err := policy.ReadLock(path)
	if err == nil {
		if err = l.Check(p, o.Devbox, plats); err != nil {
			err = fmt.Errorf("%s: %w", path, err)
		}
	}
	if err == nil {
		return l, nil
	}
	if frozen {
		return nil, fmt.Errorf("--frozen: %w", err)
	}
	if errors.Is(err, policy.ErrNoLock) {
		o.logf("no %s yet: resolving the base image and Claude Code pins", path)
	} else {
		o.logf("%v; updating it", err)
	}
	want := slices.Clone(DefaultPlatforms)
	for _, pl := range plats {
		if !slices.Contains(want, pl) {
			want = append(want, pl)
		}
	}
	nl, err := Resolve(ctx, p, l, want, o)
	if err != nil {
		return nil, err
	}
	if err := policy.WriteLock(path, nl); err != nil {
		return nil, err
	}
	return nl, nil
}

// EnsureFile is Ensure for the policy file at path.
func EnsureFile(ctx context.Context, path string, plats []string, o Options) (*policy.Lock, error) {
	p, err := policy.Load(path)
	if err != nil {
		return nil, err
	}
	return Ensure(ctx, p, plats, false, o)
}
