package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/devbox-dev/devbox/internal/baseline"
	"github.com/devbox-dev/devbox/internal/layout"
	"github.com/devbox-dev/devbox/internal/policy"
	"github.com/devbox-dev/devbox/internal/sandbox"
)

var runCommand = &cli.Command{
	Name:      "run",
	Usage:     "run a command in the per-command bubblewrap sandbox",
	ArgsUsage: "[flags] -- COMMAND [ARG...]",
	Description: `Runs COMMAND with the filesystem read-only except the workspace, /tmp and the
policy's sandbox.allowWrite; the policy's sandbox.denyRead hidden; and a mandatory
list of files that run later (shell start-up files, .git/hooks, .git/config,
.mcp.json, .claude/commands, .vscode, ...) read-only whatever the policy says,
including those that do not exist yet at the workspace root, and those that
exist at launch at any depth of the workspace. The run ends with an audit
(the host audit's model: every git directory and what in it is not pure data,
config keys off the allow-list, plus shell rc files, .envrc, .mcp.json,
.claude/, .vscode/, hook runners, Python's .pth files, ...; and what the
sandbox leaves writable of PATH and of the home's run-later places:
~/.bash_aliases, npx's cache, the user site, what ~/.gitconfig includes,
...) against the last completed audit's
state (~/.local/state/devbox/run): anything new or changed is printed and
devbox exits non-zero (1, or the command's own non-zero status) unless
--accept-new-paths is given. Otherwise the command's exit status is devbox's.
A policy file the sandbox could write is refused.

The policy is --policy, else the policy in force inside a devbox container
(` + layout.AppliedPolicyPath + `, which the entrypoint records: the repository's own
policy when one is mounted and narrows the image's baseline; else ` + layout.PolicyPath + `), else ./.devcontainer/` + policy.DefaultFileName + ` or
./` + policy.DefaultFileName + ` (the first that exists, as for every command), else the defaults.`,
	Flags: []cli.Flag{
		&cli.StringFlag{Name: "policy", Usage: "policy file (see above for the default)"},
		&cli.StringFlag{Name: "workspace", Usage: "writable workspace (default: the current directory)"},
		&cli.BoolFlag{Name: "no-network", Usage: "no network at all: only a private loopback"},
		&cli.StringFlag{Name: "bwrap", Value: "bwrap", Usage: "bubblewrap binary"},
		&cli.BoolFlag{Name: "accept-new-paths", Usage: "report dangerous paths created or changed during the run, but do not fail because of them"},
		&cli.BoolFlag{Name: "explain", Usage: "print the bwrap command line and what was left out, and run nothing"},
		&cli.BoolFlag{Name: "print-seccomp", Usage: "print the seccomp profile a container needs for bubblewrap (--security-opt seccomp=FILE) and exit"},
		&cli.BoolFlag{Name: "print-claude-settings", Usage: "print Claude Code's managed settings for the policy and exit"},
	},
	Action: runAction,
}

