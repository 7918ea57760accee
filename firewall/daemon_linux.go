//go:build linux

package firewall

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/miekg/dns"
	"golang.org/x/sys/unix"

	"github.com/devbox-dev/devbox/internal/daemonpid"
	"github.com/devbox-dev/devbox/internal/layout"
)

// Files under Config.StateDir.
const (
	daemonConfigFile = "dns.json"
	daemonPIDFile    = "dns.pid"
	daemonErrFile    = "dns.err"
)

// StartDNS (re)starts the DNS filter as a detached process and returns its
// pid once it answers a health query. An earlier daemon (from the pidfile)
// is stopped first. The daemon's config copy and pidfile live in
// cfg.StateDir, owned by root; its stderr goes to StateDir/dns.err.
func StartDNS(ctx context.Context, cfg Config, opts DaemonOptions) (int, error) {
	cfg = cfg.WithDefaults()
	opts, err := opts.withDefaults("StartDNS", layout.DNSUID)
	if err != nil {
		return 0, err
	}
	ls, err := takeOver(cfg, "DNS filter", dnsAddrs(cfg), StopDNS)
	if err != nil {
		return 0, err
	}
	defer ls.Close()
	// The hit counters restart with each filter: the policy, so the
	// entries counted, may have changed.
	if err := os.WriteFile(filepath.Join(cfg.StateDir, HitsFile), nil, 0o644); err != nil {
		return 0, fmt.Errorf("firewall: %w", err)
	}
	if err := handOver(filepath.Join(cfg.StateDir, HitsFile), opts); err != nil {
		return 0, err
	}
	if cfg.Gate {
		// The filter's own directory, for the socket the gate asks.
		dir := filepath.Join(cfg.StateDir, bindDirName)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return 0, fmt.Errorf("firewall: %w", err)
		}
		if opts.UID >= 0 {
			if err := os.Chown(dir, opts.UID, opts.GID); err != nil {
				return 0, fmt.Errorf("firewall: %w", err)
			}
		}
	}
	if cfg.Log && cfg.LogFile != "" {
		// The daemon appends to the log as its own user; root creates it.
		if err := os.MkdirAll(filepath.Dir(cfg.LogFile), 0o755); err != nil {
			return 0, fmt.Errorf("firewall: log directory: %w", err)
		}
		for _, p := range []string{cfg.LogFile, cfg.LogFile + ".1"} {
			if err := handOver(p, opts); err != nil {
				return 0, err
			}
		}
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(int(cfg.DNSPort)))
	return startDaemon(ctx, cfg, opts, daemon{
		name:       "DNS filter",
		listeners:  ls,
		configFile: daemonConfigFile,
		pidFile:    daemonPIDFile,
		errFile:    daemonErrFile,
		caps:       []uintptr{unix.CAP_NET_ADMIN},
		ready: func(ctx context.Context, pid int) error {
			h, err := QueryHealth(ctx, addr)
			if err == nil && h.PID != pid {
				err = fmt.Errorf("pid %d answers on %s, not the DNS filter just started (pid %d)", h.PID, addr, pid)
			}
			return err
		},
	})
}

// dnsAddrs are the DNS filter's sockets: UDP and TCP on both loopback
// addresses.
func dnsAddrs(cfg Config) []daemonpid.Addr {
	var out []daemonpid.Addr
	for _, host := range []string{"127.0.0.1", "::1"} {
		ap := netip.AddrPortFrom(netip.MustParseAddr(host), cfg.DNSPort)
		out = append(out, daemonpid.Addr{Net: "udp", Addr: ap}, daemonpid.Addr{Net: "tcp", Addr: ap})
	}
	return out
}

