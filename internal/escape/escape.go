//go:build linux

// Package escape is devbox's escape suite: run inside a fenced container as
// the agent's user, it tries every way out the fence is meant to close
// (network, DNS, privileges, the fence's own files and daemon, the files
// the host later executes) and checks that the destinations the policy
// allows still work. It prints a table, attempt → result, and counts the
// escapes; any escape or failed allowed check makes Run's result fail.
//
// Targets come from Targets, never from built-in addresses, so the suite
// only ever talks to the test's own world.
package escape

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// Kind says what success means for a check.
type Kind int

const (
	// MustFail is an escape attempt: the fence must stop it.
	MustFail Kind = iota + 1
	// MustWork is an allowed destination: the fence must let it through.
	MustWork
)

// Outcome is what one check observed.
type Outcome string

const (
	// Blocked: an escape attempt was stopped.
	Blocked Outcome = "blocked"
	// Escaped: an escape attempt got through.
	Escaped Outcome = "ESCAPED"
	// Works: an allowed destination answered.
	Works Outcome = "works"
	// Broken: an allowed destination did not answer.
	Broken Outcome = "BROKEN"
	// Invalid: the check could not be made (bad target, missing daemon);
	// it counts as a failure, since "could not try" proves nothing.
	Invalid Outcome = "INVALID"
)

// Result is one row of the table.
type Result struct {
	Check   string  `json:"check"`
	Target  string  `json:"target"`
	Kind    Kind    `json:"-"`
	Outcome Outcome `json:"outcome"`
	Detail  string  `json:"detail"`
}

// Failed reports whether the row makes the suite fail.
func (r Result) Failed() bool { return r.Outcome != Blocked && r.Outcome != Works }

// Check is one attempt against one target.
type Check struct {
	Name   string
	Target string
	Kind   Kind
	// Run performs the attempt. For MustFail, it returns nil when the
	// attempt got through (an escape) and an error describing how it was
	// stopped otherwise; for MustWork, nil means it worked. Returning an
	// *InvalidError marks the check as not made.
	Run func(ctx context.Context) error
}

// InvalidError marks a check that could not be made.
type InvalidError struct{ Err error }

func (e *InvalidError) Error() string { return e.Err.Error() }
func (e *InvalidError) Unwrap() error { return e.Err }

func invalid(format string, args ...any) error {
	return &InvalidError{fmt.Errorf(format, args...)}
}

// escapedError lets a MustFail check return evidence of the escape with
// detail (rather than a bare nil).
type escapedError struct{ detail string }

func (e *escapedError) Error() string { return e.detail }

func escaped(format string, args ...any) error {
	return &escapedError{fmt.Sprintf(format, args...)}
}

// Report is the whole run.
type Report struct {
	Results  []Result `json:"results"`
	Attempts int      `json:"attempts"`
	Escapes  int      `json:"escapes"`
	Allowed  int      `json:"allowed"`
	Broken   int      `json:"broken"`
	Invalid  int      `json:"invalid"`
}

// OK reports whether the fence held and the allowed destinations worked.
func (r Report) OK() bool { return r.Escapes == 0 && r.Broken == 0 && r.Invalid == 0 }

// Run performs every check in order, each bounded by timeout.
func Run(ctx context.Context, checks []Check, timeout time.Duration) Report {
	var rep Report
	for _, c := range checks {
		cctx, cancel := context.WithTimeout(ctx, timeout)
		err := c.Run(cctx)
		cancel()
		res := Result{Check: c.Name, Target: c.Target, Kind: c.Kind}
		res.Outcome, res.Detail = classify(c.Kind, err)
		rep.add(res)
	}
	return rep
}

func classify(k Kind, err error) (Outcome, string) {
	if ie, ok := err.(*InvalidError); ok {
		return Invalid, ie.Error()
	}
	if ee, ok := err.(*escapedError); ok {
		if k == MustFail {
			return Escaped, ee.detail
		}
		return Works, ee.detail
	}
	switch {
	case k == MustFail && err == nil:
		return Escaped, "succeeded"
	case k == MustFail:
		return Blocked, err.Error()
	case err == nil:
		return Works, "ok"
	default:
		return Broken, err.Error()
	}
}

func (r *Report) add(res Result) {
	r.Results = append(r.Results, res)
	switch res.Kind {
	case MustFail:
		r.Attempts++
	case MustWork:
		r.Allowed++
	}
	switch res.Outcome {
	case Escaped:
		r.Escapes++
	case Broken:
		r.Broken++
	case Invalid:
		r.Invalid++
	}
}

// Summary is the last line: "N attempts, M escapes; K allowed checks, L broken".
func (r Report) Summary() string {
	s := fmt.Sprintf("%d attempts, %d escapes; %d allowed checks, %d broken", r.Attempts, r.Escapes, r.Allowed, r.Broken)
	if r.Invalid > 0 {
		s += fmt.Sprintf("; %d checks could not be made", r.Invalid)
	}
	return s
}

// WriteTable prints the report as an aligned table and the summary line.
func (r Report) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CHECK\tTARGET\tRESULT\tDETAIL")
	for _, res := range r.Results {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", res.Check, res.Target, res.Outcome, oneLine(res.Detail))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintln(w, r.Summary())
	return err
}

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 120 {
		s = s[:117] + "..."
	}
	return s
}