func runAction(c *cli.Context) error {
	if c.Bool("print-seccomp") {
		_, err := c.App.Writer.Write(sandbox.SeccompProfile)
		return err
	}
	p, polPath, err := runPolicy(c.String("policy"))
	if err != nil {
		return err
	}
	if c.Bool("print-claude-settings") {
		b, err := sandbox.ClaudeManagedSettings(p)
		if err != nil {
			return err
		}
		_, err = c.App.Writer.Write(b)
		return err
	}
	if c.NArg() == 0 {
		return errors.New("run: no command given: devbox run [flags] -- COMMAND [ARG...]")
	}
	if os.Getenv(sandbox.SandboxEnv) != "" {
		// bwrap cannot nest under --disable-userns, and a second layer
		// would add nothing.
		return fmt.Errorf("run: already inside a devbox sandbox (%s is set)", sandbox.SandboxEnv)
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return fmt.Errorf("run: %w (set HOME)", err)
	}
	cwd, err := os.Getwd()
	if err != nil {
		return fmt.Errorf("run: %w", err)
	}
	ws := cwd
	if w := c.String("workspace"); w != "" {
		if ws, err = filepath.Abs(w); err != nil {
			return fmt.Errorf("run: --workspace: %w", err)
		}
	}
	cfg := sandbox.ConfigFromPolicy(p.Sandbox, home, ws, c.Args().Slice())
	cfg.NoNetwork = c.Bool("no-network")
	if cwd == ws || strings.HasPrefix(cwd, ws+"/") {
		cfg.Dir = cwd
	}

	bwrap := c.String("bwrap")
	if !c.Bool("explain") {
		probe, err := sandbox.Probe(c.Context, bwrap)
		if err != nil {
			return fmt.Errorf("run: %w", err)
		}
		if probe.Weaker {
			cfg.Weaker = true
			fmt.Fprintf(c.App.ErrWriter, "devbox run: WEAKER SANDBOX: no new /proc and no bwrap --disable-userns, because the full sandbox failed here (bwrap: %s). "+
				"The command sees this container's processes in /proc; files, writes and network are confined as usual, and devbox's seccomp filter still refuses nested user namespaces. See docs/sandbox.md.\n", probe.Reason)
		}
	}
	spec, err := sandbox.Plan(cfg, sandbox.OSFS{})
	if err != nil {
		return fmt.Errorf("run: %w", err)
	}
	if polPath != "" && spec.CanWrite(polPath) {
		return fmt.Errorf("run: the policy %s is writable inside the sandbox it sets up, so an earlier run could have written it; "+
			"devbox run reads a policy only where no sandboxed command can write: %s or %s, .devcontainer/%s at the workspace root "+
			"(read-only in every run), or a --policy file outside the workspace and allowWrite", polPath, layout.AppliedPolicyPath, layout.PolicyPath, policy.DefaultFileName)
	}
	if c.String("policy") == "" {
		if err := withinCeiling(cfg, spec); err != nil {
			return fmt.Errorf("run: %w", err)
		}
	}
	if c.Bool("explain") {
		fmt.Fprintln(c.App.Writer, bwrap+" "+shellJoin(sandbox.Args(spec)))
		for _, m := range spec.Mounts {
			if m.Placeholder != sandbox.Missing {
				fmt.Fprintf(c.App.Writer, "# placeholder (created empty before the run): %s\n", m.Path)
			}
		}
		for _, n := range spec.Notes {
			fmt.Fprintf(c.App.Writer, "# note: %s\n", n)
		}
		return nil
	}
	created, err := sandbox.Prepare(spec)
	for _, p := range created {
		fmt.Fprintf(c.App.ErrWriter, "devbox run: created empty read-only placeholder %s so that it cannot be created inside the sandbox\n", p)
	}
	if err != nil {
		return fmt.Errorf("run: %w", err)
	}
	watched, err := sandbox.WatchedBy(spec, home, os.Getenv("PATH"))
	if err != nil {
		return fmt.Errorf("run: %w", err)
	}
	audit, err := sandbox.BeginAudit(ws, home, watched)
	if err != nil {
		return fmt.Errorf("run: %w", err)
	}
	if err := audit.AcceptPlaceholders(created); err != nil {
		return fmt.Errorf("run: %w", err)
	}
	code, err := sandbox.Run(c.Context, bwrap, spec, sandbox.Stdio{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr})
	if err != nil {
		return fmt.Errorf("run: %w", err)
	}
	d, err := audit.Finish()
	if err != nil {
		return cli.Exit(fmt.Sprintf("devbox run: %v", err), max(code, 1))
	}
	if !d.OK() {
		for _, ch := range d.Changes {
			// String escapes control characters: a path cannot forge lines.
			fmt.Fprintf(c.App.ErrWriter, "devbox run: AUDIT: %s\n", ch)
		}
		if !c.Bool("accept-new-paths") {
			return cli.Exit(fmt.Sprintf("devbox run: %d dangerous path(s) created or changed since the last completed audit (%s); something may run them later, outside the sandbox: review them, or pass --accept-new-paths",
				len(d.Changes), audit.Since().Format("2006-01-02 15:04:05Z")), max(code, 1))
		}
	}
	if code != 0 {
		// An ExitCoder with no message: urfave/cli exits with the code and
		// prints nothing, so the command's status passes through untouched.
		return cli.Exit("", code)
	}
	return nil
}

// runPolicy loads the policy `devbox run` applies: inside a devbox
// container the one in force (baseline.AppliedPath: what the entrypoint
// resolved and fenced with, a mounted repository policy's narrowing
// included), which the agent cannot edit; else the repository's
// (policy.Find); else the defaults. It also returns the file it read (""
// for the defaults), which the run refuses when its own sandbox could
// write it.
func runPolicy(flag string) (*policy.Policy, string, error) {
	if flag != "" {
		pol, err := policy.Load(flag)
		return pol, flag, err
	}
	inForce, err := baseline.AppliedPath()
	if err != nil {
		return nil, "", err
	}
	if pol, err := policy.Load(inForce); !errors.Is(err, policy.ErrNoPolicy) {
		return pol, inForce, err
	}
	path, err := policy.Find(".")
	if errors.Is(err, policy.ErrNoPolicy) {
		pol, err := policy.Parse("(defaults)", []byte("{}"))
		return pol, "", err
	}
	if err != nil {
		return nil, "", err
	}
	pol, err := policy.Load(path)
	return pol, path, err
}

// withinCeiling repeats the baseline check on what this run resolves: the
// plan of the policy in force against the plan of its ceiling (the
// image's baseline, else the baked policy) for the same workspace, home
// and command. A writable path reached through a symbolic link made since
// the check, or a deny a deeper writable bind undoes, is refused here.
func withinCeiling(cfg sandbox.Config, spec sandbox.Spec) error {
	ceil, err := baseline.Ceiling()
	if err != nil || ceil == nil {
		return err
	}
	cc := cfg
	cc.AllowWrite = append([]string(nil), ceil.Sandbox.AllowWrite...)
	cc.DenyRead = append([]string(nil), ceil.Sandbox.DenyRead...)
	cc.DenyWrite = append([]string(nil), ceil.Sandbox.DenyWrite...)
	cspec, err := sandbox.Plan(cc, sandbox.OSFS{})
	if err != nil {
		return fmt.Errorf("the baseline's sandbox: %w", err)
	}
	if err := sandbox.Narrows(spec, cspec); err != nil {
		return fmt.Errorf("the policy in force is wider than the image's baseline once its paths are resolved: %w", err)
	}
	return nil
}

// shellJoin quotes args for a shell, for --explain.
func shellJoin(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		if a != "" && strings.IndexFunc(a, func(r rune) bool {
			return !(r == '/' || r == '-' || r == '.' || r == '_' || r == ',' || r == ':' || r == '=' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z')
		}) < 0 {
			q[i] = a
		} else {
			q[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
	}
	return strings.Join(q, " ")
}
