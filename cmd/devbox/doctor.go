package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"strconv"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/devbox-dev/devbox/firewall"
	"github.com/devbox-dev/devbox/internal/baseline"
	"github.com/devbox-dev/devbox/internal/doctor"
	"github.com/devbox-dev/devbox/internal/entrypoint"
	"github.com/devbox-dev/devbox/internal/gateway"
	"github.com/devbox-dev/devbox/internal/gitaudit"
	"github.com/devbox-dev/devbox/internal/layout"
	"github.com/devbox-dev/devbox/internal/policy"
)

var doctorCommand = &cli.Command{
	Name:  "doctor",
	Usage: "say what the fence enforces here, what it does not and how to fix it",
	Description: `Run it inside the dev container (as the agent's user, or as root from the
host with docker exec -u root) or outside one. It reads the entrypoint's
status, the DNS filter, the name gate and its counters, the credential gateway's routes
(secret set, upstream reachable, direct access blocked), this process's capabilities and no_new_privs, the
container's capabilities, IPv6, sudo and setuid binaries, the read-only
mounts of .git/hooks, .git/config and .devcontainer, and whether bwrap can
sandbox commands. As root it also reads the firewall rules.

The exit status is 1 when something that should be enforced is not.`,
	Flags: []cli.Flag{
		&cli.BoolFlag{Name: "json", Usage: "print the report as JSON"},
		&cli.BoolFlag{Name: "quiet", Aliases: []string{"q"}, Usage: "print only what is not enforced (nothing when all is well): for a login banner"},
		&cli.StringFlag{Name: "workspace", Usage: "the repository mounted in the container (default: the current directory)"},
		&cli.StringFlag{Name: "status", Value: entrypoint.StatusPath, Usage: "the entrypoint's status `FILE`"},
		&cli.StringFlag{Name: "policy", Usage: "the policy `FILE` to check against (default: the policy in force, " + layout.AppliedPolicyPath + " once the entrypoint resolved it, else " + layout.PolicyPath + ")"},
	},
	Action: func(c *cli.Context) error {
		ws := c.String("workspace")
		if ws == "" {
			ws, _ = os.Getwd()
		}
		policyPath := c.String("policy")
		if policyPath == "" {
			// The one lookup devbox run and the gateway use too. On error
			// (a repository policy the entrypoint never recorded) the
			// policy check below reads the missing record and fails.
			var err error
			if policyPath, err = baseline.AppliedPath(); err != nil {
				fmt.Fprintf(c.App.ErrWriter, "devbox doctor: %v\n", err)
				policyPath = layout.AppliedPolicyPath
			}
		}
		var routes func(context.Context) ([]doctor.Route, error)
		if p, err := policy.Load(policyPath); err == nil && !p.Credentials.IsZero() {
			routes = func(ctx context.Context) ([]doctor.Route, error) {
				// --quiet (the login banner) reports only what is not
				// enforced: no handshake with each upstream at every login.
				rs, err := gateway.QueryRoutes(ctx, layout.GatewayAddr, !c.Bool("quiet"))
				var out []doctor.Route
				for _, r := range rs {
					out = append(out, doctor.Route{Route: r.Route, Host: r.Host, Secret: r.Secret, SecretSet: r.SecretSet,
						Upstream: r.Upstream, UpstreamSkipped: r.UpstreamSkipped})
				}
				return out, err
			}
		}
		rep := doctor.Run(c.Context, doctor.OS{}, doctor.Options{
			Routes: routes,
			DialDirect: func(ctx context.Context, host string) error {
				ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
				defer cancel()
				conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", net.JoinHostPort(host, "443"))
				if err == nil {
					conn.Close()
				}
				return err
			},
			StatusPath: c.String("status"),
			PolicyPath: policyPath,
			Workspace:  ws,
			DNSUID:     layout.DNSUID,
			GateUID:    layout.GateUID,
			GateHealth: func(ctx context.Context) (string, error) {
				ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
				defer cancel()
				// Every devbox container's gate listens on the default port.
				h, err := firewall.QueryGateHealth(ctx, net.JoinHostPort("127.0.0.1", strconv.Itoa(firewall.DefaultGatePort)))
				if err != nil {
					return "", err
				}
				return gateCounters(h), nil
			},
			Owns: func(check string) error {
				// Every devbox container's daemons keep their pidfiles in
				// the default state directory.
				switch check {
				case "dns filter":
					return firewall.CheckDNS(firewall.Config{})
				case "name gate":
					return firewall.CheckGate(firewall.Config{})
				}
				return gateway.Check(layout.RunDir)
			},
			IsolatedWorkspace: os.Getenv(layout.IsolatedWorkspaceEnv),
			GitPaths: func(ws string) ([]string, error) {
				r, err := gitaudit.Scan(ws)
				if err != nil {
					return nil, err
				}
				return r.ReadOnly, nil
			},
		})
		var err error
		switch {
		case c.Bool("json"):
			err = rep.WriteJSON(c.App.Writer)
		case c.Bool("quiet"):
			err = rep.WriteProblems(c.App.ErrWriter)
		default:
			err = rep.WriteText(c.App.Writer)
		}
		if err != nil {
			return err
		}
		if !rep.Enforced {
			return cli.Exit("", 1)
		}
		return nil
	},
}
