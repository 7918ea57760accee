package policy

import (
	"os"
	"strings"
	"testing"
)

// TestDocsListPresets keeps docs/policy.md in step with presets.go: every
// preset and every destination in it must appear in the reference.
func TestDocsListPresets(t *testing.T) {
	raw, err := os.ReadFile("../../docs/policy.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	for _, name := range PresetNames() {
		if !strings.Contains(doc, "| `"+name+"` |") {
			t.Errorf("docs/policy.md has no row for preset %s", name)
		}
		entries, _ := Preset(name)
		for _, e := range entries {
			if !strings.Contains(doc, "`"+e.Destination.String()+"`") {
				t.Errorf("docs/policy.md does not list %s (preset %s)", e.Destination, name)
			}
		}
	}
	for _, d := range DefaultDenyRead {
		if !strings.Contains(doc, "`"+d+"`") {
			t.Errorf("docs/policy.md does not list the default denyRead %s", d)
		}
	}
}

// TestDocsExamplesValidate parses every ```jsonc block of docs/policy.md.
func TestDocsExamplesValidate(t *testing.T) {
	raw, err := os.ReadFile("../../docs/policy.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := strings.Split(string(raw), "```jsonc\n")[1:]
	if len(blocks) == 0 {
		t.Fatal("docs/policy.md has no jsonc example")
	}
	for i, b := range blocks {
		body, _, ok := strings.Cut(b, "```")
		if !ok {
			t.Fatalf("block %d is not closed", i)
		}
		if _, err := Parse("docs/policy.md example", []byte(body)); err != nil {
			t.Errorf("block %d does not validate:\n%v", i, err)
		}
	}
}
