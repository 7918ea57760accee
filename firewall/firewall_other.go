//go:build !linux

package firewall

import (
	"context"
	"errors"
)

// The fence needs Linux netfilter; elsewhere (a developer's Mac running
// `devbox init` or `devbox build`) every kernel-facing call fails clearly.
var errUnsupported = errors.New("firewall: needs Linux netfilter: " + errors.ErrUnsupported.Error())

func Apply(context.Context, Config) (Result, error)                { return Result{}, errUnsupported }
func DenyAll(context.Context, Config) error                        { return errUnsupported }
func RunDNS(context.Context, Config) error                         { return errUnsupported }
func StartDNS(context.Context, Config, DaemonOptions) (int, error) { return 0, errUnsupported }
func StopDNS(Config) error                                         { return errUnsupported }
func CheckDNS(Config) error                                        { return errUnsupported }
func CheckGate(Config) error                                       { return errUnsupported }
func DaemonPID(Config) (int, bool)                                 { return 0, false }
func Warm(context.Context, Config) []string                        { return []string{errUnsupported.Error()} }
func ReadStatus(context.Context, Config) (Status, error)           { return Status{}, errUnsupported }
func QueryHealth(context.Context, string) (Health, error)          { return Health{}, errUnsupported }

func RunGate(context.Context, Config) error                         { return errUnsupported }
func StartGate(context.Context, Config, DaemonOptions) (int, error) { return 0, errUnsupported }
func StopGate(Config) error                                         { return errUnsupported }
func GatePID(Config) (int, bool)                                    { return 0, false }
func QueryGateHealth(context.Context, string) (GateHealth, error) {
	return GateHealth{}, errUnsupported
}
