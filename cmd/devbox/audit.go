package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/devbox-dev/devbox/internal/gitaudit"
)

var auditCommand = &cli.Command{
	Name:      "audit",
	Usage:     "on the host: report git hooks and program-running git config in the workspace that nobody accepted",
	ArgsUsage: "[DIR]",
	Description: `Finds every git directory under DIR (default: the current directory): the
top-level .git, submodules under .git/modules, worktrees, nested and bare
repositories, and .git files pointing elsewhere. For each it reads the
executable hooks and the config keys that make git run a program
(core.hooksPath, core.fsmonitor, core.sshCommand, core.pager, core.editor,
filter.*, diff.*.textconv, credential.helper, include.path, includeIf.*,
alias.*, ...), in config and config.worktree and the files they include.

It compares them with the state last accepted for DIR, kept outside the
workspace in $XDG_STATE_HOME/devbox/audit (default ~/.local/state/devbox/audit),
and fails listing everything new or changed: path, key or hook, first lines.
The dev container's initializeCommand runs it before every start, so a hook
or fsmonitor written inside the container stops the next start instead of
running on the host. After reviewing, --accept records the current state.

The audit reads files only: it never runs git or anything it inspects.`,
	Flags: []cli.Flag{
		&cli.BoolFlag{Name: "accept", Usage: "record the current state as reviewed (prints what it accepts)"},
		&cli.BoolFlag{Name: "json", Usage: "print the comparison as JSON"},
		&cli.StringFlag{Name: "state-dir", Usage: "where accepted states are kept `DIR` (default: $XDG_STATE_HOME/devbox/audit)"},
	},
	Action: func(c *cli.Context) error {
		if c.NArg() > 1 {
			return errors.New("audit: at most one DIR argument")
		}
		root := "."
		if c.NArg() == 1 {
			root = c.Args().First()
		}
		r, d, path, err := gitaudit.Audit(root, c.String("state-dir"))
		if err != nil {
			return fmt.Errorf("audit: %w", err)
		}
		if c.Bool("json") {
			enc := json.NewEncoder(c.App.Writer)
			enc.SetIndent("", "  ")
			if err := enc.Encode(d); err != nil {
				return err
			}
		} else if !c.Bool("accept") || !d.OK() {
			if err := d.WriteText(c.App.Writer); err != nil {
				return err
			}
		}
		if c.Bool("accept") {
			if err := r.State(time.Now()).Save(path); err != nil {
				return fmt.Errorf("audit --accept: %w", err)
			}
			if !c.Bool("json") {
				fmt.Fprintf(c.App.Writer, "devbox audit: accepted %d entries for %s (%s)\n", len(r.Findings), r.Root, path)
			}
			return nil
		}
		if !d.OK() {
			return cli.Exit("", 1)
		}
		return nil
	},
}
