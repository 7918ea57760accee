//go:build linux

package firewall

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"path/filepath"
	"time"

	"github.com/devbox-dev/devbox/internal/daemonpid"
	"github.com/devbox-dev/devbox/internal/layout"
)

// The gate's files under Config.StateDir.
const (
	gateConfigFile = "gate.json"
	gatePIDFile    = "gate.pid"
	gateErrFile    = "gate.err"
)

// StartGate (re)starts the name gate as a detached process and returns its
// pid once it answers a health query. It runs as opts.UID (default the
// gate's account, layout.GateUID) with no capability at all: accepting on
// a high port and dialing out need none, and the rules let only its uid
// reach name-derived addresses. Without cfg.Gate it stops a running gate
// and returns 0.
func StartGate(ctx context.Context, cfg Config, opts DaemonOptions) (int, error) {
	cfg = cfg.WithDefaults()
	if !cfg.Gate {
		return 0, StopGate(cfg)
	}
	opts, err := opts.withDefaults("StartGate", layout.GateUID)
	if err != nil {
		return 0, err
	}
	ls, err := takeOver(cfg, "name gate", gateAddrs(cfg), StopGate)
	if err != nil {
		return 0, err
	}
	defer ls.Close()
	addr := gateAddr(cfg)
	return startDaemon(ctx, cfg, opts, daemon{
		name:       "name gate",
		configFile: gateConfigFile,
		pidFile:    gatePIDFile,
		errFile:    gateErrFile,
		listeners:  ls,
		ready: func(ctx context.Context, pid int) error {
			h, err := QueryGateHealth(ctx, addr)
			if err == nil && h.PID != pid {
				// The port is taken by another gate (or a gate of an
				// earlier start that outlived its pidfile).
				err = fmt.Errorf("pid %d answers on %s, not the gate just started (pid %d)", h.PID, addr, pid)
			}
			return err
		},
	})
}

// gateAddrs are the gate's sockets: TCP on both loopback addresses.
func gateAddrs(cfg Config) []daemonpid.Addr {
	var out []daemonpid.Addr
	for _, host := range []string{"127.0.0.1", "::1"} {
		out = append(out, daemonpid.Addr{Net: "tcp", Addr: netip.AddrPortFrom(netip.MustParseAddr(host), cfg.GatePort)})
	}
	return out
}

// gateListeners are the sockets root handed to this gate (StartGate): it
// never binds its port itself.
func gateListeners() ([]*net.TCPListener, error) {
	in, err := daemonpid.Inherit("name gate")
	if err != nil {
		return nil, fmt.Errorf("firewall gate: %w", err)
	}
	var ls []*net.TCPListener
	for _, l := range in.TCP {
		ls = append(ls, l.(*net.TCPListener))
	}
	if len(ls) == 0 || len(in.UDP) > 0 {
		in.Close()
		return nil, fmt.Errorf("firewall gate: handed %d TCP and %d UDP sockets, want TCP only", len(in.TCP), len(in.UDP))
	}
	return ls, nil
}

// GatePID returns the pid in the gate's pidfile and whether that process is
// the gate StartGate started (see DaemonPID for why the start time).
func GatePID(cfg Config) (int, bool) { return pidOf(cfg, gatePIDFile) }

// CheckGate is CheckDNS for the name gate.
func CheckGate(cfg Config) error { return checkDaemon(cfg, gatePIDFile, "name gate") }

// StopGate stops the gate named by the pidfile, if it runs.
func StopGate(cfg Config) error { return stopDaemon(cfg, gatePIDFile, "name gate") }

// readGateStatus fills the gate's part of Status.
func readGateStatus(ctx context.Context, cfg Config) GateStatus {
	cfg = cfg.WithDefaults()
	pid, alive := GatePID(cfg)
	gs := GateStatus{Enabled: cfg.Gate, PID: pid, Running: alive}
	if !cfg.Gate {
		return gs
	}
	hctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	h, err := QueryGateHealth(hctx, gateAddr(cfg))
	switch {
	case !alive:
		gs.Error = "name gate not running (no live pid in " + cfg.StateDir + "/" + gatePIDFile + "): TCP to names' addresses is refused, static entries still pass"
		if err := daemonpid.Taken(filepath.Join(cfg.StateDir, gatePIDFile), "name gate"); err != nil {
			gs.Error += "; and " + err.Error()
		}
	case err != nil:
		gs.Error = err.Error()
	case h.PID != pid:
		gs.Error = fmt.Sprintf("pid %d answers on %s, not the gate (pid %d)", h.PID, gateAddr(cfg), pid)
	default:
		// The answer came from the gate; but do its ports belong to it
		// alone? (Asked after the answer: a port taken since shows.)
		if err := CheckGate(cfg); err != nil {
			gs.Error = err.Error()
			break
		}
		gs.Health = &h
	}
	return gs
}
