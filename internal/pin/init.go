package pin

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/devbox-dev/devbox/internal/devcontainer"
)

// InitLocked is `devbox init --lock` in build mode: devcontainer.Init with
// the lock made current, so the Dockerfile is written in one run. An
// existing policy is locked first (a stale lock is updated before Init
// checks the build against it); a new one is locked after Init wrote it,
// and Init runs again for the files that waited for the lock. Each result
// says what happened over both runs: a file the first run created stays
// "created", not "unchanged".
func InitLocked(ctx context.Context, opts devcontainer.InitOptions, o Options) ([]devcontainer.FileResult, error) {
	polPath := filepath.Join(opts.Root, devcontainer.PolicyFile)
	lockFile := func() error {
		if _, err := EnsureFile(ctx, polPath, []string{opts.Platform}, o); err != nil {
			return fmt.Errorf("init --lock: %w", err)
		}
		return nil
	}
	if _, err := os.Stat(polPath); err == nil {
		if err := lockFile(); err != nil {
			return nil, err
		}
		return devcontainer.Init(opts)
	}
	first, err := devcontainer.Init(opts)
	if err != nil || !pending(first) {
		return first, err
	}
	if err := lockFile(); err != nil {
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

func pending(results []devcontainer.FileResult) bool {
	for _, r := range results {
		if r.Status == devcontainer.Pending {
			return true
		}
	}
	return false
}
