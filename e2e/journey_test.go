package e2e

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/containerd/console"

	"github.com/devbox-dev/devbox/internal/layout"
	"github.com/devbox-dev/devbox/internal/secrets"
	"github.com/devbox-dev/devbox/internal/setuptoken"
	"github.com/devbox-dev/devbox/internal/workspace"
)

// fakeAnthropic serves the fake Messages API for api.anthropic.test over
// TLS at host 250 of the world's network, accepting key only, from the
// base image; the dev containers trust the test CA (w.env, w.mounts, set
// before the repository's devcontainer.json is written). It returns the
// server's log.
func fakeAnthropic(t *testing.T, e env, w *world, key string) func() string {
	t.Helper()
	dir := tlsDir(t, "api.anthropic.test")
	if w.env == nil {
		w.env = map[string]string{}
	}
	w.env["SSL_CERT_FILE"] = testCAPath
	w.mounts = append(w.mounts, "source="+filepath.Join(dir, "ca.pem")+",target="+testCAPath+",type=bind,readonly")
	name := w.Net + "-api"
	e.d.Run(t, "run", "-d", "--name", name, "--network", w.Net, "--ip", w.IP(250),
		"-v", e.worldd+":/usr/local/bin/worldd:ro", "-v", dir+":/world:ro", e.base,
		"/usr/local/bin/worldd", "-addr", w.IP(250), "-tcp", "", "-udp", "",
		"-tls-cert", "/world/cert.pem", "-tls-key", "/world/key.pem",
		"-api-host", "api.anthropic.test", "-api-key", key)
	t.Cleanup(func() { e.d.Command(context.Background(), "rm", "-f", name).Run() })
	logs := func() string {
		out, _ := e.d.Command(context.Background(), "logs", name).CombinedOutput()
		return string(out)
	}
	waitFor(t, 30*time.Second, name+" ready", func() (bool, string) {
		l := logs()
		return strings.Contains(l, "worldd: ready"), l
	})
	return logs
}

