package pin

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
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
	before, err := snapshot(opts)
	if err != nil {
		return nil, err
	}
	first, err := devcontainer.Init(opts)
	if err != nil || !pending(first) {
		return first, err
	}
	if err := lockFile(); err != nil {
		// The lock could not be resolved (no registry access, say): put
		// back what the first run wrote, so a failed init writes nothing.
		if rerr := before.restore(); rerr != nil {
			return nil, fmt.Errorf("%w (and undoing the files init wrote failed: %v)", err, rerr)
		}
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

// files is what the files Init is about to write held before it ran:
// their bytes and modes, or absent.
type files struct {
	dir        string
	dirExisted bool
	old        map[string]*saved // by absolute path; nil: did not exist
}

type saved struct {
	data []byte
	mode os.FileMode
}

// snapshot reads every file Init plans to write, before it writes them.
func snapshot(opts devcontainer.InitOptions) (*files, error) {
	plan, err := devcontainer.PlanInit(opts)
	if err != nil {
		return nil, err
	}
	f := &files{dir: filepath.Join(opts.Root, devcontainer.Dir), old: map[string]*saved{}}
	_, err = os.Stat(f.dir)
	f.dirExisted = err == nil
	for _, r := range plan {
		switch r.Status {
		case devcontainer.Unchanged, devcontainer.Kept, devcontainer.Pending:
			continue
		}
		path := filepath.Join(opts.Root, filepath.FromSlash(r.Path))
		fi, err := os.Stat(path)
		if errors.Is(err, fs.ErrNotExist) {
			f.old[path] = nil
			continue
		} else if err != nil {
			return nil, err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		f.old[path] = &saved{data, fi.Mode().Perm()}
	}
	return f, nil
}

// restore puts every snapshotted file back as it was, and removes the
// .devcontainer directory when Init made it and it is empty again.
func (f *files) restore() error {
	var errs []error
	for path, s := range f.old {
		if s == nil {
			if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, err)
			}
			continue
		}
		// Init replaced the file (a new inode, its own mode): chmod too.
		if err := os.WriteFile(path, s.data, s.mode); err != nil {
			errs = append(errs, err)
		} else if err := os.Chmod(path, s.mode); err != nil {
			errs = append(errs, err)
		}
	}
	if !f.dirExisted {
		os.Remove(f.dir) // fails, as it should, when something else is in it
	}
	return errors.Join(errs...)
}
