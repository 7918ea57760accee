package workspace

import (
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/devbox-dev/devbox/internal/devboxtest"
	"github.com/devbox-dev/devbox/internal/policy"
)

// fakeEngine answers engine commands from a table keyed by the command's
// first words; a key missing from the table is a failed command.
type fakeEngine struct {
	calls   [][]string
	answers map[string]string
	errs    map[string]error
}

func (f *fakeEngine) Output(_ context.Context, _ []string, name string, args ...string) ([]byte, error) {
	call := append([]string{name}, args...)
	f.calls = append(f.calls, call)
	line := strings.Join(call, " ")
	for k, err := range f.errs {
		if strings.HasPrefix(line, k) {
			return nil, err
		}
	}
	for k, v := range f.answers {
		if strings.HasPrefix(line, k) {
			return []byte(v), nil
		}
	}
	return nil, &CommandError{Args: call, Err: errors.New("exit status 1"), Stderr: "unexpected"}
}

// inspectJSON is what `docker container inspect` prints for a dev
// container the Dev Containers CLI started for root in bind mode.
func inspectJSON(root string, running bool) string {
	state := `"Running": true, "Status": "running"`
	if !running {
		state = `"Running": false, "Status": "exited"`
	}
	return `[{"Id": "abc123def", "Name": "/eager_turing",
  "Config": {"User": "root", "Env": ["PATH=/usr/bin", "CLAUDE_CONFIG_DIR=/home/dev/.claude"],
    "Labels": {"devcontainer.local_folder": "` + root + `",
      "devcontainer.metadata": "[{\"containerUser\":\"root\",\"remoteUser\":\"node\"},{\"remoteUser\":\"dev\",\"remoteEnv\":{\"EDITOR\":\"vi\",\"P\":\"${containerEnv:PATH}:/x\"}}]"}},
  "State": {` + state + `},
  "Mounts": [{"Type": "volume", "Source": "/var/lib/docker/volumes/x", "Destination": "/home/dev/.claude"},
    {"Type": "bind", "Source": "` + root + `", "Destination": "/workspaces/app"}]}]`
}

func TestFind(t *testing.T) {
	root := filepath.Join(t.TempDir(), "repo")
	ps := "docker ps --filter label=devcontainer.local_folder=" + root
	f := &fakeEngine{answers: map[string]string{
		ps:                         "abc123def\teager_turing\tvsc-repo-1\tUp 2 minutes\n",
		"docker container inspect": inspectJSON(root, true),
	}}
	c, err := Find(context.Background(), FindOptions{Folder: root, Docker: "docker", Run: f})
	if err != nil {
		t.Fatal(err)
	}
	want := Container{ID: "abc123def", Name: "eager_turing", LocalFolder: root, RemoteUser: "dev",
		RemoteEnv: []string{"EDITOR=vi"}, WorkspaceFolder: "/workspaces/app",
		Env: []string{"PATH=/usr/bin", "CLAUDE_CONFIG_DIR=/home/dev/.claude"}}
	if !equalContainer(c, want) {
		t.Errorf("Find = %+v\nwant %+v", c, want)
	}
	if got := c.ExecArgs(ExecOptions{Stdin: true, TTY: true}, "claude", "-p", "hi"); !slices.Equal(got,
		[]string{"exec", "-i", "-t", "-u", "dev", "-w", "/workspaces/app", "-e", "EDITOR=vi", "abc123def", "claude", "-p", "hi"}) {
		t.Errorf("ExecArgs(remote user) = %q", got)
	}
	if got := c.ExecArgs(ExecOptions{User: "root", Stdin: true}, "devbox", "secret", "list"); !slices.Equal(got,
		[]string{"exec", "-i", "-u", "root", "abc123def", "devbox", "secret", "list"}) {
		t.Errorf("ExecArgs(root) = %q: root gets neither the remote user's env nor its folder", got)
	}

	// Isolated mode: the workspace is the volume the variable names.
	f.answers["docker container inspect"] = strings.Replace(inspectJSON(root, true), `"PATH=/usr/bin"`, `"PATH=/usr/bin", "DEVBOX_ISOLATED_WORKSPACE=/workspaces/repo"`, 1)
	if c, err := Find(context.Background(), FindOptions{Folder: root, Docker: "docker", Run: f}); err != nil || c.WorkspaceFolder != "/workspaces/repo" {
		t.Errorf("isolated: workspace %q, %v", c.WorkspaceFolder, err)
	}
}

func equalContainer(a, b Container) bool {
	return a.ID == b.ID && a.Name == b.Name && a.LocalFolder == b.LocalFolder && a.RemoteUser == b.RemoteUser &&
		slices.Equal(a.RemoteEnv, b.RemoteEnv) && a.WorkspaceFolder == b.WorkspaceFolder && slices.Equal(a.Env, b.Env)
}

