package devcontainer

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/tailscale/hujson"

	"github.com/devbox-dev/devbox/internal/sandbox"
)

// TestInitSandboxSeccomp: with sandbox.enabled, init writes devbox's
// seccomp profile and references it from runArgs (kept whole beside the
// user's own runArgs, and not repeated on a second run); without it, init
// writes neither.
func TestInitSandboxSeccomp(t *testing.T) {
	const userConfig = `{
	// the user's own
	"runArgs": ["--security-opt", "apparmor=unconfined", "--cpus=2"],
}
`
	tests := []struct {
		name    string
		policy  string
		wantArg bool
	}{
		{"enabled", `{"sandbox": {"enabled": true}}`, true},
		{"disabled", `{"sandbox": {"enabled": false}}`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			write(t, root, PolicyFile, tt.policy)
			write(t, root, ConfigFile, userConfig)
			opts := InitOptions{Root: root, Image: "registry.test/x@sha256:" + strings.Repeat("0", 64)}
			rs := mustInit(t, opts)
			st := statuses(rs)
			var cfg struct{ RunArgs []string }
			std, err := hujson.Standardize(read(t, root, ConfigFile))
			if err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(std, &cfg); err != nil {
				t.Fatal(err)
			}
			want := []string{"--security-opt", "apparmor=unconfined", "--cpus=2"}
			if tt.wantArg {
				want = append(want, "--security-opt=seccomp=${localWorkspaceFolder}/.devcontainer/devbox-seccomp.json")
				if st[SeccompFile] != Created {
					t.Errorf("%s: status %q, want created", SeccompFile, st[SeccompFile])
				}
				if got := read(t, root, SeccompFile); !bytes.Equal(got, sandbox.SeccompProfile) {
					t.Errorf("%s is not sandbox.SeccompProfile", SeccompFile)
				}
			} else if _, ok := st[SeccompFile]; ok {
				t.Errorf("sandbox off: init planned %s (%s)", SeccompFile, st[SeccompFile])
			}
			if strings.Join(cfg.RunArgs, " ") != strings.Join(want, " ") {
				t.Errorf("runArgs %q, want %q", cfg.RunArgs, want)
			}
			if !bytes.Contains(read(t, root, ConfigFile), []byte("// the user's own")) {
				t.Error("the user's comment was lost")
			}
			// Again: nothing to do.
			rs = mustInit(t, opts)
			for _, r := range rs {
				if r.Status != Unchanged && r.Status != Kept {
					t.Errorf("second init: %s %s", r.Path, r.Status)
				}
			}
		})
	}
}
