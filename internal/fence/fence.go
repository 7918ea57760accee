// Package fence installs devbox's egress fence in the current network
// namespace, as one list of steps run in order: load the firewall's rules
// and sets, start the DNS filter (and warm the allowed names), start the
// name gate, and, for the entrypoint, prove the fence from inside. `devbox entrypoint` and `devbox
// firewall apply` both run this list.
//
// It fails closed: when a step fails, the steps after it do not run and the
// namespace is put in deny-all. A daemon that joins the fence (the name
// gate, the credential gateway) adds its start to Steps, after "dns" and
// before "verify", as one more Step.
package fence

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/devbox-dev/devbox/firewall"
	"github.com/devbox-dev/devbox/internal/gateway"
	"github.com/devbox-dev/devbox/internal/layout"
)

// Step is one stage of installing the fence.
type Step struct {
	// Name is short and stable: it is recorded in the entrypoint's status
	// and printed with the step's time ("apply", "dns", "verify").
	Name string
	// Run does the step. The summary ("" for none) says what it did, in a
	// few words for the log line.
	Run func(ctx context.Context) (summary string, err error)
}

// Options say which fence to install.
type Options struct {
	// Config is the firewall's config, from the policy (fwpolicy.Config).
	Config firewall.Config
	// LoadErr is why the config could not be read. The first step then
	// fails with it, so the namespace ends in deny-all.
	LoadErr error
	// Self is the devbox binary the daemons run as (default: this
	// executable, else layout.BinaryPath).
	Self string
	// NoDNS loads the rules and sets only: no DNS filter (`firewall apply
	// --no-dns`).
	NoDNS bool
	// Verify, when set, adds a last step that proves the fence from inside
	// with these targets (firewall.Verify).
	Verify *firewall.Targets
	// Gateway, when set, adds a step after "dns" that brings the
	// credential gateway up for the policy's credentials (or, with none,
	// stops it and removes its git config).
	Gateway *gateway.LaunchOptions
	// Warn gets the warnings of steps that succeed anyway (a name that does
	// not resolve yet). Default: discarded.
	Warn io.Writer
}

// Fence is one fence to install: the steps and the fallback.
type Fence struct{ o Options }

// New returns the fence o describes.
func New(o Options) *Fence {
	if o.Self == "" {
		if self, err := os.Executable(); err == nil {
			o.Self = self
		} else {
			o.Self = layout.BinaryPath
		}
	}
	if o.Warn == nil {
		o.Warn = io.Discard
	}
	return &Fence{o: o}
}

// Steps lists the steps that install the fence, in the order they run.
func (f *Fence) Steps() []Step {
	cfg := f.o.Config
	steps := []Step{{"apply", func(ctx context.Context) (string, error) {
		if f.o.LoadErr != nil {
			return "", fmt.Errorf("policy: %w", f.o.LoadErr)
		}
		// Apply falls back to deny-all itself when it fails half-way.
		res, err := firewall.Apply(ctx, cfg)
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("%d allowed, %d denied destinations, %d static set entries", len(cfg.Allow), len(cfg.Deny), res.StaticEntries), nil
	}}}
	if !f.o.NoDNS {
		steps = append(steps, Step{"dns", func(ctx context.Context) (string, error) {
			// StartDNS stops the earlier filter only if the pidfile still
			// names it (pid and start time), so a pidfile left by the
			// previous start of the container never gets a process of
			// this start killed.
			pid, err := firewall.StartDNS(ctx, cfg, firewall.DaemonOptions{Command: []string{f.o.Self, "firewall", "dns"}})
			if err != nil {
				return "", err
			}
			// Pre-resolving the exact names is a convenience; a name that
			// does not resolve yet is a warning, never a reason to fail.
			for _, w := range firewall.Warm(ctx, cfg) {
				fmt.Fprintf(f.o.Warn, "devbox: warning: %s\n", w)
			}
			return fmt.Sprintf("DNS filter running, pid %d", pid), nil
		}})
		if cfg.Gate {
			steps = append(steps, Step{"gate", func(ctx context.Context) (string, error) {
				// Like StartDNS, StartGate stops only the gate its pidfile
				// names (pid and start time).
				pid, err := firewall.StartGate(ctx, cfg, firewall.DaemonOptions{Command: []string{f.o.Self, "firewall", "gate"}})
				if err != nil {
					return "", err
				}
				return fmt.Sprintf("name gate running, pid %d", pid), nil
			}})
		}
	}
	if f.o.Gateway != nil && !f.o.NoDNS {
		// After the filter: the gateway resolves its upstreams through it.
		launch := *f.o.Gateway
		steps = append(steps, Step{"gateway", func(ctx context.Context) (string, error) {
			pid, err := gateway.Launch(ctx, launch)
			if err != nil || pid == 0 {
				return "", err
			}
			return fmt.Sprintf("credential gateway running, pid %d, routes for %v", pid, launch.Creds.Hosts()), nil
		}})
	}
	if f.o.Verify != nil {
		targets := *f.o.Verify
		steps = append(steps, Step{"verify", func(ctx context.Context) (string, error) {
			_, err := firewall.Verify(ctx, cfg, targets)
			return "", err
		}})
	}
	return steps
}

// DenyAll replaces whatever is loaded with deny-all: the state every
// failure ends in.
func (f *Fence) DenyAll(ctx context.Context) error {
	return firewall.DenyAll(ctx, f.o.Config)
}

// Done is told about each step that succeeded, with its summary and how
// long it took.
type Done func(step, summary string, took time.Duration)

// Install runs the steps in order. On the first failure it puts the
// namespace in deny-all and returns the step's error.
func (f *Fence) Install(ctx context.Context, done Done) error {
	return install(ctx, f.Steps(), f.DenyAll, done)
}

func install(ctx context.Context, steps []Step, denyAll func(context.Context) error, done Done) error {
	for _, s := range steps {
		t0 := time.Now()
		summary, err := s.Run(ctx)
		if err != nil {
			err = fmt.Errorf("%s: %w", s.Name, err)
			// A cancelled context must not stop the fallback.
			if derr := denyAll(context.WithoutCancel(ctx)); derr != nil {
				return errors.Join(err, fmt.Errorf("deny-all fallback also failed: %w", derr))
			}
			return fmt.Errorf("%w (egress is denied)", err)
		}
		if done != nil {
			done(s.Name, summary, time.Since(t0))
		}
	}
	return nil
}
