package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/devbox-dev/devbox/internal/layout"
	"github.com/devbox-dev/devbox/internal/policy"
	"github.com/devbox-dev/devbox/internal/sandbox"
	"github.com/devbox-dev/devbox/internal/testworld"
)

// The test CA's certificate inside the dev container: the credential
// gateway verifies the world's HTTPS servers against it (SSL_CERT_FILE,
// which the fence passes to the gateway).
const testCAPath = "/etc/devbox-test-ca.pem"

// credentialsPolicy is the sample policy with Claude Code (the version the
// feature package pins, which scripts/services also installs) and the two
// protected hosts, both served by the world's HTTPS server.
func credentialsPolicy(e env, claude string) string {
	return fmt.Sprintf(`// e2e credentials policy
{
  "image": {"base": %q, "user": {"name": "dev", "uid": 1000, "gid": 1000}, "tag": %q},
  "agent": {"claudeCode": %q},
  "network": {
    "allow": ["allowed.test:8080", "api.anthropic.test:443", "git.test:443"],
    "log": {"blocked": true},
  },
  "credentials": {
    "anthropic": {"secret": "anthropic", "host": "api.anthropic.test"},
    "git": [{"host": "git.test", "secret": "github", "repos": ["acme/app"], "push": true}],
  },
}
`, e.base, e.registry+"/devbox/e2e:unused", claude)
}

