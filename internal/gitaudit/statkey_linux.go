//go:build linux

package gitaudit

import (
	"fmt"
	"io/fs"
	"syscall"
)

// statKey identifies a file's content without reading it: device, inode,
// size, mtime and ctime. Restoring the mtime after a write does not
// restore the ctime, which only the kernel sets.
func statKey(fi fs.FileInfo) string {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return ""
	}
	return fmt.Sprintf("%d:%d:%d:%d.%d:%d.%d", st.Dev, st.Ino, st.Size, st.Mtim.Sec, st.Mtim.Nsec, st.Ctim.Sec, st.Ctim.Nsec)
}