// takeOver makes the sockets (addrs) of the daemon name while the one it
// replaces still holds the ports, so they are never free for another
// process to take; then it stops that one (stop) and makes cfg.StateDir.
// The caller closes the listeners.
func takeOver(cfg Config, name string, addrs []daemonpid.Addr, stop func(Config) error) (*daemonpid.Listeners, error) {
	ls, err := daemonpid.Listen(name, addrs)
	if err != nil {
		return nil, fmt.Errorf("firewall: %w", err)
	}
	if err := stop(cfg); err != nil {
		ls.Close()
		return nil, err
	}
	if err := os.MkdirAll(cfg.StateDir, 0o755); err != nil {
		ls.Close()
		return nil, fmt.Errorf("firewall: %w", err)
	}
	return ls, nil
}

// withDefaults fills in the daemon's account (uid, its own group) and the
// wait, and checks the command that runs it.
func (o DaemonOptions) withDefaults(caller string, uid int) (DaemonOptions, error) {
	if len(o.Command) == 0 {
		return o, fmt.Errorf("firewall: %s needs DaemonOptions.Command", caller)
	}
	if o.UID == 0 && o.GID == 0 {
		o.UID, o.GID = uid, uid
	}
	if o.Wait == 0 {
		o.Wait = 5 * time.Second
	}
	return o, nil
}

// daemon is what differs between the firewall's daemons (the DNS filter,
// the name gate) for startDaemon.
type daemon struct {
	name                         string // for errors
	configFile, pidFile, errFile string // under Config.StateDir
	caps                         []uintptr
	// listeners are its sockets (daemonpid.Listen), made before the
	// daemon it replaces was stopped.
	listeners *daemonpid.Listeners
	// ready reports whether the process pid answers its health query.
	ready func(ctx context.Context, pid int) error
}

// startDaemon writes the daemon's copy of cfg and its stderr file to
// cfg.StateDir and starts it (daemonpid.Start) as opts says, with "--config
// FILE" after opts.Command.
func startDaemon(ctx context.Context, cfg Config, opts DaemonOptions, d daemon) (int, error) {
	raw, _ := json.MarshalIndent(cfg, "", "  ")
	cfgPath := filepath.Join(cfg.StateDir, d.configFile)
	if err := os.WriteFile(cfgPath, raw, 0o644); err != nil {
		return 0, fmt.Errorf("firewall: write %s config: %w", d.name, err)
	}
	errPath := filepath.Join(cfg.StateDir, d.errFile)
	// O_APPEND, so that after the daemon empties the file (it bounds it,
	// see rotatingFile) every writer of the shared descriptor starts again
	// at offset 0 instead of leaving a hole.
	errFile, err := os.OpenFile(errPath, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|os.O_APPEND, 0o644)
	if err != nil {
		return 0, fmt.Errorf("firewall: %w", err)
	}
	defer errFile.Close()
	// The file and its rotated copy are given to the daemon's user here,
	// by root: it cannot create files in the root-owned directories.
	for _, p := range []string{errPath, errPath + ".1"} {
		if err := handOver(p, opts); err != nil {
			return 0, err
		}
	}
	pid, err := daemonpid.Start(ctx, daemonpid.Spec{
		Name:      d.name,
		Argv:      append(append([]string(nil), opts.Command...), "--config", cfgPath),
		Env:       opts.Env,
		UID:       opts.UID,
		GID:       opts.GID,
		Caps:      d.caps,
		Output:    errFile,
		PIDFile:   filepath.Join(cfg.StateDir, d.pidFile),
		Listeners: d.listeners,
		Wait:      opts.Wait,
		Ready: func(ctx context.Context, pid int) error {
			hctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
			defer cancel()
			return d.ready(hctx, pid)
		},
		Tail: func() string {
			msg, _ := os.ReadFile(errPath)
			return strings.TrimSpace(string(msg))
		},
	})
	if err != nil {
		return 0, fmt.Errorf("firewall: %w", err)
	}
	return pid, nil
}

// handOver creates path if missing (keeping its contents) and gives it to
// the daemon's user.
func handOver(path string, opts DaemonOptions) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("firewall: %w", err)
	}
	f.Close()
	if opts.UID >= 0 {
		if err := os.Chown(path, opts.UID, opts.GID); err != nil {
			return fmt.Errorf("firewall: %w", err)
		}
	}
	return nil
}