// TestCredentials is the credential gateway end to end: `devcontainer up`
// with a credentials policy, the secrets set from the host through
// `docker exec -i -u root … devbox secret set`, then Claude Code, git clone
// and git push as the remote user through the gateway, against a world
// serving the fake Messages API and a git smart-HTTP server over TLS with a
// test CA; and what the agent must not get: the secret, a push to an
// unlisted repository, a direct connection to a protected host.
func TestCredentials(t *testing.T) {
	start := time.Now()
	e := setup(t)
	// `devbox lock` (here and in the initializeCommand) reads the pins
	// from a loopback registry; only the image build fetches the tarball,
	// from the pinned npm URL, checked against the pinned sha512.
	lock, npmHits := claudeNPM(t)
	apiKey := "sk-ant-api03-" + randHex(16)
	gitToken := "ghp_" + randHex(16)
	secretBytes := []string{apiKey, gitToken, strings.TrimPrefix(apiKey, "sk-ant-api03-"), strings.TrimPrefix(gitToken, "ghp_")}

	// Host 250 of the world's network is the HTTPS server for both names.
	w := startWorld(t, e.d, e.base, e.worldd, func(w *world) []string {
		return []string{"api.anthropic.test A 60 " + w.IP(250), "git.test A 60 " + w.IP(250)}
	})
	https := w.IP(250)
	worldDir := tlsDir(t, "api.anthropic.test", "git.test")
	w.env = map[string]string{"SSL_CERT_FILE": testCAPath}
	w.mounts = []string{"source=" + filepath.Join(worldDir, "ca.pem") + ",target=" + testCAPath + ",type=bind,readonly"}

	repo := repoWithPolicy(t, e, w, "", credentialsPolicy(e, lock.ClaudeCode.Version))
	if l, err := policy.ReadLock(filepath.Join(repo, ".devcontainer", "devbox.lock.json")); err != nil || npmHits.Load() == 0 ||
		l.ClaudeCode.Platforms["linux/amd64"] != lock.ClaudeCode.Platforms["linux/amd64"] {
		t.Fatalf("the repository's lock (%v, %d requests to the loopback registry) does not pin Claude Code as %s does", err, npmHits.Load(), "features/claude-code.lock.json")
	}
	upStart := time.Now()
	id := devcontainerUp(t, e, repo)
	requireFenced(t, e.d, id, "")
	t.Logf("devcontainer up (build with Claude Code %s) and fence: %.1f s", lock.ClaudeCode.Version, time.Since(upStart).Seconds())

	// The world's HTTPS server runs from the dev container's image: it
	// has git (for git http-backend), the test base image does not, and
	// it is already built.
	img := strings.TrimSpace(e.d.Run(t, "inspect", "--format", "{{.Image}}", id))
	w3 := w.Net + "-w3"
	e.d.Run(t, "run", "-d", "--name", w3, "--network", w.Net, "--ip", https,
		"--entrypoint", "/usr/local/bin/worldd",
		"-v", e.worldd+":/usr/local/bin/worldd:ro", "-v", worldDir+":/world:ro", img,
		"-addr", https, "-tcp", "", "-udp", "",
		"-tls-cert", "/world/cert.pem", "-tls-key", "/world/key.pem",
		"-api-host", "api.anthropic.test", "-api-key", apiKey,
		"-git-host", "git.test", "-git-token", gitToken, "-git-dir", "/srv/git",
		"-git-repo", "acme/app", "-git-repo", "evil/exfil")
	t.Cleanup(func() { e.d.Command(context.Background(), "rm", "-f", w3).Run() })
	worldLog := func() string {
		out, _ := e.d.Command(context.Background(), "logs", w3).CombinedOutput()
		return string(out)
	}
	t.Cleanup(func() {
		if t.Failed() {
			out, _ := e.d.Command(context.Background(), "logs", "-t", w3).CombinedOutput()
			t.Logf("the world's HTTPS server saw:\n%s", out)
		}
	})
	waitFor(t, 30*time.Second, w3+" ready", func() (bool, string) {
		l := worldLog()
		return strings.Contains(l, "worldd: ready"), l
	})

	// The secrets, from the host, value on stdin, as root.
	for name, v := range map[string]string{"anthropic": apiKey + "\n", "github": gitToken} {
		cmd := e.d.Command(context.Background(), "exec", "-i", "-u", "root", id, "devbox", "secret", "set", name)
		cmd.Stdin = strings.NewReader(v)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("docker exec -i -u root %s devbox secret set %s: %v\n%s", id[:12], name, err, out)
		}
	}
	list := e.d.Run(t, "exec", "-u", "root", id, "devbox", "secret", "list")
	t.Logf("docker exec -u root devbox secret list:\n%s", list)

	// The agent's environment carries a key of its own: it must never
	// reach the world.
	agentEnv := []string{"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "ANTHROPIC_API_KEY=attacker-key", "GIT_TERMINAL_PROMPT=0"}
	dexec := devcontainerExec(e, repo, "DOCKER_HOST="+e.d.Host)
	// agent runs a command as the remote user through `devcontainer exec`,
	// the way an editor's terminal does.
	agent := func(args ...string) (string, error) {
		out, err := dexec(append(append([]string{"env"}, agentEnv...), args...)...).CombinedOutput()
		return string(out), err
	}
	// agentPlain runs it as the same user with `docker exec`: no login
	// shell, and much faster.
	agentPlain := func(args ...string) (string, error) {
		a := []string{"exec", "-u", "dev", "-w", "/home/dev"}
		for _, kv := range append([]string{"HOME=/home/dev"}, agentEnv...) {
			a = append(a, "-e", kv)
		}
		out, err := e.d.Command(context.Background(), append(append(a, id), args...)...).CombinedOutput()
		return string(out), err
	}
	outputs := []string{list}
	conns := func() int { return strings.Count(worldLog(), "conn https ") }

	t.Run("claude through the gateway", func(t *testing.T) {
		out, err := agent("claude", "-p", "say hello", "--output-format", "json")
		outputs = append(outputs, out)
		var res struct {
			Result  string `json:"result"`
			IsError bool   `json:"is_error"`
		}
		i := strings.IndexByte(out, '{')
		if err != nil || i < 0 || json.Unmarshal([]byte(out[i:]), &res) != nil || res.IsError || !strings.Contains(res.Result, "hello from the world's Messages API") {
			t.Fatalf("claude -p as the remote user: %v\n%s\nworld:\n%s", err, out, worldLog())
		}
		t.Logf("claude -p as the remote user: result %q", res.Result)
		n := apiSawOnly(t, worldLog(), apiKey, sandbox.ClaudeGatewayPlaceholder, "attacker-key")
		t.Logf("the fake API saw %d requests, each with the user's key only, never the placeholder nor attacker-key", n)
	})

	t.Run("git clone and push to the listed repo", func(t *testing.T) {
		script := `set -e
git clone -q https://git.test/acme/app.git ~/app
cd ~/app
echo change > change
git add change
git -c user.name=agent -c user.email=agent@x.test commit -q -m 'pushed by the agent'
git push origin HEAD:main 2>&1
git fetch -q origin`
		out, err := agent("sh", "-c", script)
		outputs = append(outputs, out)
		if err != nil {
			t.Fatalf("git clone, commit, push as the remote user: %v\n%s\nworld:\n%s", err, out, worldLog())
		}
		got := e.d.Run(t, "exec", w3, "git", "--git-dir", "/srv/git/repos/acme/app.git", "log", "--format=%s", "main")
		if !strings.Contains(got, "pushed by the agent") {
			t.Fatalf("the push did not reach git.test/acme/app: %q", got)
		}
		t.Logf("git clone + push to git.test/acme/app: ok; the world's repository has %q", strings.Fields(got))
	})

	t.Run("push to an unlisted repo", func(t *testing.T) {
		before := worldLog()
		out, err := agentPlain("git", "-C", "/home/dev/app", "push", "https://git.test/evil/exfil.git", "HEAD:main")
		outputs = append(outputs, out)
		if err == nil || !strings.Contains(out, "credentials.git[0].repos") || !strings.Contains(out, "403") {
			t.Errorf("push to an unlisted repo: %v\n%s", err, out)
		}
		if after := worldLog(); after != before {
			t.Errorf("the unlisted push reached the world:\n%s", strings.TrimPrefix(after, before))
		}
		got := e.d.Run(t, "exec", w3, "git", "--git-dir", "/srv/git/repos/evil/exfil.git", "log", "--format=%s", "main")
		if strings.Contains(got, "pushed by the agent") {
			t.Error("the unlisted repository got the commit")
		}
		t.Logf("git push to git.test/evil/exfil: refused, nothing reached the world:\n%s", strings.TrimSpace(out))
	})

	t.Run("login shell", func(t *testing.T) {
		// The login banner's `devbox doctor --quiet` asks the gateway for
		// its routes without the upstream handshakes: a shell opens no
		// connection to a protected host.
		before := conns()
		if out, err := agent("true"); err != nil {
			t.Fatalf("devcontainer exec true: %v\n%s", err, out)
		}
		if after := conns(); after != before {
			t.Errorf("a login shell (devcontainer exec) opened %d connections to the protected host", after-before)
		}
		t.Logf("devcontainer exec (login shell, banner runs devbox doctor --quiet): %d new connections to the world", conns()-before)
	})

	t.Run("direct TCP to the protected host", func(t *testing.T) {
		before := conns()
		for _, argv := range [][]string{
			{"curl", "-sS", "--max-time", "5", "https://api.anthropic.test/v1/messages", "-H", "x-api-key: attacker-key", "-d", "{}"},
			{"curl", "-sS", "--max-time", "5", "https://git.test/evil/exfil.git/info/refs?service=git-receive-pack"},
			{"bash", "-c", "exec 3<>/dev/tcp/" + https + "/443"},
		} {
			out, err := agentPlain(argv...)
			outputs = append(outputs, out)
			if err == nil {
				t.Errorf("%s as the remote user succeeded:\n%s", strings.Join(argv, " "), out)
			}
			t.Logf("%s: refused: %s", strings.Join(argv, " "), strings.TrimSpace(out))
		}
		if after := conns(); after != before {
			t.Errorf("the world saw %d direct connections", after-before)
		}
	})

	t.Run("escape suite with the gateway", func(t *testing.T) {
		// The whole suite, plus the requests the credential gateway must
		// refuse itself (TRACE, CONNECT, Upgrade, HTTP/2 prior knowledge,
		// a key in the query, service= twice) and the protected names
		// reached directly: none may arrive at the world's HTTPS server,
		// and nothing carrying the run's nonce (a name the gate's
		// adversary cases asked for, a tunnelling query) at W1 or W2.
		prepare(t, e, id)
		before := worldLog()
		args := append([]string{"devbox-escape", "--gateway", layout.GatewayAddr,
			"--protected-name", "api.anthropic.test:443", "--protected-name", "git.test:443"}, w.escapeArgs("")...)
		out := escapeSuite(t, e.d.Command(context.Background(), append([]string{"exec", "-u", "dev", id}, args...)...), 60, 2)
		outputs = append(outputs, out)
		if n := everyRow(t, out, "credential gateway: ", "refused by the gateway"); n != 7 {
			t.Errorf("%d gateway attempts in the escape suite's table, want 7", n)
		}
		if after := worldLog(); after != before {
			t.Errorf("the escape suite reached the world's HTTPS server:\n%s", strings.TrimPrefix(after, before))
		}
		if seen := w.peek(t); strings.Contains(seen, w.Nonce) {
			var bad []string
			for _, l := range strings.Split(seen, "\n") {
				if strings.Contains(l, w.Nonce) {
					bad = append(bad, l)
				}
			}
			t.Errorf("these reached the world:\n%s", strings.Join(bad, "\n"))
		}
	})

	t.Run("reading the secret as the agent", func(t *testing.T) {
		gw := strings.TrimSpace(e.d.Run(t, "exec", "-u", "root", id, "sh", "-c",
			fmt.Sprintf(`for s in /proc/[0-9]*/status; do grep -q "^Uid:[[:space:]]*%d[[:space:]]" $s && basename ${s%%/status}; done; true`, layout.GatewayUID)))
		if gw == "" || strings.Contains(gw, "\n") {
			t.Fatalf("want one gateway process (uid %d), got %q", layout.GatewayUID, gw)
		}
		for _, a := range []struct {
			what string
			argv []string
			fail bool // the attempt itself must fail
		}{
			{"list the secrets volume", []string{"ls", "-la", layout.SecretsDir}, true},
			{"cat a secret", []string{"cat", layout.SecretsDir + "/anthropic"}, true},
			{"the gateway's environment", []string{"cat", "/proc/" + gw + "/environ"}, true},
			{"devbox secret list", []string{"devbox", "secret", "list"}, true},
			{"git config --list", []string{"git", "config", "--list", "--show-origin"}, false},
			{"env", []string{"env"}, false},
			{"grep the file systems", []string{"grep", "-rsIF", "--", strings.TrimPrefix(apiKey, "sk-ant-api03-"), "/etc", "/run", "/var/log", "/home", "/tmp", "/workspaces"}, true},
		} {
			out, err := agentPlain(a.argv...)
			outputs = append(outputs, out)
			if a.fail && err == nil {
				t.Errorf("%s as the remote user succeeded:\n%s", a.what, out)
			}
			if a.argv[0] == "grep" && strings.TrimSpace(out) != "" {
				t.Errorf("grep found the key in files the agent can read:\n%s", out)
			}
			if a.argv[0] == "git" && !strings.Contains(out, ".insteadof=https://git.test/") {
				t.Errorf("git config --list lacks the gateway's insteadOf rule:\n%s", out)
			}
			t.Logf("%s (%s): %v: %s", a.what, strings.Join(a.argv[:min(2, len(a.argv))], " "), err, tail1(out))
		}
	})

	t.Run("accounts", func(t *testing.T) {
		// The daemons run by uid; the image names each uid, so no other
		// account can be given one of them.
		out := e.d.Run(t, "exec", id, "getent", "passwd", layout.DNSUser, layout.GateUser, layout.GatewayUser)
		for _, want := range []string{
			fmt.Sprintf("%s:x:%d:%d:", layout.DNSUser, layout.DNSUID, layout.DNSUID),
			fmt.Sprintf("%s:x:%d:%d:", layout.GateUser, layout.GateUID, layout.GateUID),
			fmt.Sprintf("%s:x:%d:%d:", layout.GatewayUser, layout.GatewayUID, layout.GatewayUID),
		} {
			if !strings.Contains(out, want) {
				t.Errorf("the image's passwd lacks %q:\n%s", want, out)
			}
		}
		t.Logf("getent passwd:\n%s", out)
	})

	t.Run("doctor", func(t *testing.T) {
		outS, _ := agentPlain("devbox", "doctor", "--json")
		out := []byte(outS)
		outputs = append(outputs, string(out))
		var rep struct {
			Findings []struct{ Check, Level, Detail string } `json:"findings"`
		}
		if err := json.Unmarshal(out, &rep); err != nil {
			t.Fatalf("devbox doctor --json: %v\n%s", err, out)
		}
		n := 0
		for _, f := range rep.Findings {
			if strings.HasPrefix(f.Check, "credentials ") {
				n++
				if f.Level != "ok" || !strings.Contains(f.Detail, "direct access blocked") {
					t.Errorf("doctor: %s %s: %s", f.Check, f.Level, f.Detail)
				}
				t.Logf("doctor as the remote user: %s %s: %s", f.Check, f.Level, f.Detail)
			}
		}
		if n != 2 {
			t.Errorf("doctor reported %d credential routes, want 2:\n%s", n, out)
		}
	})

	for _, o := range outputs {
		for _, s := range secretBytes {
			if strings.Contains(o, s) {
				t.Errorf("an output the agent got contains a secret:\n%s", o)
			}
		}
	}
	t.Logf("%d outputs the agent got, none with the secrets' bytes; TestCredentials took %.1f s", len(outputs), time.Since(start).Seconds())
}

