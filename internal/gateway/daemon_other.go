//go:build !linux

package gateway

import (
	"context"
	"errors"
	"net"
)

// The gateway runs inside Linux containers; elsewhere (a developer's Mac
// running `devbox init` or `devbox build`) starting it fails clearly.
var errUnsupported = errors.New("gateway: runs in Linux containers only: " + errors.ErrUnsupported.Error())

func Harden() error                                    { return errUnsupported }
func Start(context.Context, StartOptions) (int, error) { return 0, errUnsupported }
func PID(string) (int, bool)                           { return 0, false }
func Stop(string) error                                { return errUnsupported }
func Launch(context.Context, LaunchOptions) (int, error) {
	return 0, errUnsupported
}
func Check(string) error                    { return errUnsupported }
func Listener(string) (net.Listener, error) { return nil, errUnsupported }
