package features

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/devbox-dev/devbox/internal/policy"
)

// InstallFile is the feature's install script, relative to the repository.
var InstallFile = filepath.Join("features", "src", "devbox", "install.sh")

// ClaudeLockFile is the lock whose Claude Code pins the feature accepts by
// default, relative to the repository.
var ClaudeLockFile = filepath.Join("features", "claude-code.lock.json")

// BuildOptions say which files make the feature.
type BuildOptions struct {
	// Source is the repository holding ManifestFile and InstallFile.
	Source string
	// Binaries maps each architecture (amd64, arm64) to the Linux devbox
	// binary shipped for it.
	Binaries map[string]string
	// ClaudeLocks are devbox.lock.json files whose Claude Code pins the
	// claudeCode option accepts (default: ClaudeLockFile under Source,
	// when it exists). Only their claudeCode section is read: the base
	// image and epoch are an image build's, not the feature's.
	ClaudeLocks []string
}

// Package is the feature, packaged: what `devbox feature package` writes
// and `devbox feature publish` pushes.
type Package struct {
	Manifest   *Manifest
	Tarball    []byte // TarballName(Manifest.ID)
	Collection []byte // CollectionFile
}

// Build reads the feature's files (and only those) and packages them. The
// tarball's mtimes are fixed, so the same sources give the same digest.
func Build(o BuildOptions) (*Package, error) {
	manifestPath := filepath.Join(o.Source, ManifestFile)
	raw, err := os.ReadFile(manifestPath)
	if err != nil {
		return nil, err
	}
	m, err := ParseManifest(manifestPath, raw)
	if err != nil {
		return nil, err
	}
	install, err := os.ReadFile(filepath.Join(o.Source, InstallFile))
	if err != nil {
		return nil, err
	}
	bins := map[string][]byte{}
	for _, arch := range slices.Sorted(maps.Keys(o.Binaries)) {
		file := o.Binaries[arch]
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("--binary %s: %w", arch, err)
		}
		if !strings.HasPrefix(string(b[:min(4, len(b))]), "\x7fELF") {
			return nil, fmt.Errorf("--binary %s: %s is not a Linux executable", arch, file)
		}
		bins[arch] = b
	}
	locks := o.ClaudeLocks
	if len(locks) == 0 {
		if def := filepath.Join(o.Source, ClaudeLockFile); fileExists(def) {
			locks = []string{def}
		}
	}
	var claude []policy.LockedClaudeCode
	for _, f := range locks {
		l, err := policy.ReadLock(f)
		if err != nil {
			return nil, fmt.Errorf("--claude-lock: %w", err)
		}
		if l.ClaudeCode.Version == policy.ClaudeCodeNone {
			return nil, fmt.Errorf("--claude-lock %s: the lock pins no Claude Code (claudeCode none)", f)
		}
		claude = append(claude, l.ClaudeCode)
	}
	files, err := Source{Manifest: raw, Install: install, Binaries: bins, Claude: claude}.Files()
	if err != nil {
		return nil, err
	}
	tarball, err := Tar(files, time.Unix(0, 0))
	if err != nil {
		return nil, err
	}
	col, err := Collection(m)
	if err != nil {
		return nil, err
	}
	return &Package{Manifest: m, Tarball: tarball, Collection: col}, nil
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