// TestJourney walks a user's first session from the host, with the
// commands the README's quickstart gives: devbox up, devbox login (a
// setup-token sign-in through a stand-in for Claude Code's, then a pasted
// API key), devbox claude against the world's fake Messages API, Claude
// Code's state written (an MCP server, settings, the session) and kept
// across a rebuild, and the agent never able to read the credential.
func TestJourney(t *testing.T) {
	start := time.Now()
	e := setup(t)
	// The user's devbox is the one from the release archive (issue 21:
	// installing needs no Go toolchain), not the tests' own build.
	e.devbox, _ = releaseBinary(t)
	lock, _ := claudeNPM(t)
	apiKey := "sk-ant-api03-" + randHex(16)
	oauth := setuptoken.TokenPrefix + "01-" + randHex(40)
	secretBytes := []string{apiKey, strings.TrimPrefix(apiKey, "sk-ant-api03-"), oauth, strings.TrimPrefix(oauth, setuptoken.TokenPrefix+"01-")}

	w := startWorld(t, e.d, e.base, e.worldd, func(w *world) []string {
		return []string{"api.anthropic.test A 60 " + w.IP(250), "git.test A 60 " + w.IP(250)}
	})
	apiLog := fakeAnthropic(t, e, w, apiKey)
	w.env["CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"] = "1"
	// The same policy as TestCredentials: its image is already built when
	// that test ran first on this daemon.
	repo := repoWithPolicy(t, e, w, "", credentialsPolicy(e, lock.ClaudeCode.Version))

	// devbox as the user runs it on the host, in the repository: the
	// engine and the Dev Containers CLI found through the variables
	// scripts/test exports, devbox on the PATH for the initializeCommand.
	var outputs []string
	devbox := func(stdin string, args ...string) (string, error) {
		cmd := exec.Command(e.devbox, args...)
		cmd.Dir = repo
		cmd.Env = append(e.d.Env(), "PATH="+filepath.Dir(e.devbox)+string(os.PathListSeparator)+os.Getenv("PATH"),
			workspace.DockerPathEnv+"="+e.d.Path, "DEVBOX_DEVCONTAINER_CLI="+e.dcli)
		cmd.Stdin = strings.NewReader(stdin)
		out, err := cmd.CombinedOutput()
		outputs = append(outputs, string(out))
		return string(out), err
	}
	must := func(stdin string, args ...string) string {
		t.Helper()
		out, err := devbox(stdin, args...)
		if err != nil {
			t.Fatalf("devbox %s: %v\n%s", strings.Join(args, " "), err, tail(out))
		}
		return out
	}
	// container returns the running dev container for the repository,
	// removed with its volumes at the end.
	container := func() string {
		t.Helper()
		id := e.d.Run(t, "ps", "-q", "--no-trunc", "--filter", "label="+workspace.LocalFolderLabel+"="+repo)
		if id == "" || strings.Contains(id, "\n") {
			t.Fatalf("want one running container for %s, got %q", repo, id)
		}
		vols, _ := e.d.Command(context.Background(), "inspect", "--format",
			`{{range .Mounts}}{{if eq .Type "volume"}}{{.Name}} {{end}}{{end}}`, id).Output()
		t.Cleanup(func() {
			e.d.Command(context.Background(), "rm", "-f", id).Run()
			for _, v := range strings.Fields(string(vols)) {
				if strings.HasPrefix(v, "devbox-") {
					e.d.Command(context.Background(), "volume", "rm", v).Run()
				}
			}
		})
		return id
	}

	// 1. devbox up.
	step := time.Now()
	out := must("", "up")
	id := container()
	requireFenced(t, e.d, id, "")
	if !strings.Contains(out, "fence: fenced") || !strings.Contains(out, "devbox claude") || !strings.Contains(out, "devbox login") {
		t.Errorf("devbox up did not say the container is fenced and how to attach:\n%s", tail(out))
	}
	t.Logf("devbox up: %.1f s; it printed:\n%s", time.Since(step).Seconds(), lastLines(out, 6))

	// 2. devbox login --setup-token, with a stand-in for Claude Code's
	// sign-in in root's home (the agent cannot read it, nor the token in
	// it): the user types the code, the token goes to the store only.
	standIn, err := os.ReadFile("../cmd/devbox/testdata/setup-token-standin.sh")
	if err != nil {
		t.Fatal(err)
	}
	install := e.d.Command(context.Background(), "exec", "-i", "-u", "root", id, "sh", "-c", "umask 077 && cat > /root/standin-claude && chmod 700 /root/standin-claude")
	install.Stdin = strings.NewReader(strings.Replace(string(standIn), `"${STANDIN_TOKEN:-`, `"${STANDIN_TOKEN:-`+oauth+`}" #`, 1))
	if b, err := install.CombinedOutput(); err != nil {
		t.Fatalf("installing the stand-in: %v\n%s", err, b)
	}
	out = must("CODE-42#s1\n", "login", "--setup-token", "--claude-path", "/root/standin-claude")
	if !strings.Contains(out, "https://claude.test/oauth/authorize") || !strings.Contains(out, setuptoken.Shown) {
		t.Errorf("devbox login --setup-token did not show the sign-in and the redacted token:\n%s", out)
	}
	list := must("", "secret", "list")
	if !strings.Contains(list, secrets.Fingerprint([]byte(oauth))) {
		t.Errorf("after login --setup-token the store lacks the token (fingerprint %s):\n%s", secrets.Fingerprint([]byte(oauth)), list)
	}
	if left := e.d.Run(t, "exec", "-u", "root", id, "sh", "-c", "ls -d /root/.devbox-login.* /tmp/tmp.* 2>/dev/null; true"); left != "" {
		t.Errorf("the sign-in's throwaway home is left behind: %s", left)
	}
	t.Logf("devbox login --setup-token (stand-in): the screen showed\n%s\nsecret list:\n%s", lastLines(out, 8), list)

	// 3. devbox login, the paste path: the API key on standard input.
	out = must(apiKey+"\n", "login")
	list = must("", "secret", "list")
	if !strings.Contains(list, secrets.Fingerprint([]byte(apiKey))) {
		t.Fatalf("after devbox login the store lacks the key (fingerprint %s):\n%s", secrets.Fingerprint([]byte(apiKey)), list)
	}
	t.Logf("devbox login (pasted key): %s", lastLines(out, 2))

	// 4. devbox claude -p: the fake API's reply, and the fake API saw the
	// stored key.
	claude := func(what string) {
		t.Helper()
		step := time.Now()
		before := strings.Count(apiLog(), "api POST")
		out, err := devbox("", "claude", "-p", "say hello", "--output-format", "json")
		var res struct {
			Result  string `json:"result"`
			IsError bool   `json:"is_error"`
		}
		i := strings.IndexByte(out, '{')
		if err != nil || i < 0 || json.Unmarshal([]byte(out[i:]), &res) != nil || res.IsError || !strings.Contains(res.Result, "hello from the world's Messages API") {
			t.Fatalf("%s: devbox claude -p: %v\n%s\nfake API:\n%s", what, err, out, apiLog())
		}
		n := 0
		for _, line := range strings.Split(apiLog(), "\n") {
			if strings.HasPrefix(line, "api POST") {
				n++
				if n > before && !strings.Contains(line, `x-api-key=["`+apiKey+`"]`) {
					t.Errorf("%s: the fake API saw %q, want the stored key", what, line)
				}
			}
		}
		if n == before {
			t.Fatalf("%s: the fake API saw no request", what)
		}
		t.Logf("%s: devbox claude -p: result %q in %.1f s; the fake API saw %d requests with the stored key", what, res.Result, time.Since(step).Seconds(), n-before)
	}
	claude("first start")

	// devbox up again: the running container is reused.
	step = time.Now()
	must("", "up")
	if again := container(); again != id {
		t.Errorf("devbox up with the container running started another: %s, was %s", again[:12], id[:12])
	}
	t.Logf("devbox up, container running (reused): %.1f s", time.Since(step).Seconds())

	// 5. Claude Code's state: an MCP server (claude mcp add writes
	// $CLAUDE_CONFIG_DIR/.claude.json), settings written as the remote
	// user (as /config does), and the session claude -p recorded.
	must("", "claude", "mcp", "add", "-s", "user", "journey", "--", "/bin/true")
	must("", "shell", "--", "sh", "-c", `printf '{"env": {"JOURNEY": "kept"}}\n' > "$CLAUDE_CONFIG_DIR/settings.json"`)
	state := `cat "$CLAUDE_CONFIG_DIR/settings.json" && echo "sessions: $(ls "$CLAUDE_CONFIG_DIR"/projects/*/*.jsonl 2>/dev/null | wc -l)"`
	before := must("", "shell", "--", "sh", "-c", state)
	if strings.Contains(before, "sessions: 0") {
		t.Errorf("claude -p recorded no session in $CLAUDE_CONFIG_DIR/projects:\n%s", before)
	}
	t.Logf("Claude Code's state before the rebuild:\n%s", before)

	// devbox claude on a terminal: Claude Code's first screen (a new
	// container's onboarding, then the folder-trust question).
	took, screen := firstScreen(t, repo, e, "claude", "Welcome to Claude Code", "trust this folder", "for shortcuts")
	t.Logf("devbox claude on a terminal: Claude Code's first screen after %.1f s:\n%s", took.Seconds(), strings.ToValidUTF8(screen[:min(len(screen), 300)], ""))

	// 6. The container rebuilt: the state, the secret and the login stay.
	step = time.Now()
	out = must("", "up", "--rebuild")
	id2 := container()
	if id2 == id {
		t.Fatalf("devbox up --rebuild kept container %s", id[:12])
	}
	requireFenced(t, e.d, id2, "")
	t.Logf("devbox up --rebuild: %.1f s", time.Since(step).Seconds())
	if got := must("", "claude", "mcp", "get", "journey"); !strings.Contains(got, "/bin/true") {
		t.Errorf("after the rebuild, claude mcp get journey:\n%s", got)
	}
	if after := must("", "shell", "--", "sh", "-c", state); after != before || !strings.Contains(after, `"JOURNEY": "kept"`) {
		t.Errorf("after the rebuild, Claude Code's state is\n%s\nwant\n%s", after, before)
	}
	claude("after the rebuild")

	// 7. The agent (the remote user) still cannot read the secret.
	for _, argv := range [][]string{
		{"cat", layout.SecretsDir + "/anthropic"},
		{"ls", layout.SecretsDir},
		{"devbox", "secret", "list"},
	} {
		if out, err := devbox("", append([]string{"shell", "--"}, argv...)...); err == nil {
			t.Errorf("as the agent, %s succeeded:\n%s", strings.Join(argv, " "), out)
		}
	}
	grep := []string{"shell", "--", "grep", "-rsIlF", "-e", secretBytes[1], "-e", secretBytes[3], "/home", "/tmp", "/etc", "/run", "/var/log", "/workspaces"}
	if out, _ := devbox("", grep...); strings.TrimSpace(out) != "" {
		t.Errorf("files the agent can read hold the credential:\n%s", out)
	}
	for _, o := range outputs {
		for _, s := range secretBytes {
			if strings.Contains(o, s) {
				t.Errorf("an output of devbox holds a credential:\n%s", o)
			}
		}
	}
	t.Logf("TestJourney: %d devbox commands, none printed a credential; %.1f s", len(outputs), time.Since(start).Seconds())
}

