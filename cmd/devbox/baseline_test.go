package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestPolicyValidateBaseline: a narrowing repository validates against
// --baseline; a hostile one fails with every widening at FILE:LINE:COL and
// the baseline entry it exceeds; explain shows baseline ∩ repository.
func TestPolicyValidateBaseline(t *testing.T) {
	td := filepath.Join("..", "..", "internal", "baseline", "testdata")
	base := filepath.Join(td, "baseline.jsonc")
	narrow, hostile := filepath.Join(td, "narrow.jsonc"), filepath.Join(td, "hostile.jsonc")

	out, _, err := runDevbox(t, "policy", "validate", "--baseline", base, narrow)
	if err != nil || !strings.Contains(out, "ok (within baseline") {
		t.Fatalf("narrow: %v\n%s", err, out)
	}
	_, stderr, err := runDevbox(t, "policy", "validate", "--baseline", base, hostile)
	if err == nil {
		t.Fatal("a widening repository validated")
	}
	for _, want := range []string{
		hostile + `:6:7: network.allow[0]: "*.corp.test:443" is wider than the baseline allows`,
		`exceeds baseline network.allow "*.dev.corp.test:443"`,
		hostile + ":7:7: network.allow[1]: \"api.dev.corp.test:8443\"",
		hostile + ":8:7: network.allow[2]: \"10.0.0.0/8:443\"",
		`exceeds baseline network.deny "secrets.dev.corp.test"`,
		hostile + `:16:37: sandbox.allowWrite[1]: "/etc" is not within`,
		hostile + `:3:27: agent.claudeCode: "2.1.300": the baseline pins Claude Code 2.1.332`,
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("validate output lacks %q:\n%s", want, stderr)
		}
	}
	out, _, err = runDevbox(t, "policy", "explain", "--baseline", base, narrow)
	if err != nil || !strings.Contains(out, "api.dev.corp.test:443                within baseline *.dev.corp.test:443; repo allow network.allow[0] (6:7)") {
		t.Fatalf("explain: %v\n%s", err, out)
	}
}
