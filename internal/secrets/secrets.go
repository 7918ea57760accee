// Package secrets stores the credentials the credential gateway injects:
// one file per secret in a directory that only root and the gateway's
// account can read. The agent's user can neither list nor read it.
package secrets

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/devbox-dev/devbox/internal/atomicfile"
	"github.com/devbox-dev/devbox/internal/layout"
	"github.com/devbox-dev/devbox/internal/policy"
)

// DirEnv overrides the secrets directory: a mounted directory (a team
// image's volume, a Kubernetes secret) instead of the per-container volume.
const DirEnv = "DEVBOX_SECRETS_DIR"

// MaxSize bounds one secret: tokens are short; anything longer is a
// mistake (a file piped in by accident).
const MaxSize = 16 << 10

// Dir returns the secrets directory: $DEVBOX_SECRETS_DIR, else
// layout.SecretsDir.
func Dir() string {
	if d := os.Getenv(DirEnv); d != "" {
		return d
	}
	return layout.SecretsDir
}

// ErrNotSet is wrapped when a secret has no file.
var ErrNotSet = errors.New("secret is not set")

// Store is a secrets directory. Files are owned by root with group GID,
// mode 0640; the directory is root:GID 0750. GID is the gateway's group.
type Store struct {
	Dir string
	GID int
}

// New returns the store at dir for the gateway's group.
func New(dir string) Store { return Store{Dir: dir, GID: layout.GatewayUID} }

// Info describes one stored secret without its value.
type Info struct {
	Name        string
	Size        int
	Fingerprint string
	Modified    time.Time
}

// Fingerprint is a short, one-way tag for a secret value: enough to tell
// two values apart in a log or a listing, never enough to use. (Tokens have
// far more entropy than the 32 bits shown, so it cannot be inverted.)
func Fingerprint(v []byte) string {
	sum := sha256.Sum256(v)
	return hex.EncodeToString(sum[:4])
}

// CheckValue returns the value as stored (surrounding whitespace and a
// trailing newline dropped: `echo TOKEN |` is the common way in) or an
// error saying why it cannot be a credential. Values end up in HTTP
// headers, so control characters are refused: a newline would inject
// another header.
func CheckValue(v []byte) ([]byte, error) {
	v = bytes.TrimSpace(v)
	switch {
	case len(v) == 0:
		return nil, errors.New("the value is empty (give it on standard input)")
	case len(v) > MaxSize:
		return nil, fmt.Errorf("the value is %d bytes; a secret is at most %d", len(v), MaxSize)
	}
	for i, b := range v {
		if b < 0x20 || b == 0x7f {
			return nil, fmt.Errorf("the value contains a control character at byte %d; a credential is one line of printable text", i)
		}
	}
	return v, nil
}

func (s Store) path(name string) (string, error) {
	if r := policy.CheckSecretName(name); r != "" {
		return "", fmt.Errorf("secret %q: %s", name, r)
	}
	return filepath.Join(s.Dir, name), nil
}

// Prepare creates the directory if needed and gives it (and every file in
// it) to root and the gateway's group with no access for anyone else. It
// runs as root on every container start, so a volume created with other
// permissions is corrected before the agent runs.
func (s Store) Prepare() error {
	if err := os.MkdirAll(s.Dir, 0o750); err != nil {
		return fmt.Errorf("secrets: %w", err)
	}
	if err := os.Chown(s.Dir, 0, s.GID); err != nil {
		return fmt.Errorf("secrets: %w", err)
	}
	if err := os.Chmod(s.Dir, 0o750); err != nil {
		return fmt.Errorf("secrets: %w", err)
	}
	ents, err := os.ReadDir(s.Dir)
	if err != nil {
		return fmt.Errorf("secrets: %w", err)
	}
	for _, e := range ents {
		p := filepath.Join(s.Dir, e.Name())
		if err := os.Lchown(p, 0, s.GID); err != nil {
			return fmt.Errorf("secrets: %w", err)
		}
		if e.Type()&fs.ModeSymlink == 0 {
			if err := os.Chmod(p, 0o640); err != nil {
				return fmt.Errorf("secrets: %w", err)
			}
		}
	}
	return nil
}

// Check returns an error when anyone but root and the gateway's group can
// reach the directory or a file in it (a mounted directory Prepare could
// not fix, say a read-only Kubernetes secret with defaultMode 0644).
func (s Store) Check() error {
	st, err := os.Stat(s.Dir)
	if err != nil {
		return fmt.Errorf("secrets: %w", err)
	}
	if st.Mode().Perm()&0o007 != 0 {
		return fmt.Errorf("secrets: %s is mode %o: other users can reach it; it must be 0750 (or stricter) root:%d", s.Dir, st.Mode().Perm(), s.GID)
	}
	ents, err := os.ReadDir(s.Dir)
	if err != nil {
		return fmt.Errorf("secrets: %w", err)
	}
	for _, e := range ents {
		fi, err := os.Stat(filepath.Join(s.Dir, e.Name()))
		if err != nil {
			continue
		}
		if fi.Mode().Perm()&0o007 != 0 {
			return fmt.Errorf("secrets: %s is mode %o: other users can read it", filepath.Join(s.Dir, e.Name()), fi.Mode().Perm())
		}
	}
	return nil
}

// Set stores value under name, replacing any earlier value in one rename.
// The file is created with its final owner and mode before any byte is
// written, so there is no moment at which another user could open it.
func (s Store) Set(name string, value []byte) error {
	p, err := s.path(name)
	if err != nil {
		return err
	}
	v, err := CheckValue(value)
	if err != nil {
		return fmt.Errorf("secret %q: %w", name, err)
	}
	if err := s.Prepare(); err != nil {
		return err
	}
	if err := atomicfile.WriteFileOwned(p, v, 0o640, 0, s.GID); err != nil {
		return fmt.Errorf("secrets: %w", err)
	}
	return nil
}

// Secret returns the value stored under name, or an error wrapping
// ErrNotSet. It implements the gateway's secret source.
func (s Store) Secret(name string) ([]byte, error) {
	p, err := s.path(name)
	if err != nil {
		return nil, err
	}
	v, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("secret %q: %w", name, ErrNotSet)
	}
	if err != nil {
		return nil, fmt.Errorf("secret %q: %w", name, err)
	}
	// A mounted secret (Kubernetes) may end in a newline.
	return CheckValue(v)
}

// List describes every stored secret, sorted by name.
func (s Store) List() ([]Info, error) {
	ents, err := os.ReadDir(s.Dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("secrets: %w", err)
	}
	var out []Info
	for _, e := range ents {
		if policy.CheckSecretName(e.Name()) != "" {
			continue // temporary files, Kubernetes' ..data links
		}
		v, err := s.Secret(e.Name())
		if err != nil {
			continue
		}
		fi, _ := os.Stat(filepath.Join(s.Dir, e.Name()))
		info := Info{Name: e.Name(), Size: len(v), Fingerprint: Fingerprint(v)}
		if fi != nil {
			info.Modified = fi.ModTime()
		}
		out = append(out, info)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Remove deletes the secret name; removing a missing secret is an error
// wrapping ErrNotSet.
func (s Store) Remove(name string) error {
	p, err := s.path(name)
	if err != nil {
		return err
	}
	if err := os.Remove(p); errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("secret %q: %w", name, ErrNotSet)
	} else if err != nil {
		return fmt.Errorf("secrets: %w", err)
	}
	return nil
}
