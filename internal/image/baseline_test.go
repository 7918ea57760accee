package image

import (
	"bytes"
	"testing"

	"github.com/devbox-dev/devbox/internal/baseline"
	"github.com/devbox-dev/devbox/internal/layout"
)

// TestBaselineBaked: with a baseline, the image gets it at
// layout.BaselinePath (before the policy, so a policy-only change does not
// touch it) and labels carrying it and its digest, which FromLabel checks;
// without one, neither.
func TestBaselineBaked(t *testing.T) {
	spec := testSpec("2.1.332")
	base := testPolicy("2.1.332")
	spec.Baseline = base
	steps, err := Steps(spec)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := PolicyJSON(base)
	n := len(steps)
	if n < 2 || steps[n-2].Name != "baseline" || steps[n-2].Dest != layout.BaselinePath || !bytes.Equal(steps[n-2].Data, want) || steps[n-1].Name != "policy" {
		t.Fatalf("the last steps are %+v, %+v; want the baseline then the policy", steps[n-2].Name, steps[n-1].Name)
	}
	l, err := Labels(spec, "test")
	if err != nil {
		t.Fatal(err)
	}
	if l[LabelBaselineDigest] != baseline.Digest(want) {
		t.Errorf("digest label %q, want %q", l[LabelBaselineDigest], baseline.Digest(want))
	}
	if _, err := baseline.FromLabel(l[LabelBaseline], l[LabelBaselineDigest]); err != nil {
		t.Errorf("the labels do not read back: %v", err)
	}
	spec.Baseline = nil
	l, _ = Labels(spec, "test")
	if _, ok := l[LabelBaseline]; ok {
		t.Error("a baseline label without a baseline")
	}
}
