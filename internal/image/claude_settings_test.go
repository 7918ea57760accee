package image

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/devbox-dev/devbox/internal/sandbox"
)

// TestClaudeSettingsStep runs the claude-settings step's script (with the
// settings path moved into a temporary directory) and checks it writes
// exactly what sandbox.ClaudeManagedSettings generates, with the sandbox
// off and on: the image carries the one generator's output, never its own.
func TestClaudeSettingsStep(t *testing.T) {
	for _, enabled := range []bool{false, true} {
		s := testSpec("2.1.332")
		s.Policy.Sandbox.Enabled = enabled
		steps, err := Steps(s)
		if err != nil {
			t.Fatal(err)
		}
		var script string
		for _, st := range steps {
			if st.Name == "claude-settings" {
				script = st.Script
			}
		}
		if script == "" {
			t.Fatalf("sandbox.enabled=%v: no claude-settings step", enabled)
		}
		file := filepath.Join(t.TempDir(), "etc/claude-code/managed-settings.json")
		script = strings.NewReplacer(ClaudeSettingsPath, file, filepath.Dir(ClaudeSettingsPath), filepath.Dir(file)).Replace(script)
		if out, err := exec.Command("sh", "-eu", "-c", script).CombinedOutput(); err != nil {
			t.Fatalf("sandbox.enabled=%v: script: %v\n%s\n%s", enabled, err, script, out)
		}
		got, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		gen, err := sandbox.ClaudeManagedSettings(s.Policy)
		if err != nil {
			t.Fatal(err)
		}
		var want bytes.Buffer
		json.Compact(&want, gen)
		want.WriteByte('\n')
		if !bytes.Equal(got, want.Bytes()) {
			t.Errorf("sandbox.enabled=%v: the image's managed settings differ from the generator's:\n got %s\nwant %s", enabled, got, want.Bytes())
		}
		if strings.Contains(string(got), `"allowUnsandboxedCommands":false`) != enabled {
			t.Errorf("sandbox.enabled=%v: Claude Code's sandbox in the settings: %s", enabled, got)
		}
		if fi, _ := os.Stat(file); fi == nil || fi.Mode().Perm() != 0o644 {
			t.Errorf("sandbox.enabled=%v: settings file mode %v, want 0644", enabled, fi)
		}
	}
	none := testSpec("none")
	steps, err := Steps(none)
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range steps {
		if st.Name == "claude-settings" {
			t.Error("claudeCode none: a claude-settings step, but no Claude Code to read it")
		}
	}
}
