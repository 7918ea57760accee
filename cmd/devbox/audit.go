package main

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/devbox-dev/devbox/internal/gitaudit"
)

var auditCommand = &cli.Command{
	Name:      "audit",
	Usage:     "on the host: report what in the workspace's git directories could make git run a program, and the files other tools run, that nobody accepted",
	ArgsUsage: "[DIR]",
	Description: `Finds every directory under DIR (default: the current directory) git could use
as a git directory: any .git entry, any directory with a HEAD entry beside
objects and refs (or a commondir), .git/modules/**, .git/worktrees/*, and what
gitfiles and commondir files point to (read whole, as git reads them).

In each, everything but a short list of pure data (objects, refs and HEAD with
valid content, logs, index, messages) is a finding with its SHA-256: hooks (and
the directory an accepted core.hooksPath names) digested whole, rebase and
sequencer state, any other file or link. Config files are read by git itself
(git config --list --null on the file's bytes, outside any repository, running
nothing); every entry but a short allow-list (user.name/email, branch.*.remote/
merge, remote.*.url with an https/ssh/local URL, remote.*.fetch, core format
flags, ...) is a finding, shown with git's own key. Includes are followed.

The files other host tools run or obey are findings too, at any depth outside
node_modules: .vscode/, .claude/, .mcp.json, .envrc, .cursor/, .gemini/,
.idea/, .husky/, lefthook.yml, .pre-commit-config.yaml, shell start-up files
(not the root's .devcontainer, a read-only mount devbox init rewrites, and not
empty files).

It compares them with the state last accepted for DIR, kept outside the
workspace in $XDG_STATE_HOME/devbox/audit (default ~/.local/state/devbox/audit),
and fails listing everything new or changed. The dev container's
initializeCommand runs it before every start, so a hook, an fsmonitor or a
VS Code task written inside the container stops the next start instead of
running on the host.
After reviewing, --accept records the current state. See docs/git.md.`,
	Flags: []cli.Flag{
		&cli.BoolFlag{Name: "accept", Usage: "record the current state as reviewed (prints what it accepts)"},
		&cli.BoolFlag{Name: "json", Usage: "print the comparison as JSON"},
		&cli.StringFlag{Name: "state-dir", Usage: "where accepted states are kept `DIR` (default: $XDG_STATE_HOME/devbox/audit)"},
	},
	Action: func(c *cli.Context) error {
		root, err := dirArg(c, "audit")
		if err != nil {
			return err
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
