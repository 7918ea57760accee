package sandbox

import (
	"errors"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"
	"syscall"
)

// Kind is what a path is on the filesystem when the plan is made.
type Kind int

const (
	// Missing paths do not exist (yet).
	Missing Kind = iota
	// File is anything that is not a directory (regular file, device, socket).
	File
	// Dir is a directory.
	Dir
	// Symlink is a symbolic link (only returned by FS.Lstat).
	Symlink
)

// FS is the part of the filesystem Plan looks at. It exists so that Plan can
// be golden-tested against a fixed tree (mapFS in the tests) while Run uses
// the real one (OSFS).
type FS interface {
	// Lstat reports what name is, without following a final symlink;
	// Missing when it does not exist.
	Lstat(name string) (Kind, error)
	// Readlink returns a symlink's target.
	Readlink(name string) (string, error)
	// ReadDir lists a directory's entry names, sorted.
	ReadDir(name string) ([]string, error)
}

// OSFS is the real filesystem.
type OSFS struct{}

// Lstat implements FS.
func (OSFS) Lstat(name string) (Kind, error) {
	fi, err := os.Lstat(name)
	switch {
	// ENOTDIR: "a/b" where a is a file; nothing can be at that path.
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.ENOTDIR):
		return Missing, nil
	case err != nil:
		return Missing, err
	case fi.Mode()&fs.ModeSymlink != 0:
		return Symlink, nil
	case fi.IsDir():
		return Dir, nil
	}
	return File, nil
}

// Readlink implements FS.
func (OSFS) Readlink(name string) (string, error) { return os.Readlink(name) }

// ReadDir implements FS.
func (OSFS) ReadDir(name string) ([]string, error) {
	es, err := os.ReadDir(name)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(es))
	for i, e := range es {
		names[i] = e.Name()
	}
	sort.Strings(names)
	return names, nil
}

// ReadDirKinds lists a directory with each entry's kind from the
// directory itself (d_type; os.ReadDir falls back to lstat where the
// filesystem does not say), sorted by name.
func (OSFS) ReadDirKinds(name string) ([]DirEntry, error) {
	es, err := os.ReadDir(name)
	if err != nil {
		return nil, err
	}
	out := make([]DirEntry, len(es))
	for i, e := range es {
		k := File
		switch t := e.Type(); {
		case t&fs.ModeSymlink != 0:
			k = Symlink
		case t.IsDir():
			k = Dir
		}
		out[i] = DirEntry{Name: e.Name(), Kind: k}
	}
	return out, nil
}

// resolved is a path with every symlink followed.
type resolved struct {
	// Real is the path with no symlink in it. Components past the first
	// missing one are kept as written.
	Real string
	// Kind is what Real is (Missing when any component is missing).
	Kind Kind
	// Links are the symlinks met on the way, each as the real path of the
	// link itself (not its target).
	Links []string
}

// maxLinks bounds symlink chains, as the kernel does (ELOOP after 40).
const maxLinks = 40

// resolve follows every symlink in the absolute, clean path p, like
// filepath.EvalSymlinks, but tolerates a missing tail: sandboxes must protect
// paths that do not exist yet, and must protect them where a write would
// really land.
func resolve(fsys FS, p string) (resolved, error) {
	if !path.IsAbs(p) {
		return resolved{}, errors.New("sandbox: path " + p + " is not absolute")
	}
	var r resolved
	todo := splitPath(path.Clean(p))
	cur := "/"
	hops := 0
	for len(todo) > 0 {
		name := todo[0]
		todo = todo[1:]
		next := path.Join(cur, name)
		k, err := fsys.Lstat(next)
		if err != nil {
			return resolved{}, err
		}
		switch k {
		case Missing:
			r.Real = path.Join(append([]string{next}, todo...)...)
			r.Kind = Missing
			return r, nil
		case Symlink:
			hops++
			if hops > maxLinks {
				return resolved{}, errors.New("sandbox: too many levels of symbolic links in " + p)
			}
			r.Links = append(r.Links, next)
			target, err := fsys.Readlink(next)
			if err != nil {
				return resolved{}, err
			}
			if path.IsAbs(target) {
				cur = "/"
			}
			todo = append(splitPath(target), todo...)
		default:
			cur = next
			if len(todo) == 0 {
				r.Real, r.Kind = cur, k
				return r, nil
			}
		}
	}
	r.Real, r.Kind = cur, Dir
	return r, nil
}

// splitPath splits p into its components, dropping empty ones and ".";
// ".." is kept and handled by path.Join when it is applied.
func splitPath(p string) []string {
	var out []string
	for _, c := range strings.Split(p, "/") {
		if c != "" && c != "." {
			out = append(out, c)
		}
	}
	return out
}

// under reports whether p is root or inside it.
func under(p, root string) bool {
	return p == root || root == "/" || strings.HasPrefix(p, root+"/")
}
