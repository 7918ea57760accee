package main

import (
	"errors"
	"fmt"
	"net"
	"os"

	"github.com/urfave/cli/v2"

	"github.com/devbox-dev/devbox/internal/baseline"
	"github.com/devbox-dev/devbox/internal/gateway"
	"github.com/devbox-dev/devbox/internal/layout"
	"github.com/devbox-dev/devbox/internal/policy"
	"github.com/devbox-dev/devbox/internal/secrets"
)

// gatewayLaunch is how the fence starts the gateway for creds: this binary's
// `gateway run` as devbox-gateway, with the CA and secrets-directory
// variables of the fence's own environment and nothing else.
func gatewayLaunch(creds policy.Credentials, self, policyPath string) *gateway.LaunchOptions {
	var env []string
	for _, k := range gateway.PassEnv {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return &gateway.LaunchOptions{
		Creds: creds,
		Store: secrets.New(secrets.Dir()),
		Start: gateway.StartOptions{
			Command: []string{self, "gateway", "run", "--policy", policyPath},
			Env:     env,
		},
	}
}

// loadPolicyInForce loads flag when given, else the policy in force in
// this container (baseline.Applied: the one the entrypoint resolved, with
// the repository's narrowing).
func loadPolicyInForce(flag string) (*policy.Policy, error) {
	if flag != "" {
		return policy.Load(flag)
	}
	return baseline.Applied()
}

// policyGateway is the gateway launch for `firewall apply`: from the policy
// when the fence comes from one (--config files carry no credentials).
func policyGateway(c *cli.Context) *gateway.LaunchOptions {
	if c.String("config") != "" {
		return nil
	}
	p, err := policy.Load(c.String("policy"))
	if err != nil {
		return nil
	}
	self, err := os.Executable()
	if err != nil {
		self = layout.BinaryPath
	}
	return gatewayLaunch(p.Credentials, self, c.String("policy"))
}

var gatewayCommand = &cli.Command{
	Name:  "gateway",
	Usage: "the credential gateway (started by the entrypoint; see docs/credentials.md)",
	Subcommands: []*cli.Command{
		{
			Name:  "run",
			Usage: "serve the policy's credential routes on loopback, in the foreground",
			Description: `Run by the fence as devbox-gateway (uid 996), never by hand: it refuses to
run as root. It makes itself undumpable before reading any secret, reads
secrets from the secrets directory on every request, and logs each request's
route and the secret's fingerprint, never its value.`,
			Flags: []cli.Flag{
				&cli.StringFlag{Name: "policy", Usage: "policy `FILE` whose credentials section names the routes (default: the policy in force, " + layout.AppliedPolicyPath + ", which the entrypoint passes)"},
				&cli.StringFlag{Name: "listen", Value: layout.GatewayAddr, Usage: "loopback `ADDR` to listen on"},
				secretDirFlag,
			},
			Action: func(c *cli.Context) error {
				if err := gateway.Harden(); err != nil {
					return err
				}
				if os.Geteuid() == 0 {
					return errors.New("gateway run: refusing to run as root: the fence starts it as " + layout.GatewayUser)
				}
				p, err := loadPolicyInForce(c.String("policy"))
				if err != nil {
					return err
				}
				if p.Credentials.IsZero() {
					return fmt.Errorf("gateway run: %s has no credentials section", c.String("policy"))
				}
				host, _, err := net.SplitHostPort(c.String("listen"))
				if ip := net.ParseIP(host); err != nil || ip == nil || !ip.IsLoopback() {
					return fmt.Errorf("gateway run: --listen %q: want a loopback address and port", c.String("listen"))
				}
				// Root made the socket and handed it over (gateway.Start).
				ln, err := gateway.Listener(c.String("listen"))
				if err != nil {
					return fmt.Errorf("gateway run: %w", err)
				}
				g := gateway.New(p.Credentials, secrets.New(c.String("dir")), gateway.WithLog(c.App.ErrWriter))
				g.Listening(ln.Addr().String())
				return gateway.Serve(c.Context, ln, g)
			},
		},
	},
}