// tlsDir writes a new test CA (ca.pem) and a certificate for names signed
// by it (cert.pem, key.pem) into a world-readable directory, for a worldd
// container to serve TLS from and a dev container to trust.
func tlsDir(t *testing.T, names ...string) string {
	t.Helper()
	ca, err := testworld.NewCA()
	if err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err := ca.CertificatePEM(names...)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	os.Chmod(dir, 0o755)
	for name, b := range map[string][]byte{"ca.pem": ca.PEM, "cert.pem": certPEM, "key.pem": keyPEM} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// claudeNPM reads the Claude Code pins of the feature's lock
// (features/claude-code.lock.json) and points npm at npmFromLock's registry
// for them (npm_config_registry, for this test); it returns the lock and
// the registry's request count.
func claudeNPM(t *testing.T) (*policy.Lock, *atomic.Int32) {
	t.Helper()
	lock, err := policy.ReadLock("../features/claude-code.lock.json")
	if err != nil {
		t.Fatal(err)
	}
	npm, hits := npmFromLock(t, lock)
	t.Setenv("npm_config_registry", npm)
	return lock, hits
}

// npmFromLock is an npm registry on loopback answering the version
// documents of the Claude Code packages lock pins (tarball URL and sha512
// integrity), and 404 for anything else.
func npmFromLock(t *testing.T, lock *policy.Lock) (string, *atomic.Int32) {
	t.Helper()
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		// /@scope%2fname/VERSION
		parts := strings.Split(strings.TrimPrefix(r.URL.EscapedPath(), "/"), "/")
		if len(parts) == 2 && parts[1] == lock.ClaudeCode.Version {
			for _, pkg := range lock.ClaudeCode.Platforms {
				if strings.EqualFold(parts[0], strings.Replace(pkg.Package, "/", "%2f", 1)) {
					json.NewEncoder(w).Encode(map[string]any{
						"name": pkg.Package, "version": lock.ClaudeCode.Version,
						"dist": map[string]string{"integrity": pkg.Integrity, "tarball": pkg.Tarball},
					})
					return
				}
			}
		}
		http.NotFound(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/", &hits
}

// tail1 is the last line of out, trimmed, for a log line.
func tail1(out string) string {
	out = strings.TrimSpace(out)
	if i := strings.LastIndexByte(out, '\n'); i >= 0 {
		out = "… " + out[i+1:]
	}
	if len(out) > 200 {
		out = out[:200] + "…"
	}
	return out
}

// apiSawOnly asserts that the world's fake Messages API (its "api " log
// lines) saw at least one request, each with key as its x-api-key and no
// Authorization, and none with any of never in it; it returns how many.
func apiSawOnly(t *testing.T, log, key string, never ...string) int {
	t.Helper()
	want := fmt.Sprintf("x-api-key=%q authorization=[]", []string{key})
	n := 0
	for _, line := range strings.Split(log, "\n") {
		if !strings.HasPrefix(line, "api ") {
			continue
		}
		n++
		bad := !strings.HasSuffix(line, want)
		for _, s := range never {
			bad = bad || strings.Contains(line, s)
		}
		if bad {
			t.Errorf("the fake API saw %q: want the key given to the gateway only, never any of %q", line, never)
		}
	}
	if n == 0 {
		t.Fatal("the fake API saw no request")
	}
	return n
}
