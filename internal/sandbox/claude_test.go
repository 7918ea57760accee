package sandbox

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/devbox-dev/devbox/internal/policy"
)

func TestClaudeManagedSettingsGolden(t *testing.T) {
	inputs, err := filepath.Glob("testdata/claude/*.hujson")
	if err != nil || len(inputs) == 0 {
		t.Fatalf("no testdata/claude/*.hujson inputs: %v", err)
	}
	for _, in := range inputs {
		t.Run(filepath.Base(in), func(t *testing.T) {
			p, err := policy.Load(in)
			if err != nil {
				t.Fatal(err)
			}
			got, err := ClaudeManagedSettings(p)
			if err != nil {
				t.Fatal(err)
			}
			var check struct {
				Sandbox struct {
					Enabled                  bool `json:"enabled"`
					AllowUnsandboxedCommands *bool
				} `json:"sandbox"`
			}
			if err := json.Unmarshal(got, &check); err != nil || !check.Sandbox.Enabled || check.Sandbox.AllowUnsandboxedCommands == nil || *check.Sandbox.AllowUnsandboxedCommands {
				t.Errorf("settings must enable the sandbox and set allowUnsandboxedCommands false (err %v):\n%s", err, got)
			}
			golden := strings.TrimSuffix(in, ".hujson") + ".golden.json"
			if *update {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test ./internal/sandbox -update)", err)
			}
			if string(got) != string(want) {
				t.Errorf("%s differs (-update to accept):\n--- got\n%s--- want\n%s", golden, got, want)
			}
		})
	}
}
