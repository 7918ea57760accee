package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/devbox-dev/devbox/firewall"
	"github.com/devbox-dev/devbox/firewall/fwpolicy"
	"github.com/devbox-dev/devbox/internal/fence"
	"github.com/devbox-dev/devbox/internal/layout"
	"github.com/devbox-dev/devbox/internal/policy"
)

// firewallConfigFlags choose where the firewall's Config comes from: the
// policy (the default, baked into the image), or the daemon's JSON copy.
var firewallConfigFlags = []cli.Flag{
	&cli.StringFlag{Name: "policy", Value: layout.PolicyPath, Usage: "policy `FILE` the fence is compiled from"},
	&cli.StringFlag{Name: "config", Usage: "firewall config `FILE` (JSON, as written by apply for the DNS filter); overrides --policy"},
}

func loadFirewallConfig(c *cli.Context) (firewall.Config, error) {
	if path := c.String("config"); path != "" {
		return firewall.LoadConfig(path)
	}
	p, err := policy.Load(c.String("policy"))
	if err != nil {
		return firewall.Config{}, fmt.Errorf("--policy: %w", err)
	}
	return fwpolicy.Config(p), nil
}

var firewallCommand = &cli.Command{
	Name:  "firewall",
	Usage: "the egress fence: default-deny rules, the DNS filter, verify, status and the log",
	Description: `Runs inside the container, as root (apply, dns, deny-all) or as anyone
(rules, status, log). See docs/firewall.md for the rule layout and DNS flow.`,
	Subcommands: []*cli.Command{
		firewallApplyCommand,
		firewallDNSCommand,
		firewallGateCommand,
		firewallVerifyCommand,
		firewallStatusCommand,
		firewallLogCommand,
		firewallRulesCommand,
		firewallDenyAllCommand,
	},
}

var firewallApplyCommand = &cli.Command{
	Name:  "apply",
	Usage: "install the fence and (re)start the DNS filter and the name gate; fail closed",
	Flags: append([]cli.Flag{
		&cli.BoolFlag{Name: "no-dns", Usage: "load rules and sets only; do not start the DNS filter"},
	}, firewallConfigFlags...),
	Action: func(c *cli.Context) error {
		// No policy, no egress: a config that does not load fails the
		// first step, which leaves the namespace denying everything.
		cfg, err := loadFirewallConfig(c)
		f := fence.New(fence.Options{Config: cfg, LoadErr: err, NoDNS: c.Bool("no-dns"), Gateway: policyGateway(c), Warn: c.App.ErrWriter})
		return f.Install(c.Context, func(step, summary string, took time.Duration) {
			if step == "apply" {
				fmt.Fprintf(c.App.Writer, "devbox: fence loaded in %v: %s\n", took.Round(100_000), summary)
			} else if summary != "" {
				fmt.Fprintf(c.App.Writer, "devbox: %s\n", summary)
			}
		})
	},
}

// withFirewallConfig is the action that runs daemon (RunDNS, RunGate) in
// the foreground with the config the flags name.
func withFirewallConfig(daemon func(context.Context, firewall.Config) error) cli.ActionFunc {
	return func(c *cli.Context) error {
		cfg, err := loadFirewallConfig(c)
		if err != nil {
			return err
		}
		return daemon(c.Context, cfg)
	}
}

var firewallDNSCommand = &cli.Command{
	Name:   "dns",
	Usage:  "run the DNS filter in the foreground (apply starts it detached, on sockets root made: it never binds its own)",
	Flags:  firewallConfigFlags,
	Action: withFirewallConfig(firewall.RunDNS),
}

var firewallGateCommand = &cli.Command{
	Name:  "gate",
	Usage: "run the name gate in the foreground (apply starts it detached, on sockets root made: it never binds its own)",
	Description: `The name gate receives every TCP connection to an address an allowed name
resolved to, reads its TLS SNI or HTTP Host, and splices it to its
destination only when that name is allowed on that port and resolved to that
address; otherwise it refuses it and logs why. See docs/firewall.md.`,
	Flags:  firewallConfigFlags,
	Action: withFirewallConfig(firewall.RunGate),
}

