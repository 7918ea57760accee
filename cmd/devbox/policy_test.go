package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/devbox-dev/devbox/internal/devboxtest"
	"github.com/devbox-dev/devbox/internal/policy"
)

// runDevbox runs the CLI in-process and returns stdout, stderr and the error.
func runDevbox(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	app := newApp()
	app.Writer, app.ErrWriter = &out, &errOut
	err := app.Run(append([]string{"devbox"}, args...))
	return out.String(), errOut.String(), err
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// acceptance is issue 2's list of values `devbox policy validate` must
// reject, each with its expected FILE:LINE:COL prefix (the file is
// written below, one case per line).
var acceptance = []struct{ value, where string }{
	{`"*"`, ":4:15: network.allow[0]: "},
	{`"*.com"`, ":5:15: network.allow[0]: "},
	{`"a\u0000b.example.com"`, ":6:15: network.allow[0]: "},
	{`"https://x.test"`, ":7:15: network.allow[0]: "},
	{`"` + strings.Repeat("a", 64) + `.test"`, ":8:15: network.allow[0]: "},
	{`"x.test:70000"`, ":9:15: network.allow[0]: "},
}

func acceptanceFiles(t *testing.T, dir string) (files []string, wants []string) {
	// An unknown key.
	f := filepath.Join(dir, "unknown-key.jsonc")
	writeFile(t, f, "{\n  \"netwrk\": {},\n}\n")
	files, wants = append(files, f), append(wants, f+`:2:3: netwrk: unknown key "netwrk" at the top level`)
	for i, c := range acceptance {
		f := filepath.Join(dir, "case"+string(rune('a'+i))+".jsonc")
		// Pad with blank lines so each case sits on its own line number.
		content := "{\n  \"network\": {\n" + strings.Repeat("\n", i+1) + "    \"allow\": [" + c.value + "],\n  },\n}\n"
		writeFile(t, f, content)
		// Errors quote values Go-style, so a NUL shows as \x00, never raw.
		shown := strings.ReplaceAll(c.value, `\u0000`, `\x00`)
		files, wants = append(files, f), append(wants, f+c.where+shown+": ")
	}
	return files, wants
}

func TestPolicyValidateRejects(t *testing.T) {
	files, wants := acceptanceFiles(t, t.TempDir())
	for i, f := range files {
		out, errOut, err := runDevbox(t, "policy", "validate", f)
		if err == nil {
			t.Errorf("%s: validate succeeded; stdout %q", f, out)
			continue
		}
		if !strings.HasPrefix(errOut, wants[i]) {
			t.Errorf("%s: stderr\n  %q\nwant prefix\n  %q", f, errOut, wants[i])
		}
		if strings.ContainsRune(errOut, 0) {
			t.Errorf("%s: stderr carries a raw NUL byte", f)
		}
	}
	// All at once: every file is reported, the status is an error.
	_, errOut, err := runDevbox(t, append([]string{"policy", "validate"}, files...)...)
	if err == nil || strings.Count(errOut, "\n") != len(files) {
		t.Errorf("validate of %d bad files: err %v, stderr\n%s", len(files), err, errOut)
	}
}

func TestPolicyValidateExamples(t *testing.T) {
	files, err := filepath.Glob("../../examples/*.jsonc")
	if err != nil || len(files) < 4 {
		t.Fatalf("examples: %v %v", files, err)
	}
	out, errOut, err := runDevbox(t, append([]string{"policy", "validate"}, files...)...)
	if err != nil {
		t.Fatalf("validate examples: %v\n%s", err, errOut)
	}
	for _, f := range files {
		if !strings.Contains(out, f+": ok\n") {
			t.Errorf("no %q in\n%s", f+": ok", out)
		}
	}
}

func TestPolicyDefaultFile(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	_, _, err := runDevbox(t, "policy", "explain")
	if !errors.Is(err, policy.ErrNoPolicy) || !strings.Contains(err.Error(), ".devcontainer/devbox.policy.jsonc and devbox.policy.jsonc") {
		t.Errorf("explain with no policy: %v", err)
	}
	writeFile(t, "devbox.policy.jsonc", `{"network": {"presets": ["npm"]}}`)
	out, _, err := runDevbox(t, "policy", "validate")
	if err != nil || out != "devbox.policy.jsonc: ok\n" {
		t.Errorf("validate = %q, %v", out, err)
	}
	// .devcontainer/ comes first.
	writeFile(t, ".devcontainer/devbox.policy.jsonc", `{}`)
	out, _, err = runDevbox(t, "policy", "explain")
	if err != nil || !strings.Contains(out, "Policy .devcontainer/devbox.policy.jsonc\n") {
		t.Errorf("explain = %q, %v", out, err)
	}
	if !strings.Contains(out, "NO NETWORK: the allow list is empty") {
		t.Errorf("explain of an empty policy does not say there is no network:\n%s", out)
	}
}

func TestPolicyExplain(t *testing.T) {
	f := filepath.Join(t.TempDir(), "p.jsonc")
	writeFile(t, f, `{"network": {"presets": ["github"], "allow": ["x.test:443"], "deny": ["github.com:22"]}}`)
	out, _, err := runDevbox(t, "policy", "explain", f)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"x.test:443", "from allow",
		"api.github.com:443", "from preset:github",
		"removed github.com:22 from the allow list: denied by github.com:22",
		"image.user.name        dev",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("explain output lacks %q:\n%s", want, out)
		}
	}
	out, _, err = runDevbox(t, "policy", "explain", "--json", f)
	if err != nil {
		t.Fatal(err)
	}
	var ex struct {
		File      string
		NoNetwork bool
		Policy    struct{ Network struct{ Allow []string } }
		Allowed   []struct {
			Destination string
			From        []string
		}
		Defaults []struct{ Key string }
	}
	if err := json.Unmarshal([]byte(out), &ex); err != nil {
		t.Fatalf("--json output: %v\n%s", err, out)
	}
	if ex.File != f || ex.NoNetwork || len(ex.Allowed) != len(ex.Policy.Network.Allow) || len(ex.Defaults) == 0 {
		t.Errorf("--json: %+v", ex)
	}
	out2, _, _ := runDevbox(t, "policy", "explain", "--json", f)
	if out2 != out {
		t.Error("--json output is not stable between runs")
	}
	// An invalid file: errors on stderr, failure.
	writeFile(t, f, `{"network": {"allow": ["*"]}}`)
	_, errOut, err := runDevbox(t, "policy", "explain", f)
	if err == nil || !strings.HasPrefix(errOut, f+":1:24: network.allow[0]: ") {
		t.Errorf("explain of an invalid file: %v, %q", err, errOut)
	}
}

// TestPolicyValidateBinary runs the acceptance cases through the built
// binary: exit status and stderr as a user sees them.
func TestPolicyValidateBinary(t *testing.T) {
	bin := devboxtest.BuildDevbox(t)
	files, wants := acceptanceFiles(t, t.TempDir())
	for i, f := range files {
		cmd := exec.Command(bin, "policy", "validate", f)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err := cmd.Run()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 1 {
			t.Errorf("%s: exit %v, want status 1", f, err)
		}
		if !strings.HasPrefix(stderr.String(), wants[i]) {
			t.Errorf("%s: stderr %q, want prefix %q", f, stderr.String(), wants[i])
		}
	}
	ok := filepath.Join(t.TempDir(), "ok.jsonc")
	writeFile(t, ok, `{"network": {"presets": ["anthropic"]}}`)
	if out, err := exec.Command(bin, "policy", "validate", ok).CombinedOutput(); err != nil || string(out) != ok+": ok\n" {
		t.Errorf("validate ok file: %v %q", err, out)
	}
}
