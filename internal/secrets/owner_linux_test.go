package secrets

import (
	"os"
	"syscall"
)

func statOwner(fi os.FileInfo) [2]int {
	st := fi.Sys().(*syscall.Stat_t)
	return [2]int{int(st.Uid), int(st.Gid)}
}