var firewallVerifyCommand = &cli.Command{
	Name:  "verify",
	Usage: "prove the fence from inside: allowed targets connect, denied ones do not, names are refused",
	Flags: append([]cli.Flag{
		&cli.StringSliceFlag{Name: "allowed", Usage: "`HOST:PORT` that must connect (repeatable)"},
		&cli.StringSliceFlag{Name: "denied", Usage: "`HOST:PORT` that must not connect (repeatable; default 192.0.2.1:443 and [2001:db8::1]:443)"},
		&cli.StringSliceFlag{Name: "refused", Usage: "`NAME` the DNS filter must refuse (repeatable; default fence-check.devbox.invalid)"},
		&cli.BoolFlag{Name: "json", Usage: "print the checks as JSON"},
	}, firewallConfigFlags...),
	Action: func(c *cli.Context) error {
		cfg, err := loadFirewallConfig(c)
		if err != nil {
			return err
		}
		t := firewall.Targets{Allowed: c.StringSlice("allowed"), Denied: c.StringSlice("denied"), Refused: c.StringSlice("refused")}
		if !c.IsSet("denied") {
			// Documentation ranges (RFC 5737, RFC 3849): never routed.
			t.Denied = []string{"192.0.2.1:443", "[2001:db8::1]:443"}
		}
		if !c.IsSet("refused") {
			t.Refused = []string{"fence-check.devbox.invalid"}
		}
		checks, verr := firewall.Verify(c.Context, cfg, t)
		if c.Bool("json") {
			enc := json.NewEncoder(c.App.Writer)
			enc.SetIndent("", "  ")
			enc.Encode(checks)
		} else {
			for _, ch := range checks {
				mark := "ok  "
				if !ch.OK {
					mark = "FAIL"
				}
				fmt.Fprintf(c.App.Writer, "%s %-8s %-30s %s\n", mark, ch.Kind, ch.Target, ch.Detail)
			}
		}
		return verr
	},
}

var firewallStatusCommand = &cli.Command{
	Name:  "status",
	Usage: "show the rules loaded, per-rule counters, set sizes and the DNS filter's and name gate's health",
	Flags: append([]cli.Flag{&cli.BoolFlag{Name: "json", Usage: "print JSON"}}, firewallConfigFlags...),
	Action: func(c *cli.Context) error {
		cfg, err := loadFirewallConfig(c)
		if err != nil {
			cfg = firewall.Config{} // status works without a policy: defaults name everything
		}
		st, err := firewall.ReadStatus(c.Context, cfg)
		if err != nil {
			return err
		}
		if c.Bool("json") {
			enc := json.NewEncoder(c.App.Writer)
			enc.SetIndent("", "  ")
			return enc.Encode(st)
		}
		w := tabwriter.NewWriter(c.App.Writer, 0, 4, 2, ' ', 0)
		for _, fs := range st.Families {
			if fs.Error != "" {
				fmt.Fprintf(w, "%s: cannot read the rules (needs root): %s\n", fs.Family, fs.Error)
				continue
			}
			fmt.Fprintf(w, "%s: rules loaded %v, OUTPUT policy %s\n", fs.Family, fs.Loaded, fs.Policy)
			for _, r := range fs.Rules {
				fmt.Fprintf(w, "  %d\t%d\t%s\n", r.Packets, r.Bytes, r.Rule)
			}
		}
		fmt.Fprintln(w, "sets:")
		for _, kind := range firewall.SetKinds {
			for _, f := range firewall.Families {
				name := firewall.SetName(kind, f)
				if n, ok := st.Sets[name]; ok {
					fmt.Fprintf(w, "  %s\t%d entries\n", name, n)
				} else {
					fmt.Fprintf(w, "  %s\tunreadable (needs CAP_NET_ADMIN)\n", name)
				}
			}
		}
		if h := st.Daemon.Health; h != nil {
			fmt.Fprintf(w, "dns filter: pid %d, upstreams %s; %d queries, %d forwarded, %d refused, %d answers dropped, %d upstream errors, %d blocked packets logged\n",
				h.PID, strings.Join(h.Upstreams, ","), h.Queries, h.Forwarded, h.Refused, h.Dropped, h.UpstreamErrors, h.Blocked)
		} else {
			fmt.Fprintf(w, "dns filter: DOWN: %s\n", st.Daemon.Error)
		}
		switch g := st.Gate; {
		case !g.Enabled:
			fmt.Fprintln(w, "name gate: off (names open their addresses to any SNI/Host)")
		case g.Health != nil:
			fmt.Fprintf(w, "name gate: pid %d; %s\n", g.Health.PID, gateCounters(*g.Health))
		default:
			fmt.Fprintf(w, "name gate: DOWN: %s\n", g.Error)
		}
		if st.LogFile != "" {
			fmt.Fprintf(w, "log: %s\n", st.LogFile)
		}
		return w.Flush()
	},
}

