package review

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/devbox-dev/devbox/firewall"
	"github.com/devbox-dev/devbox/internal/baseline"
	"github.com/devbox-dev/devbox/internal/golden"
	"github.com/devbox-dev/devbox/internal/policy"
)

// TestReview: a day of log lines and hit counters give the golden report
// and diff, with and without --wildcards; the applied file validates,
// stays within the baseline and keeps every comment.
func TestReview(t *testing.T) {
	events, err := firewall.ReadLog(filepath.Join("testdata", "events.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join("testdata", "hits.json"))
	if err != nil {
		t.Fatal(err)
	}
	var hits firewall.Hits
	if err := json.Unmarshal(raw, &hits); err != nil {
		t.Fatal(err)
	}
	polPath := filepath.Join("testdata", "policy.jsonc")
	src, err := os.ReadFile(polPath)
	if err != nil {
		t.Fatal(err)
	}
	ex, err := policy.Explain("policy.jsonc", src)
	if err != nil {
		t.Fatal(err)
	}
	base, err := baseline.Load(filepath.Join("testdata", "baseline.jsonc"))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 30, 10, 15, 0, 0, time.UTC)
	for _, tc := range []struct {
		name string
		o    Options
	}{
		{"review", Options{Since: 2 * time.Hour, Now: now}},
		{"review-wildcards", Options{Since: 2 * time.Hour, Now: now, Wildcards: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := Review(events, &hits, ex, base, tc.o)
			patched, err := Apply(src, r.Add)
			if err != nil {
				t.Fatal(err)
			}
			var b strings.Builder
			if err := r.WriteText(&b, Diff("policy.jsonc", src, patched)); err != nil {
				t.Fatal(err)
			}
			golden.Check(t, filepath.Join("testdata", tc.name+".golden"), []byte(b.String()))
			pex, err := policy.Explain("policy.jsonc", patched)
			if err != nil {
				t.Fatalf("the applied policy does not validate: %v\n%s", err, patched)
			}
			if err := baseline.Check(base, "baseline.jsonc", pex); err != nil {
				t.Errorf("the applied policy widens the baseline: %v", err)
			}
			for _, c := range []string{"// A repository's policy under review.", "// the service under development"} {
				if !strings.Contains(string(patched), c) {
					t.Errorf("comment %q lost", c)
				}
			}
			if len(r.Add) == 0 {
				t.Fatal("nothing proposed")
			}
		})
	}
}