// DaemonPID returns the pid in the pidfile and whether that process is the
// DNS filter StartDNS started: alive, not a zombie, and started at the time
// the pidfile records.
//
// The start time is what makes a stale pidfile harmless. The pidfile lives
// in StateDir (layout.RunDir), which Docker keeps across a container restart,
// while pids start again from 1 in the new PID namespace: the recorded
// number can then name anything of the new start — a thread of the
// entrypoint itself, which StopDNS would kill. A pid alone cannot tell; the
// pair (pid, start time in clock ticks since boot) names one process.
func DaemonPID(cfg Config) (int, bool) { return pidOf(cfg, daemonPIDFile) }

// CheckDNS proves the DNS filter recorded in the pidfile runs, as its uid,
// and is the only holder of its sockets (daemonpid.Check): a port someone
// else took is an error that names it and its holder.
func CheckDNS(cfg Config) error { return checkDaemon(cfg, daemonPIDFile, "DNS filter") }

// StopDNS stops the daemon named by the pidfile, if it runs.
func StopDNS(cfg Config) error { return stopDaemon(cfg, daemonPIDFile, "DNS filter") }

// pidOf, checkDaemon and stopDaemon are DaemonPID, CheckDNS and StopDNS for
// the daemon whose pidfile is pidFile under cfg.StateDir.
func pidOf(cfg Config, pidFile string) (int, bool) {
	cfg = cfg.WithDefaults()
	return daemonpid.Read(filepath.Join(cfg.StateDir, pidFile), "/proc")
}

func checkDaemon(cfg Config, pidFile, name string) error {
	cfg = cfg.WithDefaults()
	_, err := daemonpid.Check(filepath.Join(cfg.StateDir, pidFile), name)
	return err
}

func stopDaemon(cfg Config, pidFile, name string) error {
	cfg = cfg.WithDefaults()
	if err := daemonpid.Stop(filepath.Join(cfg.StateDir, pidFile)); err != nil {
		return fmt.Errorf("firewall: stop %s: %w", name, err)
	}
	return nil
}

// Warm resolves every exact allowed name through the running filter, so
// their addresses are in the sets before the first connection, and returns
// one warning per name that did not resolve (an unresolvable name is not an
// error: it may appear later).
func Warm(ctx context.Context, cfg Config) []string {
	cfg = cfg.WithDefaults()
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(int(cfg.DNSPort)))
	var (
		mu   sync.Mutex
		ok   = map[string]bool{}
		why  = map[string]string{}
		wg   sync.WaitGroup
		sem  = make(chan struct{}, 16)
		seen = map[string]bool{}
	)
	var names []string
	for _, d := range cfg.Allow {
		if d.Name == "" || d.Wildcard || seen[d.Name] {
			continue
		}
		seen[d.Name] = true
		names = append(names, d.Name)
		for _, qt := range []uint16{dns.TypeA, dns.TypeAAAA} {
			wg.Add(1)
			sem <- struct{}{}
			go func(name string, qt uint16) {
				defer func() { <-sem; wg.Done() }()
				m := new(dns.Msg)
				m.SetQuestion(dns.Fqdn(name), qt)
				c := &dns.Client{Timeout: 3 * time.Second}
				r, _, err := c.ExchangeContext(ctx, m, addr)
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err != nil:
					why[name] = err.Error()
				case r.Rcode != dns.RcodeSuccess:
					why[name] = dns.RcodeToString[r.Rcode]
				case len(r.Answer) > 0:
					ok[name] = true
				}
			}(d.Name, qt)
		}
	}
	wg.Wait()
	var warnings []string
	for _, n := range names {
		if !ok[n] {
			w := "no address"
			if why[n] != "" {
				w = why[n]
			}
			warnings = append(warnings, fmt.Sprintf("%s does not resolve: %s", n, w))
		}
	}
	return warnings
}
