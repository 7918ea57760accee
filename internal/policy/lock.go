package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/devbox-dev/devbox/internal/atomicfile"
)

// LockFileName is the lock file `devbox lock` writes beside the policy.
const LockFileName = "devbox.lock.json"

// LockVersion is the format version of the lock file. A reader refuses any
// other value rather than guessing what a newer writer meant.
const LockVersion = 1

// ErrNoLock is wrapped by ReadLock when the lock file does not exist, so
// callers can tell "run devbox lock" apart from "the lock is broken".
var ErrNoLock = errors.New("no lock file")

// Lock pins every input of an image build that can move between two builds
// of the same policy: the base image digest, the Claude Code tarball and its
// integrity, the devbox version and the timestamp baked into the image. What
// cannot be pinned is listed in Unpinned, so nobody believes otherwise.
//
// The JSON form is stable: fields in a fixed order, maps sorted by key, two
// space indent and a final newline, so a lock diffs well in review.
type Lock struct {
	// Version is LockVersion.
	Version int `json:"lockVersion"`
	// Devbox is the version of the devbox binary that wrote the lock and is
	// baked into the image.
	Devbox string `json:"devbox"`
	// SourceDateEpoch is the time (Unix seconds) the build clamps every
	// timestamp to, so the same inputs give the same image digest.
	SourceDateEpoch int64 `json:"sourceDateEpoch"`
	// Base is the base image, resolved.
	Base LockedImage `json:"base"`
	// ClaudeCode is the pinned agent; Version "none" when the policy leaves
	// it out.
	ClaudeCode LockedClaudeCode `json:"claudeCode"`
	// Unpinned names the inputs the lock cannot pin, in words.
	Unpinned []string `json:"unpinned"`
}

// LockedImage is an image reference resolved to a digest.
type LockedImage struct {
	// Ref is the reference as the policy wrote it (image.base); it is how
	// staleness is detected.
	Ref string `json:"ref"`
	// Digest is the manifest or index digest the reference resolved to
	// ("sha256:…").
	Digest string `json:"digest"`
}

// Pinned returns the reference by digest ("repo@sha256:…"), dropping any
// tag or digest Ref carried.
func (i LockedImage) Pinned() string {
	repo := i.Ref
	if at := strings.LastIndex(repo, "@"); at >= 0 {
		repo = repo[:at]
	}
	// A tag follows the last ':' after the last '/': "host:5000/x:tag".
	if c := strings.LastIndex(repo, ":"); c > strings.LastIndex(repo, "/") {
		repo = repo[:c]
	}
	return repo + "@" + i.Digest
}

// LockedClaudeCode pins Claude Code: the version and, per platform, the npm
// platform package that carries the native binary.
type LockedClaudeCode struct {
	// Version is the policy's agent.claudeCode ("none" = not installed).
	Version string `json:"version"`
	// Platforms maps an OS/arch ("linux/amd64") to its package.
	Platforms map[string]LockedPackage `json:"platforms,omitempty"`
}

// LockedPackage is one npm package tarball pinned by its integrity.
type LockedPackage struct {
	// Package is the npm package name ("@anthropic-ai/claude-code-linux-x64").
	Package string `json:"package"`
	// Tarball is the URL the registry gave for the tarball.
	Tarball string `json:"tarball"`
	// Integrity is the Subresource Integrity string from the registry
	// metadata ("sha512-<base64>").
	Integrity string `json:"integrity"`
}

// LockPath returns the lock file path for a policy file: LockFileName in the
// same directory.
func LockPath(policyPath string) string {
	return filepath.Join(filepath.Dir(policyPath), LockFileName)
}

