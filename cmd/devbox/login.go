package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/urfave/cli/v2"

	"github.com/devbox-dev/devbox/internal/setuptoken"
	"github.com/devbox-dev/devbox/internal/workspace"
)

// setupTokenScript runs `claude setup-token` ($0) as root with a throwaway
// HOME and CLAUDE_CONFIG_DIR: a directory only root can enter, removed
// when the sign-in ends however it ends, so nothing it writes is left
// where the agent could read it. It also runs there, not in the
// workspace: Claude Code reads project settings (.claude/settings.json,
// hooks, .mcp.json) from its working directory, and the agent writes the
// workspace, so a root process must not start in it.
const setupTokenScript = `umask 077; d=$(mktemp -d /root/.devbox-login.XXXXXX 2>/dev/null || mktemp -d) || exit 1; ` +
	`trap 'rm -rf "$d"' EXIT; trap 'exit 129' HUP INT TERM; cd "$d" || exit 1; ` +
	`HOME="$d" CLAUDE_CONFIG_DIR="$d" "$0" setup-token`

var loginCommand = &cli.Command{
	Name:  "login",
	Usage: "on the host: store your Claude credential in the dev container, where Claude Code uses it through the credential gateway and the agent cannot read it",
	Description: `devbox login finds this repository's running dev container (devbox up starts
it) and stores the secret the policy's credentials.anthropic names (default
"anthropic"), as devbox secret set does.

Without flags it reads an Anthropic API key (sk-ant-api…) or a token from
"claude setup-token" (sk-ant-oat…) from standard input, with echo off on a
terminal; never from the command line.

With --setup-token it runs Claude Code's own "claude setup-token" inside the
container as root, with a throwaway HOME that only root can read, on a
terminal of its own: you see the sign-in URL, open it, and paste the code
back. The token it prints is taken from its output straight into the store:
the screen shows "` + setuptoken.Shown + `" in its place, and it is written to
no file and no shell history.`,
	Flags: append([]cli.Flag{
		&cli.BoolFlag{Name: "setup-token", Usage: "sign in with Claude Code's setup-token flow inside the container (a Claude subscription)"},
		&cli.StringFlag{Name: "claude-path", Value: "claude", Usage: "Claude Code's `PATH` in the container", Hidden: true},
	}, hostFlags...),
	Action: func(c *cli.Context) error {
		if c.NArg() != 0 {
			return errors.New("login: no arguments (the credential is read from standard input, never from the command line)")
		}
		if inContainer() {
			return errors.New("login: run devbox login on the host, in the repository: inside the container the agent's terminal would see the credential")
		}
		p, err := workspacePolicy(c)
		if err != nil {
			return fmt.Errorf("login: %w", err)
		}
		a := p.Credentials.Anthropic
		if a == nil {
			return fmt.Errorf("login: %s has no credentials.anthropic, so Claude Code would hold its own credential where the agent can read it; "+
				`add "credentials": {"anthropic": {"secret": "anthropic"}} to it, rebuild (devbox up), and run devbox login again (docs/credentials.md)`, p.Path)
		}
		docker, ct, err := findWorkspace(c)
		if err != nil {
			return fmt.Errorf("login: %w", err)
		}
		var value []byte
		if c.Bool("setup-token") {
			fmt.Fprintf(c.App.ErrWriter, "devbox: running claude setup-token in %s as root; its token goes into the secret %s, not to this screen\n", ct.Name, a.Secret)
			args := ct.ExecArgs(workspace.ExecOptions{User: "root", Stdin: true, TTY: true}, "sh", "-c", setupTokenScript, c.String("claude-path"))
			tok, err := setuptoken.Run(c.Context, setuptoken.Options{
				Command: append([]string{docker}, args...),
				In:      appReader(c),
				Out:     c.App.Writer,
			})
			if err != nil {
				return fmt.Errorf("login: %w", err)
			}
			value = []byte(tok)
		} else {
			value, err = readSecret(c, fmt.Sprintf("Anthropic API key (sk-ant-api…) or token from `claude setup-token` (sk-ant-oat…) for %s (not echoed, end with Enter): ", ct.Name))
			if err != nil {
				return err
			}
			if v := bytes.TrimSpace(value); len(v) > 0 && !bytes.HasPrefix(v, []byte("sk-ant-")) {
				fmt.Fprintln(c.App.ErrWriter, "devbox: warning: the value does not start with sk-ant-: Anthropic's keys and tokens do; storing it anyway")
			}
		}
		if err := storeSecret(c, docker, ct, a.Secret, value); err != nil {
			return fmt.Errorf("login: %w", err)
		}
		fmt.Fprintf(c.App.Writer, "Claude Code in %s now signs in through the credential gateway; the agent cannot read the secret. Next: devbox claude\n", ct.Name)
		return nil
	},
}

// appReader is the app's standard input (tests set App.Reader).
func appReader(c *cli.Context) io.Reader {
	if c.App.Reader != nil {
		return c.App.Reader
	}
	return os.Stdin
}
