package isolated

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/devbox-dev/devbox/internal/devboxtest"
)

func owner(t *testing.T, p string) uint32 {
	t.Helper()
	fi, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t).Uid
}

// TestPrepareVolume: an empty root-owned directory is handed to the user;
// anything else is left as it is.
func TestPrepareVolume(t *testing.T) {
	devboxtest.RequireRoot(t)
	base := t.TempDir()
	empty := filepath.Join(base, "empty")
	full := filepath.Join(base, "full")
	link := filepath.Join(base, "link")
	os.Mkdir(empty, 0o755)
	os.Mkdir(full, 0o755)
	os.WriteFile(filepath.Join(full, "f"), nil, 0o644)
	os.Symlink(empty, link)
	for _, d := range []string{full, link} {
		if err := prepareVolume(d, 4242, 4242); err != nil {
			t.Fatal(err)
		}
	}
	if owner(t, full) != 0 || owner(t, empty) != 0 {
		t.Errorf("a non-empty directory or a link's target was handed over")
	}
	if err := prepareVolume(empty, 4242, 4242); err != nil || owner(t, empty) != 4242 {
		t.Errorf("empty volume not handed over: %v, owner %d", err, owner(t, empty))
	}
	for _, bad := range []string{"relative", "/workspaces/../etc", "/etc"} {
		if err := PrepareVolume(bad, 1, 1); err == nil {
			t.Errorf("PrepareVolume(%q) accepted", bad)
		}
	}
}

// fakeRunner records commands and answers from a table keyed by the
// command's first words.
type fakeRunner struct {
	calls   [][]string
	answers map[string]string
}

func (f *fakeRunner) Output(_ context.Context, _ []string, name string, args ...string) ([]byte, error) {
	call := append([]string{name}, args...)
	f.calls = append(f.calls, call)
	for k, v := range f.answers {
		if strings.HasPrefix(strings.Join(call, " "), k) {
			return []byte(v), nil
		}
	}
	return nil, nil
}

// TestPull: the container is found by the CLI's label, git runs there as
// the agent's user, and the host's git fetches with hooks and fsmonitor
// off into refs/remotes/devbox/.
func TestPull(t *testing.T) {
	root := t.TempDir()
	f := &fakeRunner{answers: map[string]string{
		"docker ps":                "abc123\tname\timage\tUp\n",
		"docker container inspect": inspectJSON(root, "DEVBOX_ISOLATED_WORKSPACE=/workspaces/repo"),
		"docker exec":              "# v2 git bundle\n",
		"git -C":                   "devbox/main 1234567 work\n",
	}}
	out, err := Pull(context.Background(), PullOptions{Root: root, Docker: "docker", User: "dev", Run: f})
	if err != nil {
		t.Fatal(err)
	}
	if out != "devbox/main 1234567 work\n" {
		t.Errorf("out = %q", out)
	}
	want := [][]string{
		{"docker", "ps", "--filter", "label=devcontainer.local_folder=" + root, "--format", "{{.ID}}\t{{.Names}}\t{{.Image}}\t{{.Status}}"},
		{"docker", "container", "inspect", "abc123"},
		{"docker", "exec", "-u", "dev", "abc123", "git", "-C", "/workspaces/repo", "bundle", "create", "-", "--branches"},
	}
	for i, w := range want {
		if !slices.Equal(f.calls[i], w) {
			t.Errorf("call %d = %q, want %q", i, f.calls[i], w)
		}
	}
	fetch := strings.Join(f.calls[3], " ")
	for _, s := range []string{"-C " + root, "core.hooksPath=/dev/null", "core.fsmonitor=false", "transfer.fsckObjects=true", "protocol.allow=never", "fetch --no-tags", "+refs/heads/*:refs/remotes/devbox/*"} {
		if !strings.Contains(fetch, s) {
			t.Errorf("host fetch %q lacks %q", fetch, s)
		}
	}

	// Not isolated, or no container: clear errors.
	f.answers["docker container inspect"] = inspectJSON(root, "PATH=/usr/bin")
	if _, err := Pull(context.Background(), PullOptions{Root: root, Docker: "docker", User: "dev", Run: f}); err == nil || !strings.Contains(err.Error(), "not in isolated mode") {
		t.Errorf("non-isolated container: %v", err)
	}
	f.answers["docker ps"] = ""
	if _, err := Pull(context.Background(), PullOptions{Root: root, Docker: "docker", User: "dev", Run: f}); err == nil || !strings.Contains(err.Error(), "no running dev container") {
		t.Errorf("no container: %v", err)
	}
	_ = fmt.Sprint()
}

// inspectJSON is `docker container inspect` of a running container with
// one variable set.
func inspectJSON(root, env string) string {
	return `[{"Id": "abc123", "Name": "/name", "Config": {"Env": ["` + env + `"],
  "Labels": {"devcontainer.local_folder": "` + root + `"}}, "State": {"Running": true}}]`
}
