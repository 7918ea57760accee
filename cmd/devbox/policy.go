package main

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/devbox-dev/devbox/internal/baseline"
	"github.com/devbox-dev/devbox/internal/policy"
)

var policyCommand = &cli.Command{
	Name:  "policy",
	Usage: "check a sandbox policy and show what it allows",
	Subcommands: []*cli.Command{
		policyValidateCommand,
		policyExplainCommand,
		policyReviewCommand,
	},
}

// findPolicy returns the policy a command given no FILE reads:
// policy.Find in the current directory.
func findPolicy() (string, error) {
	p, err := policy.Find(".")
	if err != nil {
		return "", fmt.Errorf("%w; run `devbox init` or give a FILE", err)
	}
	return p, nil
}

// policyFileArg is cmd's one optional FILE argument, else the repository's
// policy (findPolicy); cmd ("policy explain") begins its errors.
func policyFileArg(c *cli.Context, cmd string) (string, error) {
	if c.NArg() > 1 {
		return "", fmt.Errorf("%s: at most one FILE", cmd)
	}
	if file := c.Args().First(); file != "" {
		return file, nil
	}
	file, err := findPolicy()
	if err != nil {
		return "", fmt.Errorf("%s: %w", cmd, err)
	}
	return file, nil
}

var policyValidateCommand = &cli.Command{
	Name:      "validate",
	Usage:     "check policy files; print every problem as FILE:LINE:COL",
	ArgsUsage: "[FILE...]",
	Description: `Checks each FILE (default: .devcontainer/devbox.policy.jsonc, then
devbox.policy.jsonc) and prints "FILE: ok", or every problem found, one per
line as FILE:LINE:COL: KEY.PATH: MESSAGE. The exit status is 0 only when
every file is valid.

On a team image each FILE must also only narrow the team's baseline (see
docs/policy.md): every widening is printed as FILE:LINE:COL with the
baseline entry it exceeds. The baseline is --baseline FILE, else the one in
the "dev.devbox.baseline" label of the image that
.devcontainer/devcontainer.json names (read from its registry; only the
config is fetched), else there is none.`,
	Flags: []cli.Flag{baselineFlag, noImageBaselineFlag},
	Action: func(c *cli.Context) error {
		files := c.Args().Slice()
		if len(files) == 0 {
			f, err := findPolicy()
			if err != nil {
				return fmt.Errorf("policy validate: %w", err)
			}
			files = []string{f}
		}
		base, baseName, err := findBaseline(c)
		if err != nil {
			return fmt.Errorf("policy validate: %w", err)
		}
		bad := 0
		for _, f := range files {
			ex, err := policy.ExplainFile(f)
			if err == nil && base != nil {
				err = baseline.Check(base, baseName, ex)
			}
			if err != nil {
				bad++
				fmt.Fprintln(c.App.ErrWriter, err)
				continue
			}
			if base != nil {
				fmt.Fprintf(c.App.Writer, "%s: ok (within baseline %s)\n", f, baseName)
				continue
			}
			fmt.Fprintf(c.App.Writer, "%s: ok\n", f)
		}
		if bad > 0 {
			return fmt.Errorf("policy validate: %d of %d files did not validate", bad, len(files))
		}
		return nil
	},
}

var policyExplainCommand = &cli.Command{
	Name:      "explain",
	Usage:     "print the effective policy: presets expanded, what is allowed, denied, written, and the defaults used",
	ArgsUsage: "[FILE]",
	Description: `Prints the policy as the firewall and the sandbox will apply it: presets
expanded into destinations (each with where it came from), denied
destinations and the allow entries they removed, the sandbox paths and the
defaults that filled in missing keys. An empty allow list is shown as NO
NETWORK. With --json the same facts are printed as stable JSON, including
the normalized policy baked into images.

With a baseline (--baseline FILE, or the label of the image
.devcontainer/devcontainer.json names, as for validate) it prints the
effective policy, baseline ∩ repository: each allowed destination with the
repository line that writes it and the baseline entry it lies within, each
deny with who denies it, the baseline entries the repository narrowed away,
and every widening (with one, the entrypoint refuses to fence).`,
	Flags: []cli.Flag{
		&cli.BoolFlag{Name: "json", Usage: "print JSON instead of text"},
		baselineFlag, noImageBaselineFlag,
	},
	Action: func(c *cli.Context) error {
		file, err := policyFileArg(c, "policy explain")
		if err != nil {
			return err
		}
		base, baseName, err := findBaseline(c)
		if err != nil {
			return fmt.Errorf("policy explain: %w", err)
		}
		ex, err := policy.ExplainFile(file)
		if err == nil && base != nil {
			l := baseline.Explain(base, baseName, ex)
			if c.Bool("json") {
				return writeJSON(c, l)
			}
			return l.WriteText(c.App.Writer)
		}
		if err != nil {
			var errs *policy.Errors
			if errors.As(err, &errs) {
				fmt.Fprintln(c.App.ErrWriter, err)
				return fmt.Errorf("policy explain: %s did not validate", file)
			}
			return fmt.Errorf("policy explain: %w", err)
		}
		if c.Bool("json") {
			return writeJSON(c, ex)
		}
		return ex.WriteText(c.App.Writer)
	},
}

func writeJSON(c *cli.Context, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("policy explain: %w", err)
	}
	_, err = fmt.Fprintf(c.App.Writer, "%s\n", b)
	return err
}
