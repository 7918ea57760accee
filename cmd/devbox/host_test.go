package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"

	"github.com/devbox-dev/devbox/internal/setuptoken"
)

// fakeEngine writes a stand-in for the docker CLI into a temporary
// directory: it logs each call's arguments (one line per call) and what
// `exec … devbox secret set` got on standard input, answers ps and
// container inspect for one dev container of repo, runs the setup-token
// script's program ($4 of sh -c SCRIPT PROGRAM) itself, and exits 7 for
// claude.
func fakeEngine(t *testing.T, repo string) (docker, dir string) {
	t.Helper()
	dir = t.TempDir()
	inspect := `[{"Id": "c0ffee", "Name": "/happy_dev",
  "Config": {"User": "root", "Env": ["PATH=/usr/bin"],
    "Labels": {"devcontainer.local_folder": "` + repo + `", "devcontainer.metadata": "[{\"remoteUser\":\"dev\"}]"}},
  "State": {"Running": true, "Status": "running"},
  "Mounts": [{"Type": "bind", "Source": "` + repo + `", "Destination": "/workspaces/repo"}]}]`
	os.WriteFile(filepath.Join(dir, "inspect"), []byte(inspect), 0o644)
	os.WriteFile(filepath.Join(dir, "ps"), []byte("c0ffee\thappy_dev\tvsc-repo\tUp 1 minute\n"), 0o644)
	script := `#!/bin/sh
d=` + dir + `
printf '%s\n' "$*" >> "$d/calls"
case "$1" in
ps) cat "$d/ps" ;;
container) cat "$d/inspect" ;;
exec)
	shift
	while test $# -gt 0; do case "$1" in -i|-t) shift;; -u|-w|-e) shift 2;; *) break;; esac; done
	shift
	case "$1" in
	/usr/local/bin/devbox) cat > "$d/stdin"; echo "secret $4 stored (fake)";;
	sh) test "$2" = -c && test -n "$4" && exec "$4" setup-token;;
	claude) exit 7;;
	esac;;
esac
`
	docker = filepath.Join(dir, "docker")
	if err := os.WriteFile(docker, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return docker, dir
}

// hostRepo is a repository whose policy names the Claude secret
// "claude-key" and a git secret "github".
func hostRepo(t *testing.T, credentials bool) string {
	t.Helper()
	repo := filepath.Join(t.TempDir(), "repo")
	os.MkdirAll(filepath.Join(repo, ".devcontainer"), 0o755)
	pol := `{"network": {"allow": ["api.anthropic.com:443", "github.com:443"]}}`
	if credentials {
		pol = `{"network": {"allow": ["api.anthropic.com:443", "github.com:443"]},
  "credentials": {"anthropic": {"secret": "claude-key"}, "git": [{"host": "github.com", "secret": "github", "repos": ["a/b"]}]}}`
	}
	if err := os.WriteFile(filepath.Join(repo, ".devcontainer", "devbox.policy.jsonc"), []byte(pol), 0o644); err != nil {
		t.Fatal(err)
	}
	return repo
}

// runHost runs devbox with stdin and returns stdout, stderr and the error
// (an ExitCoder is returned, not acted on).
func runHost(t *testing.T, stdin string, args ...string) (string, string, error) {
	t.Helper()
	if inContainer() {
		t.Skip("this test runs devbox's host commands; it is inside a devbox container")
	}
	var out, errOut strings.Builder
	app := newApp()
	app.Reader, app.Writer, app.ErrWriter = strings.NewReader(stdin), &out, &errOut
	app.ExitErrHandler = func(*cli.Context, error) {}
	err := app.Run(append([]string{"devbox"}, args...))
	return out.String(), errOut.String(), err
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, _ := os.ReadFile(path)
	return string(b)
}

// TestSecretFromHost: devbox secret set on the host pipes the value to
// `devbox secret set NAME` run as root in the workspace's container; the
// value is never an argument, and a name the policy does not use is
// refused before anything runs.
func TestSecretFromHost(t *testing.T) {
	repo := hostRepo(t, true)
	docker, dir := fakeEngine(t, repo)
	const value = "ghp_0123456789abcdefSECRET"
	out, _, err := runHost(t, value+"\n", "secret", "set", "--docker-path", docker, "--workspace-folder", repo, "github")
	if err != nil {
		t.Fatalf("secret set: %v", err)
	}
	calls := readFile(t, filepath.Join(dir, "calls"))
	if !strings.Contains(calls, "exec -i -u root c0ffee /usr/local/bin/devbox secret set github\n") || strings.Contains(calls, "SECRET") {
		t.Errorf("engine calls:\n%s", calls)
	}
	if got := readFile(t, filepath.Join(dir, "stdin")); got != value {
		t.Errorf("the container's devbox got %q on stdin, want %q", got, value)
	}
	if !strings.Contains(out, "secret github stored (fake)") {
		t.Errorf("output %q lacks the container's answer", out)
	}

	os.Remove(filepath.Join(dir, "calls"))
	_, _, err = runHost(t, value, "secret", "set", "--docker-path", docker, "--workspace-folder", repo, "gihtub")
	if err == nil || !strings.Contains(err.Error(), `secret "gihtub" is not in the policy`) || !strings.Contains(err.Error(), "claude-key, github") {
		t.Errorf("unknown name: %v", err)
	}
	if calls := readFile(t, filepath.Join(dir, "calls")); calls != "" {
		t.Errorf("an unknown name still ran the engine:\n%s", calls)
	}

	if _, _, err := runHost(t, "", "secret", "list", "--docker-path", docker, "--workspace-folder", repo); err != nil {
		t.Errorf("secret list: %v", err)
	}
	if calls := readFile(t, filepath.Join(dir, "calls")); !strings.Contains(calls, "exec -u root c0ffee /usr/local/bin/devbox secret list\n") {
		t.Errorf("secret list ran:\n%s", calls)
	}

	// No container for this folder: the error names devbox up.
	os.WriteFile(filepath.Join(dir, "ps"), nil, 0o644)
	_, _, err = runHost(t, value, "secret", "set", "--docker-path", docker, "--workspace-folder", repo, "github")
	if err == nil || !strings.Contains(err.Error(), "no running dev container for "+repo) || !strings.Contains(err.Error(), "devbox up") {
		t.Errorf("no container: %v", err)
	}
}

// TestLoginPaste: devbox login stores what is pasted under the name the
// policy's credentials.anthropic gives.
func TestLoginPaste(t *testing.T) {
	repo := hostRepo(t, true)
	docker, dir := fakeEngine(t, repo)
	const key = "sk-ant-api03-PASTEDKEY0123456789"
	out, errOut, err := runHost(t, key+"\n", "login", "--docker-path", docker, "--workspace-folder", repo)
	if err != nil {
		t.Fatalf("login: %v\n%s", err, errOut)
	}
	if calls := readFile(t, filepath.Join(dir, "calls")); !strings.Contains(calls, "exec -i -u root c0ffee /usr/local/bin/devbox secret set claude-key\n") || strings.Contains(calls, "PASTEDKEY") {
		t.Errorf("engine calls:\n%s", calls)
	}
	if got := readFile(t, filepath.Join(dir, "stdin")); got != key {
		t.Errorf("stored %q, want %q", got, key)
	}
	if strings.Contains(out+errOut, "PASTEDKEY") || !strings.Contains(out, "devbox claude") {
		t.Errorf("output:\n%s%s", out, errOut)
	}

	// A policy without credentials.anthropic: login says what to add.
	bare := hostRepo(t, false)
	docker, _ = fakeEngine(t, bare)
	_, _, err = runHost(t, key, "login", "--docker-path", docker, "--workspace-folder", bare)
	if err == nil || !strings.Contains(err.Error(), "has no credentials.anthropic") || !strings.Contains(err.Error(), `"credentials": {"anthropic": {"secret": "anthropic"}}`) {
		t.Errorf("no credentials.anthropic: %v", err)
	}
}

// TestLoginSetupToken runs the setup-token path against the stand-in
// program (testdata/setup-token-standin.sh, run by the fake engine in
// place of the container's claude): the user sees the URL, types the code,
// and the token goes to the store and never to the screen.
func TestLoginSetupToken(t *testing.T) {
	repo := hostRepo(t, true)
	docker, dir := fakeEngine(t, repo)
	standIn, _ := filepath.Abs("testdata/setup-token-standin.sh")
	const token = "sk-ant-oat01-HostTest_0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ-0123456789abcdefZZ"
	t.Setenv("STANDIN_TOKEN", token)
	out, errOut, err := runHost(t, "CODE-42#s1\n", "login", "--setup-token", "--claude-path", standIn, "--docker-path", docker, "--workspace-folder", repo)
	if err != nil {
		t.Fatalf("login --setup-token: %v\nstdout:\n%s\nstderr:\n%s", err, out, errOut)
	}
	calls := readFile(t, filepath.Join(dir, "calls"))
	if !strings.Contains(calls, "exec -i -t -u root c0ffee sh -c "+setupTokenScript+" "+standIn+"\n") {
		t.Errorf("the sign-in did not run as root on a terminal with a throwaway HOME:\n%s", calls)
	}
	if got := readFile(t, filepath.Join(dir, "stdin")); got != token {
		t.Errorf("stored %q, want the stand-in's token", got)
	}
	screen := out + errOut
	for _, want := range []string{"https://claude.test/oauth/authorize", setuptoken.Shown, "devbox claude"} {
		if !strings.Contains(screen, want) {
			t.Errorf("screen lacks %q:\n%s", want, screen)
		}
	}
	if strings.Contains(screen, "HostTest_") || strings.Contains(calls, "HostTest_") {
		t.Errorf("the token reached the screen or an argument:\nscreen:\n%s\ncalls:\n%s", screen, calls)
	}
	t.Logf("screen:\n%s", screen)

	// A wrong code: the stand-in fails and nothing is stored.
	os.Remove(filepath.Join(dir, "stdin"))
	_, _, err = runHost(t, "wrong\n", "login", "--setup-token", "--claude-path", standIn, "--docker-path", docker, "--workspace-folder", repo)
	if err == nil || !strings.Contains(err.Error(), "nothing was stored") {
		t.Errorf("wrong code: %v", err)
	}
	if _, serr := os.Stat(filepath.Join(dir, "stdin")); serr == nil {
		t.Errorf("a failed sign-in stored something")
	}
}

// TestClaudeFromHost: devbox claude passes every argument to Claude Code,
// runs it as the remote user in the workspace folder, and exits with its
// status.
func TestClaudeFromHost(t *testing.T) {
	repo := hostRepo(t, true)
	docker, dir := fakeEngine(t, repo)
	_, _, err := runHost(t, "", "claude", "--docker-path", docker, "--workspace-folder", repo, "-p", "hi", "--output-format", "json")
	var ec cli.ExitCoder
	if !errors.As(err, &ec) || ec.ExitCode() != 7 {
		t.Fatalf("devbox claude: %v, want exit status 7 passed through", err)
	}
	if calls := readFile(t, filepath.Join(dir, "calls")); !strings.Contains(calls, "exec -i -u dev -w /workspaces/repo c0ffee claude -p hi --output-format json\n") {
		t.Errorf("engine calls:\n%s", calls)
	}
	if _, rest, err := attachArgs([]string{"--container=x", "--", "--container", "y"}); err != nil || strings.Join(rest, " ") != "--container y" {
		t.Errorf("after --, arguments are the command's: %q, %v", rest, err)
	}
}

// TestUpWithoutDevcontainerCLI: devbox up says how to install the Dev
// Containers CLI before it changes anything.
func TestUpWithoutDevcontainerCLI(t *testing.T) {
	repo := t.TempDir()
	t.Setenv("PATH", t.TempDir())
	_, _, err := runHost(t, "", "up", "--workspace-folder", repo, "--devcontainer-cli", "devcontainer")
	if err == nil || !strings.Contains(err.Error(), "npm install -g @devcontainers/cli") {
		t.Fatalf("up without the CLI: %v", err)
	}
	if ents, _ := os.ReadDir(repo); len(ents) != 0 {
		t.Errorf("up without the CLI wrote %d files", len(ents))
	}
	t.Logf("%v", err)
}

// TestSetupTokenScriptLeavesTheWorkspace runs the script the container
// runs as root, from a directory standing in for the workspace: the
// program starts in the throwaway directory (its HOME), never in the
// workspace whose project settings the agent writes, and the directory
// is gone afterwards.
func TestSetupTokenScriptLeavesTheWorkspace(t *testing.T) {
	ws := t.TempDir()
	prog := filepath.Join(t.TempDir(), "claude")
	if err := os.WriteFile(prog, []byte("#!/bin/sh\necho \"$(pwd)|$HOME|$CLAUDE_CONFIG_DIR|$1\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sh", "-c", setupTokenScript, prog)
	cmd.Dir = ws
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	f := strings.Split(strings.TrimSpace(string(out)), "|")
	if len(f) != 4 || f[0] == ws || f[0] != f[1] || f[1] != f[2] || f[3] != "setup-token" {
		t.Fatalf("the program ran with pwd|HOME|CLAUDE_CONFIG_DIR|arg = %q (workspace %s)", out, ws)
	}
	if _, err := os.Stat(f[0]); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the throwaway directory %s is left: %v", f[0], err)
	}
}
