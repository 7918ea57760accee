//go:build linux

package firewall

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/coreos/go-iptables/iptables"

	"github.com/devbox-dev/devbox/internal/daemonpid"
)

// ReadStatus reads the rules, counters, set sizes and the daemon's health.
func ReadStatus(ctx context.Context, cfg Config) (Status, error) {
	cfg = cfg.WithDefaults()
	st := Status{Sets: map[string]int{}}
	if cfg.Log {
		st.LogFile = cfg.LogFile
	}
	for _, f := range Families {
		fs := FamilyStatus{Family: f.String()}
		present, err := presentJumps(ctx, f)
		if err != nil {
			// Reading rules needs CAP_NET_ADMIN: the agent's user still
			// gets the daemon's health below.
			fs.Error = err.Error()
			st.Families = append(st.Families, fs)
			continue
		}
		fs.Loaded = true
		for _, j := range rules(cfg, f).Jumps {
			fs.Loaded = fs.Loaded && present(j)
		}
		proto := iptables.ProtocolIPv4
		if f == IPv6 {
			proto = iptables.ProtocolIPv6
		}
		ipt, err := iptables.New(iptables.IPFamily(proto), iptables.Timeout(statusLockWait))
		fs.Policy = "unknown"
		if err == nil {
			fs.Policy = outputPolicy(ipt)
		}
		if err == nil && fs.Loaded {
			if stats, err := ipt.StructuredStats("filter", ChainOutput); err == nil {
				for _, s := range stats {
					fs.Rules = append(fs.Rules, RuleCounter{Rule: describeStat(s), Packets: s.Packets, Bytes: s.Bytes})
				}
			}
		}
		st.Families = append(st.Families, fs)
	}
	if s, err := openSets(); err == nil {
		for _, kind := range SetKinds {
			for _, f := range Families {
				if n, err := s.size(SetName(kind, f)); err == nil {
					st.Sets[SetName(kind, f)] = n
				}
			}
		}
		s.Close()
	}
	pid, alive := DaemonPID(cfg)
	st.Daemon = DaemonStatus{PID: pid, Running: alive}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(int(cfg.DNSPort)))
	h, err := QueryHealth(ctx, addr)
	switch {
	case !alive:
		st.Daemon.Error = "DNS filter not running (no live pid in " + cfg.StateDir + "/" + daemonPIDFile + "): names do not resolve, egress stays denied"
		if err := daemonpid.Taken(filepath.Join(cfg.StateDir, daemonPIDFile), "DNS filter"); err != nil {
			st.Daemon.Error += "; and " + err.Error()
		}
	case err != nil:
		st.Daemon.Error = err.Error()
	case h.PID != pid:
		st.Daemon.Error = fmt.Sprintf("pid %d answers on %s, not the DNS filter (pid %d)", h.PID, addr, pid)
	default:
		// After the answer, so that a port taken since shows.
		if err := CheckDNS(cfg); err != nil {
			st.Daemon.Error = err.Error()
			break
		}
		st.Daemon.Health = &h
	}
	st.Gate = readGateStatus(ctx, cfg)
	return st, nil
}

func describeStat(s iptables.Stat) string {
	out := []string{}
	if s.Protocol != "all" && s.Protocol != "0" {
		out = append(out, "-p "+s.Protocol)
	}
	if s.Input != "*" && s.Input != "" {
		out = append(out, "-i "+s.Input)
	}
	if s.Output != "*" && s.Output != "" {
		out = append(out, "-o "+s.Output)
	}
	if s.Destination != nil && s.Destination.String() != "0.0.0.0/0" && s.Destination.String() != "::/0" {
		out = append(out, "-d "+s.Destination.String())
	}
	if o := strings.TrimSpace(s.Options); o != "" {
		out = append(out, o)
	}
	out = append(out, "-j "+s.Target)
	return strings.Join(out, " ")
}

// statusLockWait bounds, in seconds, how long status waits for the
// xtables lock held by a concurrent iptables-restore.
const statusLockWait = 5

// outputPolicy is the built-in OUTPUT chain's policy, read from
// `iptables -S OUTPUT` ("-P OUTPUT DROP").
func outputPolicy(ipt *iptables.IPTables) string {
	lines, err := ipt.List("filter", "OUTPUT")
	if err != nil {
		return "unknown"
	}
	for _, l := range lines {
		if p, ok := strings.CutPrefix(l, "-P OUTPUT "); ok {
			return p
		}
	}
	return "unknown"
}
