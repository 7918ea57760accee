package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"text/tabwriter"

	"github.com/urfave/cli/v2"
	"golang.org/x/term"

	"github.com/devbox-dev/devbox/internal/layout"
	"github.com/devbox-dev/devbox/internal/secrets"
	"github.com/devbox-dev/devbox/internal/workspace"
)

var secretDirFlag = &cli.StringFlag{
	Name:    "dir",
	EnvVars: []string{secrets.DirEnv},
	Value:   secrets.Dir(),
	Usage:   "secrets `DIR` (readable by root and the gateway's account only)",
}

var secretCommand = &cli.Command{
	Name:  "secret",
	Usage: "store the credentials the credential gateway injects (on the host, or as root in the container)",
	Description: `Secrets are named by the policy's credentials section and stored in the dev
container, where only root and the gateway's account (devbox-gateway, uid
996) can read them. The agent's user can neither read nor list them.

On the host, in the repository, devbox finds the running dev container the
Dev Containers CLI started for it (docker or podman) and runs the command
there as root:

   devbox secret set github      # paste the value, Enter (not echoed)
   devbox secret set github < token.txt
   devbox secret list            # name, size, fingerprint; never the value

The value is read from standard input, never from the command line. Inside
the container (where /etc/devbox/policy.json exists), or when --dir or
DEVBOX_SECRETS_DIR names the store, the command works on the store directly
and must run as root.`,
	Subcommands: []*cli.Command{
		{
			Name:      "set",
			Usage:     "store the value on standard input as NAME",
			ArgsUsage: "NAME",
			Flags:     append([]cli.Flag{secretDirFlag}, hostFlags...),
			Action: withSecretName(func(c *cli.Context, s secrets.Store, name string) error {
				v, err := readSecret(c, "value (not echoed, end with Enter): ")
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
			Flags: append([]cli.Flag{secretDirFlag}, hostFlags...),
			Action: func(c *cli.Context) error {
				if !onStore(c) {
					return hostSecret(c, "list", "")
				}
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
			Flags:     append([]cli.Flag{secretDirFlag}, hostFlags...),
			Action: withSecretName(func(_ *cli.Context, s secrets.Store, name string) error {
				return s.Remove(name)
			}),
		},
	},
}

func requireRoot(verb string) error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("secret %s: must run as root (secrets are not readable by the agent's user); on the host, in the repository: devbox secret %s", verb, verb)
	}
	return nil
}

// withSecretName checks what every NAME subcommand needs (one argument)
// and then, inside the container, runs act as root on the store named by
// --dir; on the host it runs the same command in the workspace's
// container (hostSecret).
func withSecretName(act func(c *cli.Context, s secrets.Store, name string) error) cli.ActionFunc {
	return func(c *cli.Context) error {
		verb := c.Command.Name
		if c.NArg() != 1 {
			return fmt.Errorf("secret %s: want one NAME (the value is read from standard input, never from arguments)", verb)
		}
		if !onStore(c) {
			return hostSecret(c, verb, c.Args().First())
		}
		if err := requireRoot(verb); err != nil {
			return err
		}
		return act(c, secrets.New(c.String("dir")), c.Args().First())
	}
}

// hostSecret runs `devbox secret VERB [NAME]` as root in the workspace's
// dev container. For set, the name must be one the workspace's policy
// uses, and the value is read here (echo off on a terminal) and piped to
// the container's standard input: it is never an argument of any command.
func hostSecret(c *cli.Context, verb, name string) error {
	if verb == "set" {
		p, err := workspacePolicy(c)
		if err != nil {
			return fmt.Errorf("secret set: %w", err)
		}
		if err := workspace.CheckSecret(p, name); err != nil {
			return fmt.Errorf("secret set: %w", err)
		}
	}
	docker, ct, err := findWorkspace(c)
	if err != nil {
		return fmt.Errorf("secret %s: %w", verb, err)
	}
	if verb != "set" {
		argv := []string{layout.BinaryPath, "secret", verb}
		if name != "" {
			argv = append(argv, name)
		}
		return inWorkspace(c, docker, ct.ExecArgs(workspace.ExecOptions{User: "root"}, argv...), nil)
	}
	v, err := readSecret(c, fmt.Sprintf("value of %s for %s (not echoed, end with Enter): ", name, ct.Name))
	if err != nil {
		return err
	}
	return storeSecret(c, docker, ct, name, v)
}

// storeSecret pipes value to `devbox secret set NAME`, run as root in ct.
func storeSecret(c *cli.Context, docker string, ct workspace.Container, name string, value []byte) error {
	v, err := secrets.CheckValue(value)
	if err != nil {
		return fmt.Errorf("secret set %s: %w", name, err)
	}
	args := ct.ExecArgs(workspace.ExecOptions{User: "root", Stdin: true}, layout.BinaryPath, "secret", "set", name)
	return inWorkspace(c, docker, args, bytes.NewReader(v))
}

// readSecret reads the value from standard input, with echo off when it
// is a terminal.
func readSecret(c *cli.Context, prompt string) ([]byte, error) {
	in := os.Stdin
	if c.App.Reader != nil && c.App.Reader != os.Stdin {
		return io.ReadAll(io.LimitReader(c.App.Reader, secrets.MaxSize+1))
	}
	if fd := int(in.Fd()); term.IsTerminal(fd) {
		fmt.Fprint(c.App.ErrWriter, prompt)
		defer fmt.Fprintln(c.App.ErrWriter)
		return term.ReadPassword(fd)
	}
	v, err := io.ReadAll(io.LimitReader(in, secrets.MaxSize+1))
	if err != nil {
		return nil, errors.New("secret set: reading standard input: " + err.Error())
	}
	return v, nil
}

// onStore reports whether a secret command works on the store here rather
// than in the workspace's container: inside a devbox container, or when the
// store is named (--dir or DEVBOX_SECRETS_DIR, as a container whose secrets
// come from a mounted directory, or a test's own store, has).
func onStore(c *cli.Context) bool {
	return inContainer() || c.IsSet(secretDirFlag.Name)
}
