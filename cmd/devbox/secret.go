package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"text/tabwriter"

	"github.com/urfave/cli/v2"
	"golang.org/x/term"

	"github.com/devbox-dev/devbox/internal/secrets"
)

var secretDirFlag = &cli.StringFlag{
	Name:    "dir",
	EnvVars: []string{secrets.DirEnv},
	Value:   secrets.Dir(),
	Usage:   "secrets `DIR` (readable by root and the gateway's account only)",
}

var secretCommand = &cli.Command{
	Name:  "secret",
	Usage: "store the credentials the credential gateway injects (root only)",
	Description: `Secrets are named by the policy's credentials section and stored where only
root and the gateway's account (devbox-gateway, uid 996) can read them. The
agent's user can neither read nor list them. Run as root; from the host:

   docker exec -i -u root CONTAINER devbox secret set anthropic < key.txt

The value is read from standard input, never from the command line.`,
	Subcommands: []*cli.Command{
		{
			Name:      "set",
			Usage:     "store the value on standard input as NAME",
			ArgsUsage: "NAME",
			Flags:     []cli.Flag{secretDirFlag},
			Action: withSecretName(func(c *cli.Context, s secrets.Store, name string) error {
				v, err := readSecret(c)
				if err != nil {
					return err
				}
				if err := s.Set(name, v); err != nil {
					return err
				}
				stored, _ := s.Secret(name)
				fmt.Fprintf(c.App.Writer, "secret %s stored in %s (%d bytes, fingerprint %s)\n", name, s.Dir, len(stored), secrets.Fingerprint(stored))
				return nil
			}),
		},
		{
			Name:  "list",
			Usage: "list stored secrets: name, size, fingerprint (never the value)",
			Flags: []cli.Flag{secretDirFlag},
			Action: func(c *cli.Context) error {
				if err := requireRoot("list"); err != nil {
					return err
				}
				list, err := secrets.New(c.String("dir")).List()
				if err != nil {
					return err
				}
				tw := tabwriter.NewWriter(c.App.Writer, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "NAME\tBYTES\tFINGERPRINT\tMODIFIED")
				for _, i := range list {
					fmt.Fprintf(tw, "%s\t%d\t%s\t%s\n", i.Name, i.Size, i.Fingerprint, i.Modified.UTC().Format("2006-01-02 15:04:05Z"))
				}
				return tw.Flush()
			},
		},
		{
			Name:      "rm",
			Usage:     "delete the secret NAME",
			ArgsUsage: "NAME",
			Flags:     []cli.Flag{secretDirFlag},
			Action: withSecretName(func(_ *cli.Context, s secrets.Store, name string) error {
				return s.Remove(name)
			}),
		},
	},
}

func requireRoot(verb string) error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("secret %s: must run as root (secrets are not readable by the agent's user); from the host: docker exec -i -u root CONTAINER devbox secret %s", verb, verb)
	}
	return nil
}

// withSecretName checks what every NAME subcommand needs (one argument,
// root) and then runs act on the store named by --dir.
func withSecretName(act func(c *cli.Context, s secrets.Store, name string) error) cli.ActionFunc {
	return func(c *cli.Context) error {
		verb := c.Command.Name
		if c.NArg() != 1 {
			return fmt.Errorf("secret %s: want one NAME (the value is read from standard input, never from arguments)", verb)
		}
		if err := requireRoot(verb); err != nil {
			return err
		}
		return act(c, secrets.New(c.String("dir")), c.Args().First())
	}
}

// readSecret reads the value from standard input, with echo off when it
// is a terminal.
func readSecret(c *cli.Context) ([]byte, error) {
	in := os.Stdin
	if c.App.Reader != nil && c.App.Reader != os.Stdin {
		return io.ReadAll(io.LimitReader(c.App.Reader, secrets.MaxSize+1))
	}
	if fd := int(in.Fd()); term.IsTerminal(fd) {
		fmt.Fprint(c.App.ErrWriter, "value (not echoed, end with Enter): ")
		defer fmt.Fprintln(c.App.ErrWriter)
		return term.ReadPassword(fd)
	}
	v, err := io.ReadAll(io.LimitReader(in, secrets.MaxSize+1))
	if err != nil {
		return nil, errors.New("secret set: reading standard input: " + err.Error())
	}
	return v, nil
}
