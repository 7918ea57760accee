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
exist at launch at any depth of the workspace. The run ends with an audit of
those dangerous paths (nested .git/hooks and .git/config, .mcp.json, shell rc
files, .claude/*, ...): any created or changed during the run is printed and
devbox exits non-zero (1, or the command's own non-zero status) unless
--accept-new-paths is given. Otherwise the command's exit status is devbox's.

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
	p, err := runPolicy(c.String("policy"))
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
			fmt.Fprintf(c.App.ErrWriter, "devbox run: WEAKER SANDBOX: no new /proc and no ban on nested user namespaces, because the full sandbox failed here (bwrap: %s). "+
				"The command sees this container's processes in /proc; files, writes and network are confined as usual. See docs/sandbox.md.\n", probe.Reason)
		}
	}
	spec, err := sandbox.Plan(cfg, sandbox.OSFS{})
	if err != nil {
		return fmt.Errorf("run: %w", err)
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
	before, err := sandbox.TakeSnapshot(ws)
	if err != nil {
		return fmt.Errorf("run: %w", err)
	}
	code, err := sandbox.Run(c.Context, bwrap, spec, sandbox.Stdio{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr})
	if err != nil {
		return fmt.Errorf("run: %w", err)
	}
	after, err := sandbox.TakeSnapshot(ws)
	if err != nil {
		return cli.Exit(fmt.Sprintf("devbox run: %v", err), max(code, 1))
	}
	if changes := before.Changes(after); len(changes) > 0 {
		for _, ch := range changes {
			fmt.Fprintf(c.App.ErrWriter, "devbox run: AUDIT: %s during the run (something may run it later, outside the sandbox)\n", ch)
		}
		if !c.Bool("accept-new-paths") {
			return cli.Exit(fmt.Sprintf("devbox run: %d dangerous path(s) created or changed during the run; review them, or pass --accept-new-paths", len(changes)), max(code, 1))
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
// container the one in force (baseline.Applied: what the entrypoint
// resolved and fenced with, a mounted repository policy's narrowing
// included), which the agent cannot edit; else the repository's
// (policy.Find); else the defaults.
func runPolicy(flag string) (*policy.Policy, error) {
	if flag != "" {
		return policy.Load(flag)
	}
	pol, err := baseline.Applied()
	if !errors.Is(err, policy.ErrNoPolicy) {
		return pol, err
	}
	path, err := policy.Find(".")
	if errors.Is(err, policy.ErrNoPolicy) {
		return policy.Parse("(defaults)", []byte("{}"))
	}
	if err != nil {
		return nil, err
	}
	return policy.Load(path)
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