// TestFindErrors: each way of not finding one container says what to do.
func TestFindErrors(t *testing.T) {
	root := filepath.Join(t.TempDir(), "repo")
	ps := "docker ps --filter label=devcontainer.local_folder=" + root
	for _, tc := range []struct {
		name      string
		container string
		f         *fakeEngine
		want      []string
	}{
		{"none", "", &fakeEngine{answers: map[string]string{ps: ""}},
			[]string{"no running dev container for " + root, "start one with `devbox up`"}},
		{"several", "", &fakeEngine{answers: map[string]string{ps: "aaa111\tone\timg\tUp 1 minute\nbbb222\ttwo\timg\tUp 2 minutes\n"}},
			[]string{"2 dev containers run for " + root, "--container ID", "aaa111", "one", "bbb222", "two"}},
		{"engine unreachable", "", &fakeEngine{errs: map[string]error{ps: &CommandError{Args: []string{"docker", "ps"}, Err: errors.New("exit status 1"),
			Stderr: "Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?"}}},
			[]string{"cannot reach the container engine", "Cannot connect to the Docker daemon"}},
		{"engine missing", "", &fakeEngine{errs: map[string]error{ps: &exec.Error{Name: "docker", Err: exec.ErrNotFound}}},
			[]string{`the container engine "docker" is not installed`, "--docker-path"}},
		{"--container stopped", "abc123def", &fakeEngine{answers: map[string]string{"docker container inspect": inspectJSON(root, false)}},
			[]string{"eager_turing is exited", "devbox up"}},
		{"--container unknown", "nope", &fakeEngine{errs: map[string]error{"docker container inspect": &CommandError{Args: []string{"docker", "container", "inspect", "nope"},
			Err: errors.New("exit status 1"), Stderr: "Error: No such container: nope"}}},
			[]string{"--container nope", "no such container"}},
	} {
		_, err := Find(context.Background(), FindOptions{Folder: root, Container: tc.container, Docker: "docker", Run: tc.f})
		if err == nil {
			t.Errorf("%s: no error", tc.name)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q lacks %q", tc.name, err, w)
			}
		}
		t.Logf("%s: %v", tc.name, err)
	}
}

// TestFindEngineUnreachable runs the real docker CLI against a socket
// nobody listens on.
func TestFindEngineUnreachable(t *testing.T) {
	docker := devboxtest.LookBinary(t, "docker")
	t.Setenv("DOCKER_HOST", "unix://"+filepath.Join(t.TempDir(), "nobody.sock"))
	_, err := Find(context.Background(), FindOptions{Folder: t.TempDir(), Docker: docker, Run: ExecRunner{}})
	if err == nil || !strings.Contains(err.Error(), "cannot reach the container engine") || !strings.Contains(err.Error(), "nobody.sock") {
		t.Fatalf("Find with no daemon: %v", err)
	}
	t.Logf("real docker CLI, no daemon: %v", err)
}

func TestEngine(t *testing.T) {
	on := func(names ...string) func(string) (string, error) {
		return func(n string) (string, error) {
			if slices.Contains(names, n) {
				return "/usr/bin/" + n, nil
			}
			return "", exec.ErrNotFound
		}
	}
	for _, tc := range []struct {
		flag    string
		path    []string
		want    string
		wantErr string
	}{
		{"", []string{"docker", "podman"}, "docker", ""},
		{"", []string{"podman"}, "podman", ""},
		{"podman", []string{"docker", "podman"}, "podman", ""},
		{"", nil, "", "neither docker nor podman"},
		{"/opt/docker", nil, "", `"/opt/docker" (--docker-path or DEVBOX_DOCKER_PATH) is not found`},
	} {
		got, err := Engine(tc.flag, on(tc.path...))
		if got != tc.want || (tc.wantErr == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("Engine(%q) with %q on the PATH = %q, %v; want %q, %q", tc.flag, tc.path, got, err, tc.want, tc.wantErr)
		}
	}
}

func TestCheckSecret(t *testing.T) {
	p, err := policy.Parse("repo/.devcontainer/devbox.policy.jsonc", []byte(`{
  "network": {"allow": ["api.anthropic.com:443", "github.com:443"]},
  "credentials": {"anthropic": {"secret": "anthropic"}, "git": [{"host": "github.com", "secret": "github", "repos": ["a/b"]}]}
}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckSecret(p, "github"); err != nil {
		t.Errorf("github: %v", err)
	}
	err = CheckSecret(p, "anthropc")
	if err == nil || !strings.Contains(err.Error(), `secret "anthropc" is not in the policy`) || !strings.Contains(err.Error(), "names anthropic, github") {
		t.Errorf("typo: %v", err)
	}
	bare, err := policy.Parse("p.jsonc", []byte(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckSecret(bare, "anthropic"); err == nil || !strings.Contains(err.Error(), "has no credentials section") {
		t.Errorf("no credentials: %v", err)
	}
}
