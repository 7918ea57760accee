//go:build !linux

package entrypoint

import (
	"errors"
	"fmt"
)

// RepairClaudeState is Linux-only: the entrypoint runs in Linux containers.
func RepairClaudeState(acct Account, dir string) ([]string, error) {
	return nil, fmt.Errorf("%s: %w", dir, errors.ErrUnsupported)
}
