package baseline

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/devbox-dev/devbox/internal/layout"
	"github.com/devbox-dev/devbox/internal/policy"
)

// WriteApplied records p, the policy Resolve returned, at path (normally
// layout.AppliedPolicyPath) as normalized JSON, owned by root and
// read-only to everyone else: written to a temporary file and renamed, so
// a reader never sees half of it.
func WriteApplied(path string, p *policy.Policy) error {
	norm, err := p.Normalize()
	if err != nil {
		return fmt.Errorf("applied policy: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("applied policy: %w", err)
	}
	tmp := path + ".new"
	os.Remove(tmp)
	if err := os.WriteFile(tmp, norm, 0o644); err != nil {
		return fmt.Errorf("applied policy: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("applied policy: %w", err)
	}
	return nil
}

// Applied is the one lookup of the policy in force in this container, for
// `devbox run`, the credential gateway and `devbox doctor`: the policy the
// entrypoint resolved and fenced with (layout.AppliedPolicyPath). Without
// that file, the policy baked into the image (a container whose fence has
// not been resolved by this devbox, or none: the error then wraps
// policy.ErrNoPolicy) — unless a repository policy is mounted, whose
// narrowing would then be lost: that is an error.
func Applied() (*policy.Policy, error) {
	path, err := AppliedPath()
	if err != nil {
		return nil, err
	}
	return policy.Load(path)
}

// AppliedPath is the file Applied reads, for a reader with its own file
// access (doctor's).
func AppliedPath() (string, error) {
	return appliedPath(layout.AppliedPolicyPath, layout.RepoPolicyPath, layout.PolicyPath)
}

func applied(recorded, repoPath, bakedPath string) (*policy.Policy, error) {
	path, err := appliedPath(recorded, repoPath, bakedPath)
	if err != nil {
		return nil, err
	}
	return policy.Load(path)
}

func appliedPath(recorded, repoPath, bakedPath string) (string, error) {
	fi, err := os.Stat(recorded)
	switch {
	case err == nil:
		// Only root writes it (the entrypoint); a file anyone else owns or
		// may write is not the entrypoint's.
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Uid != 0 || fi.Mode().Perm()&0o022 != 0 {
			return "", fmt.Errorf("applied policy %s: not owned by root or writable by others (mode %v); refusing it", recorded, fi.Mode().Perm())
		}
		return recorded, nil
	case !errors.Is(err, fs.ErrNotExist):
		return "", fmt.Errorf("applied policy: %w", err)
	}
	if _, err := os.Stat(repoPath); err == nil {
		return "", fmt.Errorf("a repository policy is mounted at %s but the entrypoint has not recorded the policy it resolved (%s is missing): the fence is not up with it; run `devbox doctor`", repoPath, recorded)
	}
	return bakedPath, nil
}

// Ceiling is what the policy in force must lie within, for the checks
// `devbox run` repeats on resolved paths: the image's baseline when it has
// one, else the policy baked into the image; nil (no error) outside a
// devbox container.
func Ceiling() (*policy.Policy, error) {
	for _, path := range []string{layout.BaselinePath, layout.PolicyPath} {
		p, err := policy.Load(path)
		if errors.Is(err, policy.ErrNoPolicy) {
			continue
		}
		return p, err
	}
	return nil, nil
}
