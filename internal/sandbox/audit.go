package sandbox

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
)

// Snapshot is the state of a workspace's dangerous paths (findDangerous in
// audit mode, and everything below the directories among them): each path
// with a fingerprint of what it is. Two snapshots, one taken before the
// sandboxed command starts and one after it ends, show what the command
// created or changed where no read-only mount could stop it: below a
// directory that appeared during the run (a `git clone`, a `git init`, a new
// sub-project), which sandbox-runtime does not look at either.
type Snapshot map[string]string

// maxHashed bounds the bytes hashed per file; a larger file is fingerprinted
// by size and modification time. The files watched are small settings and
// scripts, so in practice all are hashed.
const maxHashed = 1 << 20

// TakeSnapshot snapshots the dangerous paths under root, a workspace.
func TakeSnapshot(root string) (Snapshot, error) {
	root, err := filepath.EvalSymlinks(root)
	if err != nil {
		return nil, fmt.Errorf("sandbox: audit: %w", err)
	}
	s := Snapshot{}
	var errs []error
	err = findDangerous(OSFS{}, root, true, func(p string, k Kind) {
		if k == Missing {
			return
		}
		if err := s.add(p); err != nil {
			errs = append(errs, err)
		}
	})
	if err == nil && len(errs) > 0 {
		err = errs[0]
	}
	if err != nil {
		return nil, fmt.Errorf("sandbox: audit of %s: %w", root, err)
	}
	return s, nil
}

// add records p and, when it is a directory, everything below it.
func (s Snapshot) add(p string) error {
	return filepath.WalkDir(p, func(q string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fp, err := fingerprint(q, d)
		if err != nil {
			return err
		}
		s[q] = fp
		return nil
	})
}

// fingerprint says what q is: a directory, a symbolic link and its target,
// or a file with its mode and content hash.
func fingerprint(q string, d fs.DirEntry) (string, error) {
	switch t := d.Type(); {
	case t.IsDir():
		return "dir", nil
	case t&fs.ModeSymlink != 0:
		target, err := os.Readlink(q)
		return "link -> " + target, err
	case !t.IsRegular():
		return "special " + t.String(), nil
	}
	fi, err := d.Info()
	if err != nil {
		return "", err
	}
	if fi.Size() > maxHashed {
		return fmt.Sprintf("file %v size %d mtime %d", fi.Mode(), fi.Size(), fi.ModTime().UnixNano()), nil
	}
	f, err := os.Open(q)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return fmt.Sprintf("file %v sha256:%s", fi.Mode(), hex.EncodeToString(h.Sum(nil))), nil
}

// Change is a dangerous path created or changed during a run.
type Change struct {
	Path string
	// What is "created" or "changed".
	What string
}

func (c Change) String() string { return c.What + " " + c.Path }

// Changes lists, sorted by path, the paths of after that are not in s or
// differ from it. Removals are not listed: nothing runs a deleted file.
func (s Snapshot) Changes(after Snapshot) []Change {
	var out []Change
	for p, fa := range after {
		fb, ok := s[p]
		switch {
		case !ok:
			out = append(out, Change{p, "created"})
		case fb != fa:
			out = append(out, Change{p, "changed"})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}
