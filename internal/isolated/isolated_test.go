package isolated

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/devbox-dev/devbox/internal/devboxtest"
	"github.com/devbox-dev/devbox/internal/workspace"
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

// hostRunner answers docker calls from a table (the container's side) and
// runs git for real (the host's side).
type hostRunner struct {
	fakeRunner
	bundle []byte
}

func (h *hostRunner) Output(ctx context.Context, env []string, name string, args ...string) ([]byte, error) {
	if name == "git" {
		h.calls = append(h.calls, append([]string{name}, args...))
		return workspace.ExecRunner{}.Output(ctx, env, name, args...)
	}
	if len(args) > 0 && args[0] == "exec" {
		h.calls = append(h.calls, append([]string{name}, args...))
		return h.bundle, nil
	}
	return h.fakeRunner.Output(ctx, env, name, args...)
}

func gitT(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// pullFixture makes the host's repository and the container's clone with
// two branches, and returns them.
func pullFixture(t *testing.T) (root, ctr string) {
	t.Helper()
	devboxtest.LookBinary(t, "git")
	t.Setenv("GIT_CONFIG_NOSYSTEM", "1")
	t.Setenv("GIT_CONFIG_GLOBAL", "/dev/null")
	t.Setenv("HOME", t.TempDir())
	for k, v := range map[string]string{"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@x.test", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@x.test"} {
		t.Setenv(k, v)
	}
	root, ctr = t.TempDir(), t.TempDir()
	gitT(t, root, "init", "-q", "-b", "main")
	gitT(t, root, "commit", "-q", "--allow-empty", "-m", "one")
	gitT(t, ctr, "clone", "-q", root, ".")
	gitT(t, ctr, "commit", "-q", "--allow-empty", "-m", "work")
	gitT(t, ctr, "branch", "topic")
	return root, ctr
}

func bundleOf(t *testing.T, ctr string) []byte {
	t.Helper()
	cmd := exec.Command("git", "bundle", "create", "-", "--branches")
	cmd.Dir = ctr
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func pull(t *testing.T, root string, bundle []byte) (*hostRunner, string, error) {
	h := &hostRunner{fakeRunner: fakeRunner{answers: map[string]string{
		"docker ps":                "abc123\tname\timage\tUp\n",
		"docker container inspect": inspectJSON(root, "DEVBOX_ISOLATED_WORKSPACE=/workspaces/repo"),
	}}, bundle: bundle}
	out, err := Pull(context.Background(), PullOptions{Root: root, Docker: "docker", User: "dev", Run: h})
	return h, out, err
}

// TestPull: the container is found by the CLI's label, git runs there as
// the agent's user, the bundle goes through a quarantine repository and
// git fsck --strict, and the host's git fetches from there with hooks and
// fsmonitor off into refs/remotes/devbox/.
func TestPull(t *testing.T) {
	root, ctr := pullFixture(t)
	h, out, err := pull(t, root, bundleOf(t, ctr))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "devbox/main ") || !strings.Contains(out, "devbox/topic ") || !strings.Contains(out, " work") {
		t.Errorf("out = %q", out)
	}
	want := [][]string{
		{"docker", "ps", "--filter", "label=devcontainer.local_folder=" + root, "--format", "{{.ID}}\t{{.Names}}\t{{.Image}}\t{{.Status}}"},
		{"docker", "container", "inspect", "abc123"},
		{"docker", "exec", "-u", "dev", "abc123", "git", "-C", "/workspaces/repo", "bundle", "create", "-", "--branches"},
	}
	for i, w := range want {
		if !slices.Equal(h.calls[i], w) {
			t.Errorf("call %d = %q, want %q", i, h.calls[i], w)
		}
	}
	var calls []string
	for _, c := range h.calls[3:] {
		calls = append(calls, strings.Join(c, " "))
	}
	all := strings.Join(calls, "\n")
	for _, s := range []string{"init --quiet --bare --template=", "bundle list-heads", "fsck --strict", "-C " + root, "core.hooksPath=/dev/null", "core.fsmonitor=false",
		"transfer.fsckObjects=true", "protocol.allow=never", "+refs/heads/*:refs/remotes/devbox/*"} {
		if !strings.Contains(all, s) {
			t.Errorf("host git calls lack %q:\n%s", s, all)
		}
	}
	if gitT(t, root, "rev-parse", "devbox/main") != gitT(t, ctr, "rev-parse", "main") {
		t.Errorf("devbox/main is not the container's main")
	}

	// Not isolated, or no container: clear errors.
	f := &fakeRunner{answers: map[string]string{"docker ps": "abc123\tname\timage\tUp\n", "docker container inspect": inspectJSON(root, "PATH=/usr/bin")}}
	if _, err := Pull(context.Background(), PullOptions{Root: root, Docker: "docker", User: "dev", Run: f}); err == nil || !strings.Contains(err.Error(), "not in isolated mode") {
		t.Errorf("non-isolated container: %v", err)
	}
	f.answers["docker ps"] = ""
	if _, err := Pull(context.Background(), PullOptions{Root: root, Docker: "docker", User: "dev", Run: f}); err == nil || !strings.Contains(err.Error(), "no running dev container") {
		t.Errorf("no container: %v", err)
	}
}

// TestPullFsck: a branch whose commit git fsck --strict rejects (a bad
// date) is refused and nothing lands; the control shows git 2.39's fetch
// from the same bundle, with fsckObjects on, lets it in.
func TestPullFsck(t *testing.T) {
	root, ctr := pullFixture(t)
	tree := gitT(t, ctr, "rev-parse", "HEAD^{tree}")
	cmd := exec.Command("git", "hash-object", "-t", "commit", "--literally", "-w", "--stdin")
	cmd.Dir = ctr
	cmd.Stdin = strings.NewReader("tree " + tree + "\nauthor t <t@x.test> notadate +0000\ncommitter t <t@x.test> 0 +0000\n\nbad\n")
	oid, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	gitT(t, ctr, "update-ref", "refs/heads/bad", strings.TrimSpace(string(oid)))
	b := bundleOf(t, ctr)
	if _, _, err := pull(t, root, b); err == nil || !strings.Contains(err.Error(), "fsck") {
		t.Errorf("a commit fsck rejects: %v", err)
	}
	if refs := gitT(t, root, "for-each-ref", "refs/remotes/"); refs != "" {
		t.Errorf("refs landed after a failed fsck: %s", refs)
	}
	// Control: the old way (fetch from the bundle with fsckObjects).
	other := t.TempDir()
	gitT(t, other, "init", "-q")
	bp := filepath.Join(t.TempDir(), "b.bundle")
	os.WriteFile(bp, b, 0o600)
	gitT(t, other, append(append([]string{}, HostGitArgs...), "fetch", "-q", bp, "+refs/heads/*:refs/remotes/x/*")...)
	if gitT(t, other, "rev-parse", "x/bad") != strings.TrimSpace(string(oid)) {
		t.Errorf("control: git's bundle fetch did not let the commit in")
	}
}

// TestPullRefNames: a ref name outside the safe set is refused by name.
func TestPullRefNames(t *testing.T) {
	root, ctr := pullFixture(t)
	b := bytes.Replace(bundleOf(t, ctr), []byte(" refs/heads/topic\n"), []byte(" refs/heads/--upload-pack=touch%x\n"), 1)
	if _, _, err := pull(t, root, b); err == nil || !strings.Contains(err.Error(), `"refs/heads/--upload-pack=touch%x"`) {
		t.Errorf("an unsafe ref name: %v", err)
	}
	if refs := gitT(t, root, "for-each-ref", "refs/remotes/"); refs != "" {
		t.Errorf("refs landed: %s", refs)
	}
}

// inspectJSON is `docker container inspect` of a running container with
// one variable set.
func inspectJSON(root, env string) string {
	return `[{"Id": "abc123", "Name": "/name", "Config": {"Env": ["` + env + `"],
  "Labels": {"devcontainer.local_folder": "` + root + `"}}, "State": {"Running": true}}]`
}
