package main

import (
	"fmt"
	"os"

	"github.com/urfave/cli/v2"

	"github.com/devbox-dev/devbox/firewall"
	"github.com/devbox-dev/devbox/internal/atomicfile"
	"github.com/devbox-dev/devbox/internal/baseline"
	"github.com/devbox-dev/devbox/internal/layout"
	"github.com/devbox-dev/devbox/internal/policy"
	"github.com/devbox-dev/devbox/internal/review"
)

var policyReviewCommand = &cli.Command{
	Name:      "review",
	Usage:     "turn the firewall's log of blocked attempts into a narrow policy change, with evidence",
	ArgsUsage: "[FILE]",
	Description: `Reads the firewall log (blocked packets, refused names, dropped answers, the
name gate's refusals) and the DNS filter's hit counters, and prints:
  1. denied attempts grouped by name (or address), port and uid, with counts
     and first/last seen;
  2. allowed entries no query used in the window;
  3. the proposed change to FILE (default: .devcontainer/devbox.policy.jsonc,
     then devbox.policy.jsonc) as a diff: exact names with the ports they
     were tried on (443 when only a DNS query was seen), each after a comment
     with its evidence. Denied names, dropped answers, the gate's mismatches
     and bare addresses are never proposed, nor anything beyond the
     baseline (found as for validate).
--apply writes the change into FILE, keeping its comments and layout, and
checks that the result validates (and stays within the baseline).`,
	Flags: []cli.Flag{
		&cli.DurationFlag{Name: "since", Usage: "review the last `DUR` only (e.g. 24h; default: the whole log)"},
		&cli.StringFlag{Name: "log", Value: layout.LogPath, Usage: "firewall log `FILE` (JSON lines; FILE.1, the rotated part, is read too)"},
		&cli.StringFlag{Name: "state-dir", Value: firewall.DefaultStateDir, Usage: "the DNS filter's state `DIR`, holding " + firewall.HitsFile},
		&cli.BoolFlag{Name: "wildcards", Usage: "fold two or more names under one parent domain into *.PARENT:PORT"},
		&cli.BoolFlag{Name: "apply", Usage: "write the proposed change into FILE"},
		baselineFlag, noImageBaselineFlag,
	},
	Action: func(c *cli.Context) error {
		file, err := policyFileArg(c, "policy review")
		if err != nil {
			return err
		}
		src, err := os.ReadFile(file)
		if err != nil {
			return fmt.Errorf("policy review: %w", err)
		}
		ex, err := policy.Explain(file, src)
		if err != nil {
			return fmt.Errorf("policy review: %w", err)
		}
		base, baseName, err := findBaseline(c)
		if err != nil {
			return fmt.Errorf("policy review: %w", err)
		}
		events, err := firewall.ReadLog(c.String("log"))
		if err != nil {
			return fmt.Errorf("policy review: %w", err)
		}
		var hits *firewall.Hits
		if h, err := firewall.ReadHits(c.String("state-dir")); err == nil {
			hits = &h
		} else {
			fmt.Fprintf(c.App.ErrWriter, "devbox: policy review: no hit counters (%v): unused names cannot be measured\n", err)
		}
		r := review.Review(events, hits, ex, base, review.Options{Since: c.Duration("since"), Wildcards: c.Bool("wildcards")})
		patched, err := review.Apply(src, r.Add)
		if err != nil {
			return fmt.Errorf("policy review: %w", err)
		}
		if err := r.WriteText(c.App.Writer, review.Diff(file, src, patched)); err != nil {
			return err
		}
		if !c.Bool("apply") || len(r.Add) == 0 {
			return nil
		}
		// Never write a file that would not validate or would widen the
		// baseline.
		pex, err := policy.Explain(file, patched)
		if err == nil && base != nil {
			err = baseline.Check(base, baseName, pex)
		}
		if err != nil {
			return fmt.Errorf("policy review: the change would not validate, %s left as it was:\n%w", file, err)
		}
		if err := atomicfile.WriteFile(file, patched, 0o644); err != nil {
			return fmt.Errorf("policy review: %w", err)
		}
		fmt.Fprintf(c.App.Writer, "\nwrote %d new allow entries to %s\n", len(r.Add), file)
		return nil
	},
}
