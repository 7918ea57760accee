// Package atomicfile writes files so that a reader, or a crash, never sees
// half of one: the data goes to a temporary file beside the target, is
// flushed to disk, and then replaces the target in one rename, which is
// flushed too.
package atomicfile

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// WriteFile writes data to path with the given mode, replacing any file
// there in one rename. The directory must exist. On error path is
// unchanged and no temporary file is left behind.
func WriteFile(path string, data []byte, mode fs.FileMode) error {
	return WriteFileOwned(path, data, mode, -1, -1)
}

// WriteFileOwned is WriteFile for a file owned by uid:gid (-1 leaves
// either as it is, as chown does). The owner and mode are set before any
// byte is written, so there is no moment at which someone they exclude
// could open the file with data in it.
func WriteFileOwned(path string, data []byte, mode fs.FileMode, uid, gid int) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	tmp := f.Name()
	if uid != -1 || gid != -1 {
		err = f.Chown(uid, gid)
	}
	if err == nil {
		// CreateTemp makes the file 0600 whatever the umask; set the mode
		// asked for explicitly.
		err = f.Chmod(mode)
	}
	if err == nil {
		_, err = f.Write(data)
	}
	if err == nil {
		// Without it a crash after the rename can leave the new name
		// pointing at an empty or partial file.
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("writing %s: %w", path, err)
	}
	// The rename is an entry in the directory: flush it, so after a crash
	// the name holds the new file rather than the old one (or none).
	if err := syncDir(filepath.Dir(path)); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}