var firewallLogCommand = &cli.Command{
	Name:  "log",
	Usage: "show blocked connections and refused DNS queries",
	Flags: append([]cli.Flag{
		&cli.BoolFlag{Name: "follow", Aliases: []string{"f"}, Usage: "keep printing new lines"},
		&cli.BoolFlag{Name: "json", Usage: "print the JSON lines as they are"},
		&cli.StringFlag{Name: "file", Usage: "log `FILE` (default: the policy's, else " + layout.LogPath + ")"},
	}, firewallConfigFlags...),
	Action: func(c *cli.Context) error {
		path := c.String("file")
		if path == "" {
			path = layout.LogPath
			if cfg, err := loadFirewallConfig(c); err == nil && cfg.LogFile != "" {
				path = cfg.LogFile
			}
		}
		print := func(e firewall.Event) {
			if c.Bool("json") {
				raw, _ := json.Marshal(e)
				fmt.Fprintln(c.App.Writer, string(raw))
			} else {
				fmt.Fprintln(c.App.Writer, e.String())
			}
		}
		if c.Bool("follow") {
			return firewall.FollowLog(c.Context, path, print)
		}
		evs, err := firewall.ReadLog(path)
		if err != nil {
			return err
		}
		for _, e := range evs {
			print(e)
		}
		return nil
	},
}

var firewallRulesCommand = &cli.Command{
	Name:  "rules",
	Usage: "print the rulesets apply would load, without applying them",
	Description: `With no DNS upstream in the policy, the upstream is read from resolv.conf,
as apply does: when it names Docker's embedded DNS (127.0.0.11) the rules
include the exemption for dockerd's forwards.`,
	Flags: append([]cli.Flag{
		&cli.StringFlag{Name: "resolv-conf", Value: firewall.DefaultResolvConf, Usage: "resolv.conf `FILE` the default DNS upstream is read from"},
	}, firewallConfigFlags...),
	Action: func(c *cli.Context) error {
		cfg, err := loadFirewallConfig(c)
		if err != nil {
			return err
		}
		if err := cfg.Validate(); err != nil {
			return err
		}
		if c.IsSet("resolv-conf") || cfg.ResolvConf == "" {
			cfg.ResolvConf = c.String("resolv-conf")
		}
		cfg = firewall.EffectiveUpstream(cfg)
		if len(cfg.Upstream) == 0 {
			fmt.Fprintf(c.App.Writer, "# DNS upstream: none (no nameserver readable in %s)\n", cfg.ResolvConf)
		} else {
			var ups []string
			for _, u := range cfg.Upstream {
				ups = append(ups, u.String())
			}
			fmt.Fprintf(c.App.Writer, "# DNS upstream: %s\n", strings.Join(ups, ", "))
		}
		for _, rs := range firewall.Rules(cfg) {
			fmt.Fprintf(c.App.Writer, "# %s (%s --noflush)\n%s", rs.Family, map[firewall.Family]string{firewall.IPv4: "iptables-restore", firewall.IPv6: "ip6tables-restore"}[rs.Family], rs)
		}
		return nil
	},
}

var firewallDenyAllCommand = &cli.Command{
	Name:  "deny-all",
	Usage: "stop the DNS filter and the name gate and deny all egress (loopback only); `apply` restores the policy",
	Flags: firewallConfigFlags,
	Action: func(c *cli.Context) error {
		cfg, err := loadFirewallConfig(c)
		if err != nil {
			cfg = firewall.Config{}
		}
		errs := []error{firewall.DenyAll(c.Context, cfg), firewall.StopDNS(cfg), firewall.StopGate(cfg)}
		if err := errors.Join(errs...); err != nil {
			return err
		}
		fmt.Fprintln(c.App.Writer, "devbox: all egress denied")
		return nil
	},
}

// gateCounters summarizes the gate's counters in one line (status, doctor).
func gateCounters(h firewall.GateHealth) string {
	s := fmt.Sprintf("%d connections, %d passed, %d refused, %d open, %d dial errors", h.Accepted, h.Passed, h.Refused, h.Active, h.DialErrors)
	if len(h.Reasons) > 0 {
		var rs []string
		for r, n := range h.Reasons {
			rs = append(rs, fmt.Sprintf("%s %d", r, n))
		}
		sort.Strings(rs)
		s += " (" + strings.Join(rs, ", ") + ")"
	}
	return s
}
