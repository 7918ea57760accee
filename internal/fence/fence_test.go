package fence

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/devbox-dev/devbox/firewall"
	"github.com/devbox-dev/devbox/internal/gateway"
)

func names(steps []Step) []string {
	var out []string
	for _, s := range steps {
		out = append(out, s.Name)
	}
	return out
}

func TestSteps(t *testing.T) {
	for _, tc := range []struct {
		o    Options
		want []string
	}{
		{Options{}, []string{"apply", "dns"}},
		{Options{NoDNS: true}, []string{"apply"}},
		{Options{Verify: &firewall.Targets{}}, []string{"apply", "dns", "verify"}},
		{Options{Config: firewall.Config{Gate: true}, Verify: &firewall.Targets{}}, []string{"apply", "dns", "gate", "verify"}},
		{Options{Config: firewall.Config{Gate: true}, NoDNS: true}, []string{"apply"}},
		{Options{Verify: &firewall.Targets{}, Gateway: &gateway.LaunchOptions{}}, []string{"apply", "dns", "gateway", "verify"}},
		{Options{NoDNS: true, Gateway: &gateway.LaunchOptions{}}, []string{"apply"}},
		{Options{Config: firewall.Config{Gate: true}, Gateway: &gateway.LaunchOptions{}}, []string{"apply", "dns", "gate", "gateway"}},
	} {
		if got := names(New(tc.o).Steps()); !slices.Equal(got, tc.want) {
			t.Errorf("Steps(%+v) = %q, want %q", tc.o, got, tc.want)
		}
	}
}

// TestLoadErrFailsFirst: a policy that did not load fails the first step
// before anything touches the kernel.
func TestLoadErrFailsFirst(t *testing.T) {
	steps := New(Options{LoadErr: errors.New("no such file")}).Steps()
	_, err := steps[0].Run(context.Background())
	if err == nil || err.Error() != "policy: no such file" {
		t.Fatalf("apply with a load error = %v", err)
	}
}

func TestInstallFailsClosed(t *testing.T) {
	for _, tc := range []struct {
		failAt, denyErr string
		wantCalls       string
		wantErr         string
	}{
		{"", "", "a b c", ""},
		{"a", "", "a denyall", "a: a broke (egress is denied)"},
		{"b", "", "a b denyall", "b: b broke (egress is denied)"},
		{"c", "deny broke", "a b c denyall", "c: c broke\ndeny-all fallback also failed: deny broke"},
	} {
		var calls, done []string
		step := func(name string) Step {
			return Step{name, func(ctx context.Context) (string, error) {
				calls = append(calls, name)
				if name == tc.failAt {
					return "", errors.New(name + " broke")
				}
				return "did " + name, nil
			}}
		}
		denyAll := func(ctx context.Context) error {
			calls = append(calls, "denyall")
			if ctx.Err() != nil {
				t.Error("deny-all ran with a cancelled context")
			}
			if tc.denyErr != "" {
				return errors.New(tc.denyErr)
			}
			return nil
		}
		ctx, cancel := context.WithCancel(context.Background())
		steps := []Step{step("a"), step("b"), step("c")}
		if tc.failAt != "" {
			// The fallback must run even when the failure was a cancel.
			steps[0].Run = func(ctx context.Context) (string, error) {
				calls = append(calls, "a")
				if tc.failAt == "a" {
					cancel()
					return "", errors.New("a broke")
				}
				return "did a", nil
			}
		}
		err := install(ctx, steps, denyAll, func(step, summary string, took time.Duration) {
			if summary != "did "+step || took < 0 {
				t.Errorf("done(%q, %q, %v)", step, summary, took)
			}
			done = append(done, step)
		})
		cancel()
		if got := strings.Join(calls, " "); got != tc.wantCalls {
			t.Errorf("failAt %q: calls = %q, want %q", tc.failAt, got, tc.wantCalls)
		}
		if tc.wantErr == "" {
			if err != nil || len(done) != 3 {
				t.Errorf("install = %v, done %q", err, done)
			}
			continue
		}
		if err == nil || err.Error() != tc.wantErr {
			t.Errorf("failAt %q: err = %v, want %q", tc.failAt, err, tc.wantErr)
		}
		if slices.Contains(done, tc.failAt) {
			t.Errorf("done called for the failed step %q", tc.failAt)
		}
	}
}
