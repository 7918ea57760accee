//go:build !linux

package doctor

import "errors"

// readOnlyMounts: mountinfo is Linux's; doctor checks a container.
func readOnlyMounts([]byte) (map[string]bool, error) {
	return nil, errors.New("mountinfo is Linux only: run devbox doctor inside the container")
}
