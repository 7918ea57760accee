package devcontainer

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/devbox-dev/devbox/internal/devboxtest"
)

// readConfiguration runs the real Dev Containers CLI (the engine VS Code
// uses) on the workspace and returns the configuration it resolved.
func readConfiguration(t *testing.T, workspace string) map[string]any {
	t.Helper()
	cli := devboxtest.Env(t, "DEVBOX_DEVCONTAINER_CLI")
	docker := devboxtest.Env(t, "DEVBOX_DOCKER_PATH")
	cmd := exec.CommandContext(context.Background(), cli, "read-configuration",
		"--workspace-folder", workspace, "--docker-path", docker, "--log-level", "info")
	// read-configuration asks `docker ps` for an existing container.
	cmd.Env = os.Environ()
	if h := os.Getenv("DEVBOX_DOCKER_HOST"); h != "" {
		cmd.Env = append(cmd.Env, "DOCKER_HOST="+h)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("devcontainer read-configuration: %v\nstdout: %s\nstderr: %s", err, stdout.Bytes(), stderr.Bytes())
	}
	var out struct {
		Configuration map[string]any `json:"configuration"`
		Workspace     struct {
			WorkspaceFolder string `json:"workspaceFolder"`
		} `json:"workspace"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
		t.Fatalf("read-configuration output is not JSON: %v\n%s", err, stdout.Bytes())
	}
	if out.Configuration == nil {
		t.Fatalf("no configuration in %s", stdout.Bytes())
	}
	out.Configuration["_workspaceFolder"] = out.Workspace.WorkspaceFolder
	return out.Configuration
}

func strs(v any) []string {
	var out []string
	list, _ := v.([]any)
	for _, e := range list {
		if s, ok := e.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

// TestReadConfigurationAccepts checks that the Dev Containers CLI accepts
// what init writes, fresh and patched, in both modes, and resolves the
// fence's properties and read-only mounts the way the container will get
// them.
func TestReadConfigurationAccepts(t *testing.T) {
	commented, err := os.ReadFile("testdata/commented.jsonc")
	if err != nil {
		t.Fatal(err)
	}
	digestRef := "registry.test/team/devbox@sha256:" + strings.Repeat("ef", 32)
	tests := []struct {
		name     string
		existing []byte
		image    string
		check    func(t *testing.T, cfg map[string]any)
	}{
		{name: "fresh-build", check: func(t *testing.T, cfg map[string]any) {
			b, _ := cfg["build"].(map[string]any)
			if b["dockerfile"] != "Dockerfile" || b["context"] != ".devbox" {
				t.Errorf("build = %v", cfg["build"])
			}
		}},
		{name: "fresh-image", image: digestRef, check: func(t *testing.T, cfg map[string]any) {
			if cfg["image"] != digestRef || cfg["build"] != nil {
				t.Errorf("image = %v, build = %v", cfg["image"], cfg["build"])
			}
		}},
		{name: "patched-build", existing: commented, check: func(t *testing.T, cfg map[string]any) {
			if cfg["name"] != "my project" || cfg["image"] != nil {
				t.Errorf("name = %v, image = %v", cfg["name"], cfg["image"])
			}
			env, _ := cfg["containerEnv"].(map[string]any)
			if env["EDITOR"] != "vim" {
				t.Errorf("the user's containerEnv was lost: %v", env)
			}
			if !slices.Contains(strs(cfg["capAdd"]), "SYS_PTRACE") {
				t.Errorf("the user's capAdd was lost: %v", cfg["capAdd"])
			}
		}},
		{name: "patched-image", existing: commented, image: digestRef, check: func(t *testing.T, cfg map[string]any) {
			if cfg["image"] != digestRef {
				t.Errorf("image = %v", cfg["image"])
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := filepath.Join(t.TempDir(), "repo")
			write(t, root, ".git/config", "[core]\n")
			write(t, root, ".git/hooks/pre-commit.sample", "")
			if tt.existing != nil {
				write(t, root, ConfigFile, string(tt.existing))
			}
			opts := buildOpts(t, root)
			opts.Image = tt.image
			mustInit(t, opts)
			cfg := readConfiguration(t, root)
			tt.check(t, cfg)
			for _, c := range []string{"NET_ADMIN", "NET_RAW"} {
				if !slices.Contains(strs(cfg["capAdd"]), c) {
					t.Errorf("capAdd %v lacks %s", cfg["capAdd"], c)
				}
			}
			if cfg["remoteUser"] != "dev" || cfg["containerUser"] != "root" {
				t.Errorf("remoteUser = %v, containerUser = %v", cfg["remoteUser"], cfg["containerUser"])
			}
			if !slices.Contains(strs(cfg["securityOpt"]), "no-new-privileges") {
				t.Errorf("securityOpt = %v", cfg["securityOpt"])
			}
			// The CLI substitutes the workspace variables: the protected paths
			// are bound read-only at the container's own workspace path.
			ws := cfg["_workspaceFolder"].(string)
			mounts := strs(cfg["mounts"])
			for _, rel := range []string{".devcontainer", ".git/hooks", ".git/config"} {
				want := "source=" + filepath.Join(root, rel) + ",target=" + ws + "/" + rel + ",type=bind,readonly"
				if !slices.Contains(mounts, want) {
					t.Errorf("mounts %q lack %q", mounts, want)
				}
			}
			if !slices.ContainsFunc(mounts, func(m string) bool {
				return strings.HasPrefix(m, "source=devbox-claude-") && strings.HasSuffix(m, ",target=/home/dev/.claude,type=volume")
			}) {
				t.Errorf("mounts %q lack Claude's per-container volume", mounts)
			}
		})
	}
}
