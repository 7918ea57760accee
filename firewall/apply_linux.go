//go:build linux

package firewall

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"time"
)

// Apply installs the fence for cfg in the current network namespace. It is
// fail-closed and re-runnable: it first sets every built-in chain's policy to
// DROP, then loads the sets and the rules (one iptables-restore transaction
// per family and table) without ever flushing a chain that is not devbox's.
// On any error the namespace is left denying everything (DenyAll) and the
// error says which step failed. Running it again converges to the same state.
//
// Apply does not start the DNS filter: names resolve only once StartDNS (or
// `devbox firewall dns`) runs.
func Apply(ctx context.Context, cfg Config) (res Result, err error) {
	start := time.Now()
	if err := cfg.Validate(); err != nil {
		return res, err
	}
	cfg = cfg.WithDefaults()
	defer func() {
		if err != nil {
			if derr := DenyAll(ctx, cfg); derr != nil {
				err = fmt.Errorf("%w; and falling back to deny-all failed too: %v", err, derr)
			} else {
				err = fmt.Errorf("%w (the namespace is left denying all egress)", err)
			}
		}
	}()
	if err := perFamily(func(f Family) error { return restore(ctx, f, dropPolicies) }); err != nil {
		return res, fmt.Errorf("firewall: set default-deny policies: %w", err)
	}
	s, err := openSets()
	if err != nil {
		return res, fmt.Errorf("firewall: %w", err)
	}
	defer s.Close()
	if res.StaticEntries, err = s.loadSets(cfg); err != nil {
		return res, fmt.Errorf("firewall: load sets: %w", err)
	}
	rulesets := Rules(EffectiveUpstream(cfg))
	err = perFamily(func(f Family) error {
		rs := rulesets[0]
		if f == IPv6 {
			rs = rulesets[1]
		}
		present, err := presentJumps(ctx, rs.Family)
		if err != nil {
			return fmt.Errorf("firewall: %w", err)
		}
		text := rs.Restore(present)
		if testHookRules != nil {
			text = testHookRules(rs.Family, text)
		}
		if err := restore(ctx, rs.Family, text); err != nil {
			return fmt.Errorf("firewall: load %v rules: %w", rs.Family, err)
		}
		return nil
	})
	if err != nil {
		return res, err
	}
	res.Took = time.Since(start)
	return res, nil
}

const dropPolicies = "*filter\n:INPUT DROP [0:0]\n:FORWARD DROP [0:0]\n:OUTPUT DROP [0:0]\nCOMMIT\n"

// perFamily runs fn for IPv4 and IPv6 at once (the two families' tables are
// independent) and returns the IPv4 error first.
func perFamily(fn func(Family) error) error {
	var errs [2]error
	var wg sync.WaitGroup
	for i, f := range Families {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = fn(f) }()
	}
	wg.Wait()
	return errors.Join(errs[0], errs[1])
}

// testHookRules lets the fault tests corrupt the transaction.
var testHookRules func(Family, string) string

// DenyAll puts the namespace in the fail-closed state: built-in policies
// DROP, devbox's chains reduced to "loopback only", and DNS still
// redirected to the filter's port, so that nothing — not even a query to
// Docker's resolver — leaves. It needs neither the sets nor the daemon.
func DenyAll(ctx context.Context, cfg Config) error {
	cfg = cfg.WithDefaults()
	var errs []string
	for _, rs := range denyAllRules(cfg) {
		present, err := presentJumps(ctx, rs.Family)
		if err == nil {
			err = restore(ctx, rs.Family, rs.Restore(present))
		}
		if err != nil {
			errs = append(errs, fmt.Sprintf("%v: %v", rs.Family, err))
			// Last resort: the built-in policies alone.
			restore(ctx, rs.Family, dropPolicies)
		}
	}
	if errs != nil {
		return fmt.Errorf("firewall: deny-all: %s", strings.Join(errs, "; "))
	}
	return nil
}

func denyAllRules(cfg Config) []Ruleset {
	var out []Ruleset
	for _, f := range Families {
		rs := rules(cfg, f)
		var r []string
		for _, d := range dnsPorts(cfg, f) {
			r = append(r, fmt.Sprintf("-A %s %s -m mark ! --mark 0x%x -j REJECT", ChainOutput, d, cfg.Mark))
		}
		if f == IPv4 {
			r = append(r, fmt.Sprintf("-A %s -d 127.0.0.11/32 -m mark ! --mark 0x%x -j REJECT", ChainOutput, cfg.Mark))
		}
		r = append(r,
			"-A "+ChainInput+" -i lo -j ACCEPT",
			"-A "+ChainInput+" -j DROP",
			"-A "+ChainOutput+" -o lo -j ACCEPT",
			"-A "+ChainOutput+" -j REJECT",
		)
		for i := range rs.tables {
			switch rs.tables[i].name {
			case "filter":
				rs.tables[i].rules = r
			case "nat": // keeps the DNS redirect, loses the gate's
				var kept []string
				for _, l := range rs.tables[i].rules {
					if !strings.HasPrefix(l, "-A "+ChainGate+" ") {
						kept = append(kept, l)
					}
				}
				rs.tables[i].rules = kept
			}
		}
		out = append(out, rs)
	}
	return out
}

func restoreCmd(f Family) string {
	if f == IPv6 {
		return "ip6tables-restore"
	}
	return "iptables-restore"
}

func restore(ctx context.Context, f Family, rules string) error {
	cmd := exec.CommandContext(ctx, restoreCmd(f), "--noflush", "--wait")
	cmd.Stdin = strings.NewReader(rules)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s: %v: %s", restoreCmd(f), err, strings.TrimSpace(stderr.String()))
	}
	return nil
}

func saveCmd(f Family) string {
	if f == IPv6 {
		return "ip6tables-save"
	}
	return "iptables-save"
}

// presentJumps reads the current rules once and reports which of devbox's
// jumps already exist.
func presentJumps(ctx context.Context, f Family) (func(Jump) bool, error) {
	out, err := exec.CommandContext(ctx, saveCmd(f)).Output()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", saveCmd(f), err)
	}
	have := map[Jump]bool{}
	table := ""
	for _, line := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(line, "*") {
			table = line[1:]
			continue
		}
		var chain, target string
		if n, _ := fmt.Sscanf(line, "-A %s -j %s", &chain, &target); n == 2 && strings.Count(line, " ") == 3 {
			have[Jump{table, chain, target}] = true
		}
	}
	return func(j Jump) bool { return have[j] }, nil
}
