// Package entrypoint is the container start-up sequence (`devbox
// entrypoint`): as root, on every start, it installs the fence (rules, DNS
// filter, self-test), records the outcome where `devbox doctor` and the
// login banner read it, and then either returns (the Dev Containers CLI's
// label entrypoint goes on to `exec "$@"`) or drops to the policy's user and
// execs the container's command (plain `docker run IMAGE`).
//
// It fails closed: on any error the firewall is left denying everything,
// the reason goes to stderr and to the status file, and the exit status is
// non-zero. The Dev Containers CLI runs label entrypoints without `set -e`,
// so the exit status alone would be ignored; deny-all is what makes a
// failure safe, the status file is what makes it visible.
package entrypoint

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/devbox-dev/devbox/internal/fence"
)

// Fence is the fence as the entrypoint installs it (*fence.Fence): its
// steps in order, and the deny-all the entrypoint falls back to after any
// failure. Every step must succeed when run again on a container that is
// already fenced (the entrypoint is re-run by hand, or the container
// restarts).
type Fence interface {
	Steps() []fence.Step
	DenyAll(ctx context.Context) error
}

// Options configure Run.
type Options struct {
	Fence Fence
	// StatusPath is where the outcome is recorded (default StatusPath).
	StatusPath string
	// Policy, User and StartID are recorded in the status for doctor.
	Policy  string
	User    string
	StartID string
	// Stdout gets the one-line summary, Stderr the loud failure.
	Stdout, Stderr io.Writer
	// Start is when the entrypoint process started (default: now). The
	// elapsed time printed is measured from it.
	Start time.Time
	// Now is the clock (tests replace it).
	Now func() time.Time
}

// Run installs the fence and records the outcome. The error, when not nil,
// has already been printed on Stderr and written to the status file.
func Run(ctx context.Context, o Options) (Status, error) {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Start.IsZero() {
		o.Start = o.Now()
	}
	if o.StatusPath == "" {
		o.StatusPath = StatusPath
	}
	if o.Stdout == nil {
		o.Stdout = io.Discard
	}
	if o.Stderr == nil {
		o.Stderr = io.Discard
	}
	st := Status{State: Starting, Policy: o.Policy, User: o.User, StartID: o.StartID}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	st.Time = o.Now()
	if err := WriteStatus(o.StatusPath, st); err != nil {
		// Not being able to record the state is itself a failure: doctor
		// would read a stale "fenced" from the previous start.
		return st, fail(ctx, o, &st, ms, fmt.Errorf("record status: %w", err))
	}

	var summaries []string
	for _, s := range o.Fence.Steps() {
		t0 := o.Now()
		summary, err := s.Run(ctx)
		step := Step{Name: s.Name, ElapsedMS: ms(o.Now().Sub(t0))}
		if err != nil {
			step.Error = err.Error()
		}
		st.Steps = append(st.Steps, step)
		if err != nil {
			return st, fail(ctx, o, &st, ms, fmt.Errorf("%s: %w", s.Name, err))
		}
		if summary != "" {
			summaries = append(summaries, summary)
		}
	}
	st.State = Fenced
	st.Time = o.Now()
	st.ElapsedMS = ms(st.Time.Sub(o.Start))
	if err := WriteStatus(o.StatusPath, st); err != nil {
		return st, fail(ctx, o, &st, ms, fmt.Errorf("record status: %w", err))
	}
	line := fmt.Sprintf("devbox: fenced and verified in %.1f ms (%s)", st.ElapsedMS, stepTimes(st.Steps))
	if len(summaries) > 0 {
		line += "; " + strings.Join(summaries, "; ")
	}
	fmt.Fprintln(o.Stdout, line)
	return st, nil
}

// fail puts the firewall in deny-all, records why and says it loudly.
func fail(ctx context.Context, o Options, st *Status, ms func(time.Duration) float64, cause error) error {
	err := cause
	// A cancelled context must not stop the fallback to deny-all.
	if derr := o.Fence.DenyAll(context.WithoutCancel(ctx)); derr != nil {
		err = errors.Join(cause, fmt.Errorf("deny-all fallback also failed: %w", derr))
	}
	st.State = Failed
	st.Reason = err.Error()
	st.Time = o.Now()
	st.ElapsedMS = ms(st.Time.Sub(o.Start))
	werr := WriteStatus(o.StatusPath, *st)
	fmt.Fprintf(o.Stderr, "\n%s\n", banner(st.Reason, werr))
	if werr != nil {
		err = errors.Join(err, werr)
	}
	return err
}

// banner is the failure message: it must stand out in the Dev Containers
// CLI's scrolling log, where a non-zero exit alone goes unnoticed.
func banner(reason string, werr error) string {
	var b strings.Builder
	b.WriteString("########################################################################\n")
	b.WriteString("# devbox: THE FENCE IS NOT UP. Egress is denied entirely (fail closed). #\n")
	b.WriteString("########################################################################\n")
	fmt.Fprintf(&b, "reason: %s\n", reason)
	if werr != nil {
		fmt.Fprintf(&b, "could not record this in %s: %v\n", StatusPath, werr)
	}
	b.WriteString("run `devbox doctor` in the container for details; fix the cause and restart the container.")
	return b.String()
}

func stepTimes(steps []Step) string {
	parts := make([]string, len(steps))
	for i, s := range steps {
		parts[i] = fmt.Sprintf("%s %.1f ms", s.Name, s.ElapsedMS)
	}
	return strings.Join(parts, ", ")
}