// Marshal returns the canonical JSON form of l.
func (l *Lock) Marshal() ([]byte, error) {
	c := *l
	c.Unpinned = append([]string(nil), l.Unpinned...)
	sort.Strings(c.Unpinned)
	// encoding/json sorts map keys, which keeps Platforms stable.
	b, err := json.MarshalIndent(&c, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// WriteLock writes l to path atomically (a temporary file renamed over the
// old lock), so a crash never leaves a half-written lock behind.
func WriteLock(path string, l *Lock) error {
	b, err := l.Marshal()
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return atomicfile.WriteFile(path, b, 0o644)
}

// ReadLock reads and checks a lock file. A missing file wraps ErrNoLock.
func ReadLock(path string) (*Lock, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%s: %w (run `devbox lock` to create it)", path, ErrNoLock)
	}
	if err != nil {
		return nil, err
	}
	l, err := ParseLock(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return l, nil
}

// ParseLock decodes a lock strictly: unknown fields, trailing data, another
// format version or a malformed pin are errors.
func ParseLock(b []byte) (*Lock, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var l Lock
	if err := dec.Decode(&l); err != nil {
		return nil, fmt.Errorf("invalid lock file: %w", err)
	}
	if dec.More() {
		return nil, errors.New("invalid lock file: trailing data after the JSON object")
	}
	if l.Version != LockVersion {
		return nil, fmt.Errorf("lock file version %d is not supported (this devbox reads version %d)", l.Version, LockVersion)
	}
	if err := l.validate(); err != nil {
		return nil, err
	}
	return &l, nil
}

func (l *Lock) validate() error {
	if l.Base.Ref == "" {
		return errors.New("invalid lock file: base.ref is empty")
	}
	if !validDigest(l.Base.Digest) {
		return fmt.Errorf("invalid lock file: base.digest %q is not a sha256 digest", l.Base.Digest)
	}
	if l.ClaudeCode.Version == "" {
		return errors.New("invalid lock file: claudeCode.version is empty")
	}
	if l.ClaudeCode.Version == ClaudeCodeNone && len(l.ClaudeCode.Platforms) > 0 {
		return errors.New("invalid lock file: claudeCode.version is none but platforms are pinned")
	}
	if l.ClaudeCode.Version != ClaudeCodeNone && len(l.ClaudeCode.Platforms) == 0 {
		return fmt.Errorf("invalid lock file: claudeCode %s has no pinned platform", l.ClaudeCode.Version)
	}
	for plat, p := range l.ClaudeCode.Platforms {
		if p.Package == "" || p.Tarball == "" {
			return fmt.Errorf("invalid lock file: claudeCode.platforms[%q] lacks package or tarball", plat)
		}
		if !strings.HasPrefix(p.Integrity, "sha512-") {
			return fmt.Errorf("invalid lock file: claudeCode.platforms[%q].integrity %q is not a sha512 integrity", plat, p.Integrity)
		}
	}
	if l.SourceDateEpoch < 0 {
		return fmt.Errorf("invalid lock file: sourceDateEpoch %d is negative", l.SourceDateEpoch)
	}
	return nil
}

func validDigest(d string) bool {
	hex, ok := strings.CutPrefix(d, "sha256:")
	if !ok || len(hex) != 64 {
		return false
	}
	for _, c := range hex {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// StaleError says why a lock no longer matches its policy.
type StaleError struct {
	// Reasons lists each mismatch in words.
	Reasons []string
}

func (e *StaleError) Error() string {
	return "lock is stale: " + strings.Join(e.Reasons, "; ") + " (run `devbox lock` to update it)"
}

// Check reports, as a *StaleError, every way l no longer matches the policy
// inputs it pins: the base reference, the Claude Code version, a platform
// the build needs but the lock does not pin, or another devbox version.
// Network and sandbox settings are not lock inputs: changing them never
// makes a lock stale.
func (l *Lock) Check(p *Policy, devboxVersion string, platforms []string) error {
	var reasons []string
	if l.Base.Ref != p.Image.Base {
		reasons = append(reasons, fmt.Sprintf("image.base is %q but the lock resolved %q", p.Image.Base, l.Base.Ref))
	}
	if l.ClaudeCode.Version != p.Agent.ClaudeCode {
		reasons = append(reasons, fmt.Sprintf("agent.claudeCode is %q but the lock pins %q", p.Agent.ClaudeCode, l.ClaudeCode.Version))
	} else if p.Agent.ClaudeCode != ClaudeCodeNone {
		for _, plat := range platforms {
			if _, ok := l.ClaudeCode.Platforms[plat]; !ok {
				reasons = append(reasons, fmt.Sprintf("Claude Code is not pinned for platform %s", plat))
			}
		}
	}
	if devboxVersion != "" && l.Devbox != devboxVersion {
		reasons = append(reasons, fmt.Sprintf("the lock was written by devbox %s, this is devbox %s", l.Devbox, devboxVersion))
	}
	if len(reasons) > 0 {
		return &StaleError{Reasons: reasons}
	}
	return nil
}
