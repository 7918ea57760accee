//go:build !linux

package entrypoint

import (
	"errors"
	"fmt"
)

// DropAndExec is Linux-only: the fence and its containers are Linux.
func DropAndExec(acct Account, argv []string, env []string) error {
	return fmt.Errorf("drop privileges: %w", errors.ErrUnsupported)
}