// firstScreen runs devbox ARGS in repo on a new pseudo-terminal and
// returns how long it took until the output holds one of want (the
// words of a screen, escape sequences and cursor moves taken out), and
// that output. The command is then ended.
func firstScreen(t *testing.T, repo string, e env, arg string, want ...string) (time.Duration, string) {
	t.Helper()
	master, slavePath, err := console.NewPty()
	if err != nil {
		t.Fatal(err)
	}
	defer master.Close()
	master.Resize(console.WinSize{Width: 120, Height: 40})
	slave, err := os.OpenFile(slavePath, os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(e.devbox, arg)
	cmd.Dir = repo
	cmd.Env = append(e.d.Env(), workspace.DockerPathEnv+"="+e.d.Path, "TERM=xterm-256color")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	slave.Close()
	defer func() {
		cmd.Process.Kill()
		cmd.Wait()
	}()
	var raw []byte
	var words string
	got := make(chan time.Duration, 1)
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := master.Read(buf)
			raw = append(raw, buf[:n]...)
			words = screenWords(raw)
			ok := false
			for _, w := range want {
				ok = ok || strings.Contains(words, w)
			}
			if ok {
				got <- time.Since(start)
				return
			}
			if err != nil {
				close(got)
				return
			}
		}
	}()
	select {
	case d, ok := <-got:
		if !ok {
			t.Fatalf("devbox %s ended before its screen showed %q:\n%s", arg, want, words)
		}
		return d, words
	case <-time.After(90 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("devbox %s: no screen with %q after 90 s", arg, want)
	}
	return 0, ""
}

// screenWords is a terminal's output with escape sequences (CSI, OSC,
// charset selections) replaced by spaces: Ink moves the cursor between
// words.
var escapes = regexp.MustCompile(`\x1b(\[[0-9;?<>=]*[ -/]*[@-~]|\][^\x07\x1b]*(\x07|\x1b\\)|[()][0-9A-Za-z]|[78=>])`)

func screenWords(raw []byte) string {
	s := escapes.ReplaceAllString(string(raw), " ")
	return strings.Join(strings.Fields(s), " ")
}

// lastLines is the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
