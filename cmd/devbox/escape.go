//go:build linux

package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/devbox-dev/devbox/internal/escape"
)

var escapeCommand = &cli.Command{
	Name:  "escape",
	Usage: "score the sandbox this runs in: try every way out, per category, and print what escaped",
	Description: `Run it inside any Linux sandbox (a container, bubblewrap, srt, devbox) as
the agent's user; it needs nothing else. Per category (egress by address
and by name, DNS tunnelling, SNI/Host fronting, UDP/QUIC, cloud metadata,
credentials, writing what the host runs later, privilege, tampering with
the fence) it counts the attempts blocked, escaped and not applicable, with
one line of evidence per escape. docs/scorecard.md says what each means.

Network attempts are judged only against a world: servers of devbox's test
world (worldd) that answer in a way the probe recognizes, named by --world
FILE or the flags below. Without one those categories are "not judged".
The persistence attempts need --workspace and/or --home: the directories the
sandbox shares with the host. Nothing is left changed, unless
--leave-planted: then each file it could write gets a line naming the
nonce, and stays, for the host's audit to find (a throwaway workspace only).

Exit status 1 when anything escaped; with --must-escape, 1 when any attempt
of the listed categories was blocked or not judged (the control's check).`,
	Flags: []cli.Flag{
		&cli.StringFlag{Name: "world", Usage: "scorecard config `FILE` (HuJSON: world, workspace, home, secret, …; see docs/scorecard.md)"},
		&cli.StringSliceFlag{Name: "addr", Usage: "world TCP server `IP:PORT` no policy allows (repeatable)"},
		&cli.StringSliceFlag{Name: "icmp", Usage: "world `IP` that answers ping (repeatable)"},
		&cli.StringSliceFlag{Name: "name", Usage: "world `HOST:PORT` no policy allows (repeatable)"},
		&cli.StringSliceFlag{Name: "resolver", Usage: "world DNS server `IP:PORT` (repeatable)"},
		&cli.StringFlag{Name: "tunnel-domain", Usage: "`DOMAIN` the world's DNS answers every name under"},
		&cli.StringSliceFlag{Name: "allowed", Usage: "allowed `HOST:PORT` served by the world, for the fronting attempts (repeatable)"},
		&cli.StringSliceFlag{Name: "udp", Usage: "world UDP echo server `IP:PORT` (repeatable)"},
		&cli.StringFlag{Name: "metadata", Usage: "`IP:PORT` where the world stands in for the cloud metadata service"},
		&cli.StringFlag{Name: "workspace", Usage: "the workspace `DIR` the sandbox shares with the host"},
		&cli.StringFlag{Name: "home", Usage: "the home `DIR` the sandbox shares with the host (only when it is the host's)"},
		&cli.StringFlag{Name: "secret", Usage: "a `MARKER` planted outside the sandbox: found anywhere, it is a leak"},
		&cli.StringSliceFlag{Name: "secret-file", Usage: "another credential `FILE` to try reading (repeatable)"},
		&cli.StringFlag{Name: "nonce", Usage: "`MARK` put in every query and datagram, to find them in the world's log"},
		&cli.BoolFlag{Name: "leave-planted", Usage: "leave what the persistence attempts could write (a line naming the nonce), for the host's audit to find"},
		&cli.StringFlag{Name: "sandbox", Usage: "`NAME` of what is measured, printed in the JSON"},
		&cli.StringFlag{Name: "must-escape", Usage: "comma-separated `CATEGORIES` that must escape (a control with no fence)"},
		&cli.DurationFlag{Name: "timeout", Value: 2 * time.Second, Usage: "time limit for each attempt"},
		&cli.BoolFlag{Name: "json", Usage: "print the scorecard as JSON"},
	},
	Action: func(c *cli.Context) error {
		if c.NArg() > 0 {
			return fmt.Errorf("unexpected arguments %q", c.Args().Slice())
		}
		// As root every attempt "escapes", and the firewall attempts would
		// really change the firewall of whatever machine this runs on.
		if os.Geteuid() == 0 {
			return cli.Exit("devbox escape: refusing to run as root: run it as the agent's user inside the sandbox", 2)
		}
		cfg, err := escapeConfig(c)
		if err != nil {
			return err
		}
		card := escape.Scorecard(c.Context, cfg, c.Duration("timeout"))
		card.Sandbox = c.String("sandbox")
		if c.Bool("json") {
			enc := json.NewEncoder(c.App.Writer)
			enc.SetIndent("", "  ")
			if err := enc.Encode(card); err != nil {
				return err
			}
		} else if err := card.WriteTable(c.App.Writer); err != nil {
			return err
		}
		if cats := c.String("must-escape"); cats != "" {
			if bad := card.MustEscape(strings.Split(cats, ",")); len(bad) > 0 {
				return cli.Exit("devbox escape: --must-escape: "+strings.Join(bad, "\n  "), 1)
			}
			return nil
		}
		if card.Escapes > 0 {
			return cli.Exit("", 1)
		}
		return nil
	},
}

// escapeConfig is --world's file with the flags on top.
func escapeConfig(c *cli.Context) (escape.Config, error) {
	var cfg escape.Config
	if path := c.String("world"); path != "" {
		var err error
		if cfg, err = escape.LoadConfig(path); err != nil {
			return cfg, fmt.Errorf("--world: %w", err)
		}
	}
	w := cfg.World
	if w == nil {
		w = &escape.World{}
	}
	w.Addrs = append(w.Addrs, c.StringSlice("addr")...)
	w.ICMP = append(w.ICMP, c.StringSlice("icmp")...)
	w.Names = append(w.Names, c.StringSlice("name")...)
	w.Resolvers = append(w.Resolvers, c.StringSlice("resolver")...)
	w.Allowed = append(w.Allowed, c.StringSlice("allowed")...)
	w.UDP = append(w.UDP, c.StringSlice("udp")...)
	set := func(dst *string, flag string) {
		if v := c.String(flag); v != "" {
			*dst = v
		}
	}
	set(&w.TunnelDomain, "tunnel-domain")
	set(&w.Metadata, "metadata")
	if cfg.World != nil || !emptyWorld(w) {
		cfg.World = w
	}
	set(&cfg.Workspace, "workspace")
	set(&cfg.Home, "home")
	set(&cfg.Secret, "secret")
	set(&cfg.Nonce, "nonce")
	cfg.SecretFiles = append(cfg.SecretFiles, c.StringSlice("secret-file")...)
	cfg.LeavePlanted = cfg.LeavePlanted || c.Bool("leave-planted")
	if cfg.World != nil && emptyWorld(cfg.World) {
		return cfg, errors.New("--world: the world names no destination")
	}
	return cfg, nil
}

func emptyWorld(w *escape.World) bool {
	return len(w.Addrs)+len(w.ICMP)+len(w.Names)+len(w.Resolvers)+len(w.Allowed)+len(w.UDP) == 0 && w.TunnelDomain == "" && w.Metadata == ""
}
