package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/devbox-dev/devbox/internal/devcontainer"
)

// devcontainerID is the Dev Containers CLI's ${devcontainerId} for a
// workspace folder (@devcontainers/cli 0.89.0, getDevContainerId): the
// SHA-256 of its id labels as JSON with sorted keys, in base 32, padded to
// 52 digits. The test checks the container then mounts the volume named
// from it, so a change in the CLI fails here, loudly.
func devcontainerID(repo string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.Encode(map[string]string{
		"devcontainer.local_folder": repo,
		"devcontainer.config_file":  filepath.Join(repo, devcontainer.ConfigFile),
	})
	sum := sha256.Sum256(bytes.TrimSuffix(b.Bytes(), []byte("\n")))
	s := new(big.Int).SetBytes(sum[:]).Text(32)
	return strings.Repeat("0", max(0, 52-len(s))) + s
}

// TestClaudeState is Claude Code's own state in a dev container: its
// configuration volume as an older devbox left it (root:root 0755, a
// root-owned .claude.json) is handed to the remote user by the entrypoint,
// the real claude binary saves an MCP server there, and both survive the
// container being rebuilt on the same volume. A fresh volume takes the
// user's ownership from the image.
func TestClaudeState(t *testing.T) {
	start := time.Now()
	e := setup(t)
	lock, _ := claudeNPM(t)
	w := startWorld(t, e.d, e.base, e.worldd)
	repo := repoWithPolicy(t, e, w, "", fmt.Sprintf(`{
  "image": {"base": %q, "user": {"name": "dev", "uid": 1000, "gid": 1000}, "tag": %q},
  "agent": {"claudeCode": %q, "login": "in-container"},
  "network": {"allow": ["allowed.test:8080"]},
}
`, e.base, e.registry+"/devbox/e2e:unused", lock.ClaudeCode.Version))

	// The volume as devbox made it before the image had ~/.claude: Docker
	// created its root root-owned, and something root wrote in it.
	vol := strings.Replace(devcontainer.ClaudeVolume, "${devcontainerId}", devcontainerID(repo), 1)
	e.d.Run(t, "volume", "create", vol)
	t.Cleanup(func() { e.d.Command(context.Background(), "volume", "rm", "-f", vol).Run() })
	e.d.Run(t, "run", "--rm", "--network", "none", "-v", vol+":/v", e.base, "sh", "-c",
		`echo '{}' > /v/.claude.json && mkdir /v/projects && chmod 0755 /v`)
	if got := e.d.Run(t, "run", "--rm", "--network", "none", "-v", vol+":/v", e.base, "stat", "-c", "%u:%g %a", "/v", "/v/.claude.json"); strings.TrimSpace(got) != "0:0 755\n0:0 644" {
		t.Fatalf("the old volume is %q, want root-owned", got)
	}

	upStart := time.Now()
	id := devcontainerUp(t, e, repo)
	requireFenced(t, e.d, id, "")
	t.Logf("devcontainer up (with Claude Code %s) and fence: %.1f s", lock.ClaudeCode.Version, time.Since(upStart).Seconds())
	if mounts := e.d.Run(t, "inspect", "--format", `{{range .Mounts}}{{.Name}}:{{.Destination}} {{end}}`, id); !strings.Contains(mounts, vol+":/home/dev/.claude") {
		labels := e.d.Run(t, "inspect", "--format", `{{json .Config.Labels}}`, id)
		t.Fatalf("the container does not mount %s on ~/.claude (mounts %s; labels %s): the test's devcontainerId differs from the CLI's", vol, mounts, labels)
	}
	logs, _ := e.d.Command(context.Background(), "logs", id).CombinedOutput()
	for _, l := range strings.Split(string(logs), "\n") {
		if strings.Contains(l, "Claude Code's state") {
			t.Logf("entrypoint: %s", l)
		}
	}

	user := func(args ...string) (string, error) {
		a := []string{"exec", "-u", "dev", "-w", "/home/dev", "-e", "HOME=/home/dev", "-e", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", id}
		out, err := e.d.Command(context.Background(), append(a, args...)...).CombinedOutput()
		return string(out), err
	}
	checkState := func(t *testing.T, when string) {
		t.Helper()
		if got := e.d.Run(t, "exec", id, "stat", "-c", "%u:%g %a", "/home/dev/.claude", "/home/dev/.claude/.claude.json"); !strings.HasPrefix(got, "1000:1000 700\n1000:1000 ") {
			t.Errorf("%s: ~/.claude and its .claude.json are %q, want the user's (1000:1000), the directory 0700", when, got)
		}
		if out, err := user("sh", "-c", "echo $CLAUDE_CONFIG_DIR"); err != nil || strings.TrimSpace(out) != "/home/dev/.claude" {
			t.Errorf("%s: CLAUDE_CONFIG_DIR is %q (%v), want /home/dev/.claude", when, out, err)
		}
	}

	t.Run("repaired at start", func(t *testing.T) {
		checkState(t, "first start")
		if out, err := user("touch", "/home/dev/.claude/x"); err != nil {
			t.Fatalf("touch ~/.claude/x as the user: %v\n%s", err, out)
		}
		// Not recursive: what root left inside stays root's.
		if got := e.d.Run(t, "exec", id, "stat", "-c", "%u", "/home/dev/.claude/projects"); strings.TrimSpace(got) != "0" {
			t.Errorf("~/.claude/projects is uid %q, want 0 (only the directory and .claude.json are handed over)", got)
		}
	})

	t.Run("doctor warns about the in-container login", func(t *testing.T) {
		// The policy opts out of the gateway (agent.login): doctor's report
		// and the login banner say the agent holds its own credential.
		out, _ := user("devbox", "doctor", "--json")
		var rep struct {
			Findings []struct{ Check, Level, Detail, Fix string } `json:"findings"`
		}
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatalf("devbox doctor --json: %v\n%s", err, out)
		}
		n := 0
		for _, f := range rep.Findings {
			if f.Check == "claude login" {
				n++
				if f.Level != "warn" || !strings.Contains(f.Detail, "the agent holds its own credential") || !strings.Contains(f.Fix, "devbox login") {
					t.Errorf("doctor: %s %s: %s (fix: %s)", f.Check, f.Level, f.Detail, f.Fix)
				}
				t.Logf("devbox doctor as the user: [%s] %s: %s", f.Level, f.Check, f.Detail)
			}
		}
		if n != 1 {
			t.Errorf("doctor has %d claude login findings, want 1:\n%s", n, out)
		}
		banner, err := user("bash", "-lc", "true")
		if err != nil || !strings.Contains(banner, "devbox: [warn] claude login: Claude Code logs in inside the container") {
			t.Errorf("a login shell's banner (%v):\n%s", err, banner)
		}
	})

	t.Run("claude saves its state", func(t *testing.T) {
		out, err := user("claude", "mcp", "add", "--scope", "user", "devbox-e2e", "--", "true")
		if err != nil || !strings.Contains(out, "Added stdio MCP server devbox-e2e") || strings.Contains(out, "may not have been saved") {
			t.Fatalf("claude mcp add as the user: %v\n%s", err, out)
		}
		t.Logf("claude mcp add: %s", strings.TrimSpace(out))
		if out, err := user("claude", "mcp", "get", "devbox-e2e"); !strings.Contains(out, "User config") {
			t.Errorf("claude mcp get devbox-e2e: %v\n%s", err, out)
		}
	})

	cleanup := t.Cleanup // the rebuilt container outlives its subtest
	t.Run("rebuilt on the same volume", func(t *testing.T) {
		path := "PATH=" + filepath.Dir(e.devbox) + string(os.PathListSeparator) + os.Getenv("PATH")
		out, err := runErr(repo, []string{"DOCKER_HOST=" + e.d.Host, path}, e.dcli, "up", "--workspace-folder", repo, "--docker-path", e.d.Path, "--remove-existing-container")
		var res struct {
			Outcome     string `json:"outcome"`
			ContainerID string `json:"containerId"`
		}
		lines := strings.Split(strings.TrimSpace(out), "\n")
		json.Unmarshal([]byte(lines[len(lines)-1]), &res)
		if res.ContainerID != "" && res.ContainerID != id {
			cleanup(func() { e.d.Command(context.Background(), "rm", "-f", res.ContainerID).Run() })
		}
		if err != nil || res.Outcome != "success" || res.ContainerID == id {
			t.Fatalf("devcontainer up --remove-existing-container: outcome %q, container %s (was %s): %v", res.Outcome, res.ContainerID, id, err)
		}
		old := id
		id = res.ContainerID
		requireFenced(t, e.d, id, "")
		if e.d.Command(context.Background(), "inspect", old).Run() == nil {
			t.Errorf("the old container %s still exists", old[:12])
		}
		checkState(t, "after the rebuild")
		if out, err := user("claude", "mcp", "get", "devbox-e2e"); !strings.Contains(out, "User config") {
			t.Errorf("after the rebuild, claude mcp get devbox-e2e: %v\n%s", err, out)
		}
		if out, err := user("ls", "/home/dev/.claude/x"); err != nil {
			t.Errorf("after the rebuild, ~/.claude/x: %v\n%s", err, out)
		}
		t.Logf("rebuilt: container %s → %s, same volume %s; the MCP server and ~/.claude/x are still there", old[:12], id[:12], vol)
	})

	t.Run("fresh volume", func(t *testing.T) {
		img := strings.TrimSpace(e.d.Run(t, "inspect", "--format", "{{.Image}}", id))
		fresh := "devbox-e2e-fresh-" + w.Nonce
		t.Cleanup(func() { e.d.Command(context.Background(), "volume", "rm", "-f", fresh).Run() })
		got := e.d.Run(t, "run", "--rm", "--network", "none", "--entrypoint", "stat", "-v", fresh+":/home/dev/.claude", img, "-c", "%u:%g %a", "/home/dev/.claude")
		if strings.TrimSpace(got) != "1000:1000 700" {
			t.Errorf("a fresh volume on ~/.claude is %q, want 1000:1000 700 (from the image)", got)
		}
	})
	t.Logf("TestClaudeState: %.1f s", time.Since(start).Seconds())
}
