//go:build linux

package doctor

import (
	"bytes"
	"slices"
	"strings"

	sysmount "github.com/moby/sys/mountinfo"
)

// readOnlyMounts maps each mount point in a /proc/self/mountinfo to
// whether it is mounted read-only.
func readOnlyMounts(mountinfo []byte) (map[string]bool, error) {
	mounts, err := sysmount.GetMountsFromReader(bytes.NewReader(mountinfo), nil)
	if err != nil {
		return nil, err
	}
	ro := map[string]bool{}
	for _, m := range mounts {
		ro[m.Mountpoint] = slices.Contains(strings.Split(m.Options, ","), "ro")
	}
	return ro, nil
}
