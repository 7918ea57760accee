//go:build linux

package gateway_test

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"
	"golang.org/x/sys/unix"

	"github.com/devbox-dev/devbox/internal/devboxtest"
	"github.com/devbox-dev/devbox/internal/gateway"
	"github.com/devbox-dev/devbox/internal/layout"
	"github.com/devbox-dev/devbox/internal/policy"
	"github.com/devbox-dev/devbox/internal/sandbox"
	"github.com/devbox-dev/devbox/internal/testworld"
)

// helperEnv makes the test binary a small probe (see TestMain): the agent
// runs it to try ptrace and /proc/PID/mem on the gateway.
const helperEnv = "DEVBOX_GATEWAY_TEST_HELPER"

func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		os.Exit(helper(mode, os.Args[1:]))
	}
	os.Exit(m.Run())
}

func helper(mode string, args []string) int {
	pid, _ := strconv.Atoi(args[0])
	switch mode {
	case "ptrace":
		err := unix.PtraceAttach(pid)
		fmt.Printf("ptrace attach %d: %v\n", pid, err)
		if err == nil {
			unix.PtraceDetach(pid)
		}
	case "mem":
		f, err := os.Open(fmt.Sprintf("/proc/%d/mem", pid))
		if err != nil {
			fmt.Printf("open mem: %v\n", err)
			return 0
		}
		buf := make([]byte, 1<<20)
		n, err := f.ReadAt(buf, 0x400000)
		fmt.Printf("read mem: %d bytes, %v\n%s\n", n, err, buf[:n])
	}
	return 0
}

// World addresses of the protected hosts (outside testworld's own).
var (
	hostAPI = netip.MustParseAddr("10.77.0.40") // api.anthropic.test
	hostGit = netip.MustParseAddr("10.77.0.41") // git.test
	// api.git.test: a sibling host of git.test's service, protected
	// through credentials.git[0].protect.
	hostSibling = netip.MustParseAddr("10.77.0.42")
)

func randHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// container is a client namespace of the world turned into a small
// container: its own mount namespace with /etc as an overlay (so the
// gitconfig and Claude Code's managed settings the fence writes land in
// the real paths without touching the host), /run and /var/log on tmpfs.
type container struct {
	t   *testing.T
	pid int // a process holding the mount and network namespaces
}

func newContainer(t *testing.T, w *testworld.World, dir string, files map[string]string) *container {
	t.Helper()
	var script strings.Builder
	fmt.Fprintf(&script, "set -e\nmkdir -p %[1]s/etc-up %[1]s/etc-work\n", dir)
	fmt.Fprintf(&script, "mount -t overlay overlay -o lowerdir=/etc,upperdir=%[1]s/etc-up,workdir=%[1]s/etc-work /etc\n", dir)
	script.WriteString("mount -t tmpfs tmpfs /run\nmount -t tmpfs tmpfs /var/log\n")
	for path, content := range files {
		src := filepath.Join(dir, "file-"+randHex(4))
		if err := os.WriteFile(src, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&script, "mkdir -p %s\ncat %s >> %s\n", filepath.Dir(path), src, path)
	}
	script.WriteString("echo ready\nexec sleep 3600\n")
	cmd := exec.Command("ip", "netns", "exec", w.Client, "unshare", "-m", "--propagation", "private", "sh", "-c", script.String())
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || line != "ready\n" {
		cmd.Process.Kill()
		t.Fatalf("container setup: %q %v", line, err)
	}
	c := &container{t: t, pid: cmd.Process.Pid}
	t.Cleanup(func() {
		// Every process in the container's network namespace is one this
		// test started (the fence's daemons included): stop each by pid.
		for _, pid := range c.pids() {
			syscall.Kill(pid, syscall.SIGKILL)
		}
		cmd.Wait()
	})
	return c
}

// pids lists the processes in the container's network namespace (none
// once it is gone).
func (c *container) pids() []int {
	self, _ := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", c.pid))
	if self == "" {
		return nil
	}
	var pids []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if ns, _ := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", pid)); ns == self {
			pids = append(pids, pid)
		}
	}
	return pids
}

// run runs argv in the container as uid (-1: root) with env and stdin.
func (c *container) run(uid int, env []string, stdin string, argv ...string) (string, error) {
	full := []string{"nsenter", "-t", strconv.Itoa(c.pid), "-m", "-n", "--"}
	if uid >= 0 {
		full = append(full, "setpriv", "--reuid", strconv.Itoa(uid), "--regid", strconv.Itoa(uid), "--clear-groups", "--inh-caps=-all", "--")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, full[0], append(full[1:], argv...)...)
	cmd.Env = append([]string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}, env...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// binDir makes a directory the daemons' uids can enter, removed after the
// test, holding the devbox binary and this test binary as "probe".
func binDir(t *testing.T, prefix string) (dir, devbox, probe string) {
	t.Helper()
	dir = devboxtest.SharedTempDir(t, prefix)
	devbox = filepath.Join(dir, "devbox")
	devboxtest.CopyFile(t, devboxtest.BuildDevbox(t), devbox)
	return dir, devbox, devboxtest.CopyTestBinary(t, dir, "probe")
}

// TestWorld is the credential gateway's acceptance test: a fenced client
// namespace (firewall, DNS filter, name gate and gateway started by `devbox
// firewall apply` from a policy), a world over TLS with a test CA running a
// fake Messages API and a git smart-HTTP server, the real Claude Code and
// git as the agent's uid, and every attempt to read or bypass the secret.
func TestWorld(t *testing.T) {
	devboxtest.RequireRoot(t)
	claude := devboxtest.Env(t, "DEVBOX_CLAUDE")
	for _, b := range []string{"git", "curl", "nsenter", "unshare", "setpriv", "iptables-restore"} {
		devboxtest.RequireBinary(t, b)
	}
	apiKey := "sk-ant-api03-" + randHex(16)
	gitToken := "ghp_" + randHex(16)
	secretBytes := []string{apiKey, gitToken, strings.TrimPrefix(apiKey, "sk-ant-api03-"), strings.TrimPrefix(gitToken, "ghp_")}

	dir, devbox, probe := binDir(t, "devbox-gw-")

	// The world: two TLS hosts, names under .test, a test CA.
	w := testworld.New(t)
	w.AddHost(t, hostAPI)
	w.AddHost(t, hostGit)
	w.DNS.Set("api.anthropic.test", dns.TypeA, 300, hostAPI.String())
	w.DNS.Set("git.test", dns.TypeA, 300, hostGit.String())
	w.AddHost(t, hostSibling)
	w.DNS.Set("api.git.test", dns.TypeA, 300, hostSibling.String())
	ca, err := testworld.NewCA()
	if err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(dir, "ca.pem")
	os.WriteFile(caFile, ca.PEM, 0o644)
	api := &testworld.MessagesAPI{Key: apiKey, Reply: "hello through the credential gateway"}
	gitsrv, err := testworld.NewGitServer(filepath.Join(dir, "gitworld"), gitToken, "acme/app", "evil/exfil")
	if err != nil {
		t.Fatal(err)
	}
	sibling := &testworld.Recording{}
	siblingHandler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { sibling.Add(r); fmt.Fprintln(w, "sibling api") })
	web := &testworld.Web{}
	t.Cleanup(web.Close)
	err = testworld.InNS(w.Server, func() error {
		l, err := net.Listen("tcp", netip.AddrPortFrom(hostAPI, 443).String())
		if err != nil {
			return err
		}
		if err := web.Serve(l, api, ca, "api.anthropic.test"); err != nil {
			return err
		}
		if l, err = net.Listen("tcp", netip.AddrPortFrom(hostGit, 443).String()); err != nil {
			return err
		}
		if err := web.Serve(l, gitsrv, ca, "git.test"); err != nil {
			return err
		}
		if l, err = net.Listen("tcp", netip.AddrPortFrom(hostSibling, 443).String()); err != nil {
			return err
		}
		return web.Serve(l, siblingHandler, ca, "api.git.test")
	})
	if err != nil {
		t.Fatal(err)
	}

	// The policy and what the image would carry.
	policyText := fmt.Sprintf(`{
	  "network": {
	    "allow": ["api.anthropic.test:443", "git.test:443", "api.git.test:443"],
	    "dns": { "upstream": [%q] },
	  },
	  "credentials": {
	    "anthropic": { "secret": "anthropic", "host": "api.anthropic.test" },
	    "git": [ { "host": "git.test", "secret": "github", "repos": ["acme/app"], "push": true, "protect": ["*.git.test"] } ],
	  },
	}`, testworld.DNSAddr.Addr().String())
	p, err := policy.Parse("policy", []byte(policyText))
	if err != nil {
		t.Fatal(err)
	}
	norm, _ := p.Normalize()
	policyFile := filepath.Join(dir, "policy.json")
	os.WriteFile(policyFile, norm, 0o644)
	managed, err := sandbox.ClaudeManagedSettings(p)
	if err != nil {
		t.Fatal(err)
	}
	home := filepath.Join(dir, "home")
	os.MkdirAll(home, 0o755)
	os.Chown(home, 1000, 1000)
	resolv, _ := os.ReadFile(filepath.Join("/etc/netns", w.Client, "resolv.conf"))
	c := newContainer(t, w, dir, map[string]string{
		"/etc/passwd":                     "agent:x:1000:1000::" + home + ":/bin/sh\n" + layout.GatewayUser + ":x:996:996::/nonexistent:/usr/sbin/nologin\n",
		"/etc/group":                      "agent:x:1000:\n" + layout.GatewayUser + ":x:996:\n",
		sandbox.ClaudeManagedSettingsPath: string(managed),
		"/etc/resolv.conf":                string(resolv),
	})
	secretsDir := filepath.Join(dir, "secrets")
	rootEnv := []string{"SSL_CERT_FILE=" + caFile, "DEVBOX_SECRETS_DIR=" + secretsDir}

	// The fence, as `devbox firewall apply` runs it: apply, dns, gate, gateway.
	if out, err := c.run(-1, rootEnv, "", devbox, "firewall", "apply", "--policy", policyFile); err != nil {
		t.Fatalf("firewall apply: %v\n%s", err, out)
	} else {
		t.Logf("firewall apply:\n%s", out)
	}
	agentEnv := []string{"HOME=" + home, "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "ANTHROPIC_API_KEY=attacker-key", "GIT_TERMINAL_PROMPT=0"}

	// Claude Code before any secret is stored: the gateway's answer is
	// one Claude Code shows, naming the command to run on the host, and
	// nothing reaches the API (issue 21, point 4).
	noSecretOut, err := c.run(1000, agentEnv, "", claude, "-p", "say hello", "--output-format", "json")
	var noSecret struct {
		Result  string `json:"result"`
		IsError bool   `json:"is_error"`
		Status  int    `json:"api_error_status"`
	}
	if i := strings.IndexByte(noSecretOut, '{'); err == nil || i < 0 || json.Unmarshal([]byte(noSecretOut[i:]), &noSecret) != nil ||
		!noSecret.IsError || noSecret.Status != 403 || !strings.Contains(noSecret.Result, "run: devbox login") {
		t.Errorf("claude -p with no secret stored: %v\n%s", err, noSecretOut)
	}
	if n := len(api.Requests()); n != 0 || web.Seen(hostAPI, 443) != 0 {
		t.Errorf("with no secret stored, the API saw %d requests", n)
	}

	// The secrets, as from the host: value on stdin, as root.
	for name, v := range map[string]string{"anthropic": apiKey + "\n", "github": gitToken} {
		if out, err := c.run(-1, rootEnv, v, devbox, "secret", "set", name); err != nil {
			t.Fatalf("secret set %s: %v\n%s", name, err, out)
		}
	}
	if out, err := c.run(1000, []string{"DEVBOX_SECRETS_DIR=" + secretsDir}, "x", devbox, "secret", "set", "anthropic"); err == nil || !strings.Contains(out, "must run as root") {
		t.Errorf("secret set as the agent: %v\n%s", err, out)
	}
	gwPID := gatewayPID(t, c)

	var outputs []string
	type attempt struct{ what, result string }
	var table []attempt
	record := func(what, out, result string) {
		outputs = append(outputs, out)
		table = append(table, attempt{what, result})
	}
	record("Claude Code (`claude -p`) before any secret is stored", noSecretOut, fmt.Sprintf("Claude Code shows: %q (API error %d); no request reached the API", noSecret.Result, noSecret.Status))

	t.Run("claude through the gateway", func(t *testing.T) {
		out, err := c.run(1000, agentEnv, "", claude, "-p", "say hello", "--output-format", "json")
		outputs = append(outputs, out)
		if err != nil {
			t.Fatalf("claude -p: %v\n%s", err, out)
		}
		var res struct {
			Result  string `json:"result"`
			IsError bool   `json:"is_error"`
		}
		if i := strings.IndexByte(out, '{'); i < 0 || json.Unmarshal([]byte(out[i:]), &res) != nil || res.IsError || !strings.Contains(res.Result, "hello through the credential gateway") {
			t.Fatalf("claude -p output: %s", out)
		}
		reqs := api.Requests()
		if len(reqs) == 0 {
			t.Fatal("the fake API saw no request")
		}
		for _, r := range reqs {
			if r.APIKey != apiKey || r.Authorization != "" || len(r.Headers.Values("X-Api-Key")) != 1 {
				t.Errorf("the fake API saw x-api-key %q authorization %q: want the user's key only (never the placeholder %q nor attacker-key)", r.Headers.Values("X-Api-Key"), r.Authorization, sandbox.ClaudeGatewayPlaceholder)
			}
		}
		record("Claude Code (`claude -p`, agent env has `ANTHROPIC_API_KEY=attacker-key`)", out,
			fmt.Sprintf("reply received; the fake API saw %d requests, each with the user's key only (no placeholder, no attacker-key)", len(reqs)))
	})

	t.Run("attacker key through the gateway", func(t *testing.T) {
		n := len(api.Requests())
		out, err := c.run(1000, agentEnv, "", "curl", "-sS", "--max-time", "10", "http://"+layout.GatewayAddr+"/v1/messages",
			"-H", "x-api-key: attacker-key", "-H", "Authorization: Bearer attacker-token", "-d", `{"model":"m","messages":[]}`)
		reqs := api.Requests()
		if err != nil || len(reqs) != n+1 {
			t.Fatalf("curl: %v (%d new requests)\n%s", err, len(reqs)-n, out)
		}
		if r := reqs[n]; r.APIKey != apiKey || r.Authorization != "" {
			t.Errorf("upstream saw x-api-key %q authorization %q", r.APIKey, r.Authorization)
		}
		record("request through the gateway with `x-api-key: attacker-key` and `Authorization: Bearer attacker-token`", out, "reached upstream with the user's key only")
	})

	t.Run("direct TCP to protected hosts", func(t *testing.T) {
		for _, h := range []struct {
			name string
			addr netip.Addr
		}{{"api.anthropic.test", hostAPI}, {"git.test", hostGit}} {
			before := web.Seen(h.addr, 443)
			out, err := c.run(1000, agentEnv, "", "curl", "-sS", "--max-time", "5", "--cacert", caFile, "https://"+h.name+"/v1/messages", "-H", "x-api-key: attacker-key", "-d", "{}")
			if err == nil {
				t.Errorf("direct https://%s from the agent succeeded:\n%s", h.name, out)
			}
			if after := web.Seen(h.addr, 443); after != before {
				t.Errorf("the world saw %d direct connections to %s", after-before, h.name)
			}
			record("direct TCP from the agent to "+h.name+":443 (curl with attacker-key)", out, "refused: "+strings.TrimSpace(out))
		}
	})

	t.Run("sibling host of a protected service", func(t *testing.T) {
		// api.git.test is allowed by the network section and protected by
		// credentials.git[0].protect ("*.git.test"): the agent's own
		// token could be used there, so only the gateway's uid may connect.
		before := web.Seen(hostSibling, 443)
		out, err := c.run(1000, agentEnv, "", "curl", "-sS", "--max-time", "5", "--cacert", caFile, "https://api.git.test/repos/acme/app", "-H", "Authorization: token attacker")
		if err == nil {
			t.Errorf("the agent reached the sibling host:\n%s", out)
		}
		if web.Seen(hostSibling, 443) != before || len(sibling.Requests()) != 0 {
			t.Errorf("the world saw the agent's connection to the sibling host")
		}
		record("direct TCP from the agent to api.git.test:443, a sibling host protected by `credentials.git[0].protect`", out, "refused: "+strings.TrimSpace(out))
		out, err = c.run(layout.GatewayUID, nil, "", "curl", "-sS", "--max-time", "5", "--cacert", caFile, "https://api.git.test/")
		if err != nil || !strings.Contains(out, "sibling api") || web.Seen(hostSibling, 443) != before+1 {
			t.Errorf("the gateway's uid to the sibling host: %v\n%s", err, out)
		}
		record("the same host from the gateway's uid (996)", out, "reached: "+strings.TrimSpace(out))
	})

	t.Run("requests the gateway refuses", func(t *testing.T) {
		gw := "http://" + layout.GatewayAddr
		apiSeen, gitSeen, n, g := web.Seen(hostAPI, 443), web.Seen(hostGit, 443), len(api.Requests()), len(gitsrv.Requests())
		for _, a := range []struct {
			what string
			argv []string
			want string
		}{
			{"TRACE, which an echoing upstream would answer with the injected key", []string{"-X", "TRACE", gw + "/v1/messages"}, "405"},
			{"Upgrade: h2c", []string{"-H", "Upgrade: h2c", "-H", "Connection: Upgrade, HTTP2-Settings", "-H", "HTTP2-Settings: AAMAAABkAAQCAAAAAAIAAAAA", gw + "/v1/messages"}, "400"},
			{"Upgrade: websocket", []string{"-H", "Upgrade: websocket", "-H", "Connection: Upgrade", gw + "/v1/messages"}, "400"},
			{"HTTP/2 prior knowledge", []string{"--http2-prior-knowledge", gw + "/v1/messages"}, ""},
			{"info/refs with service= twice (fetch, then push)", []string{gw + "/git/git.test/acme/app.git/info/refs?service=git-upload-pack&service=git-receive-pack"}, "400"},
			{"an API key in the query", []string{"-d", "{}", gw + "/v1/messages?api_key=attacker-key"}, "400"},
			{"a path with escaped CR LF ESC (log forging)", []string{gw + "/v1/x%0D%0A%7B%22forged%22%3A1%7D%1B%5B31m"}, "400"},
		} {
			out, err := c.run(1000, agentEnv, "", append([]string{"curl", "-sS", "--max-time", "5", "-o", "/dev/null", "-w", "%{http_code}"}, a.argv...)...)
			code := strings.TrimSpace(out)
			if a.want != "" && code != a.want || a.want == "" && (strings.HasPrefix(code, "2") || err == nil && code == "200") {
				t.Errorf("%s: %v %q, want %s", a.what, err, out, a.want)
			}
			record("through the gateway: "+a.what, out, "HTTP "+code)
		}
		if web.Seen(hostAPI, 443) != apiSeen || web.Seen(hostGit, 443) != gitSeen || len(api.Requests()) != n || len(gitsrv.Requests()) != g {
			t.Error("a refused request reached the world")
		}
		log, _ := c.run(-1, nil, "", "cat", "/var/log/devbox/gateway.log")
		for i, line := range strings.Split(strings.TrimSpace(log), "\n") {
			var e gateway.Entry
			if err := json.Unmarshal([]byte(line), &e); err != nil {
				t.Errorf("gateway.log line %d is not JSON: %v: %q", i+1, err, line)
			}
		}
		if strings.ContainsAny(log, "\r\x1b") || strings.Contains(log, `{"forged":1}`) {
			t.Errorf("gateway.log has a raw control byte or a forged line:\n%q", log)
		}
	})

	t.Run("git clone and push to the listed repo", func(t *testing.T) {
		repo := filepath.Join(home, "app")
		git := func(args ...string) (string, error) {
			return c.run(1000, agentEnv, "", append([]string{"git", "-c", "user.name=agent", "-c", "user.email=agent@x.test"}, args...)...)
		}
		if out, err := git("clone", "https://git.test/acme/app.git", repo); err != nil {
			t.Fatalf("clone: %v\n%s", err, out)
		}
		os.WriteFile(filepath.Join(repo, "change"), []byte("x"), 0o644)
		os.Chown(filepath.Join(repo, "change"), 1000, 1000)
		git("-C", repo, "add", "change")
		if out, err := git("-C", repo, "commit", "-q", "-m", "pushed by the agent"); err != nil {
			t.Fatal(out)
		}
		out, err := git("-C", repo, "push", "origin", "HEAD:main")
		if err != nil {
			t.Fatalf("push: %v\n%s", err, out)
		}
		if log, _ := gitsrv.Log("acme/app", "main"); !strings.Contains(log, "pushed by the agent") {
			t.Errorf("push did not reach the repo: %q", log)
		}
		if out, err := git("-C", repo, "fetch", "origin"); err != nil {
			t.Errorf("fetch: %v\n%s", err, out)
		}
		record("git clone, fetch and push to the listed repo git.test/acme/app", out, "work")

		before, seen := len(gitsrv.Requests()), web.Seen(hostGit, 443)
		out, err = git("-C", repo, "push", "https://git.test/evil/exfil.git", "HEAD:main")
		if err == nil || !strings.Contains(out, "credentials.git[0].repos") || !strings.Contains(out, "403") {
			t.Errorf("push to an unlisted repo: %v\n%s", err, out)
		}
		if len(gitsrv.Requests()) != before || web.Seen(hostGit, 443) != seen {
			t.Error("the unlisted push reached the world")
		}
		if log, _ := gitsrv.Log("evil/exfil", "main"); strings.Contains(log, "pushed by the agent") {
			t.Error("the unlisted repo got the commit")
		}
		record("git push to the unlisted git.test/evil/exfil", out, "403 naming credentials.git[0].repos; no request reached the world")
	})

	t.Run("reading the secret as the agent", func(t *testing.T) {
		gw := strconv.Itoa(gwPID)
		for _, a := range []struct {
			what string
			argv []string
			env  []string
		}{
			{"cat the secret file", []string{"cat", filepath.Join(secretsDir, "anthropic")}, nil},
			{"list the secrets directory", []string{"ls", "-la", secretsDir}, nil},
			{"grep -r the container's /etc, /run, /var/log and the test's directory", []string{"grep", "-rsI", "--", apiKey, "/etc", "/run", "/var/log", dir}, nil},
			{"env (the agent's environment)", []string{"env"}, nil},
			{"cat /proc/GW/environ", []string{"cat", "/proc/" + gw + "/environ"}, nil},
			{"cat /proc/GW/maps", []string{"cat", "/proc/" + gw + "/maps"}, nil},
			{"cat /proc/GW/cmdline", []string{"cat", "/proc/" + gw + "/cmdline"}, nil},
			{"read /proc/GW/mem", []string{probe, gw}, []string{helperEnv + "=mem"}},
			{"ptrace attach to the gateway", []string{probe, gw}, []string{helperEnv + "=ptrace"}},
			{"kill -SEGV the gateway (core dump)", []string{"kill", "-SEGV", gw}, nil},
			{"git config --list --show-origin", []string{"git", "config", "--list", "--show-origin"}, nil},
			{"cat the gateway's log", []string{"cat", "/var/log/devbox/gateway.log"}, nil},
		} {
			out, err := c.run(1000, append(agentEnv, a.env...), "", a.argv...)
			res := strings.TrimSpace(out)
			if len(res) > 160 {
				res = res[:160] + "…"
			}
			if err != nil {
				res = fmt.Sprintf("%v: %s", err, res)
			}
			record(a.what+" (as the agent)", out, res)
		}
		// The gateway is alive after the agent's attempts.
		if out, err := c.run(1000, agentEnv, "", "curl", "-sS", "http://"+layout.GatewayAddr+"/_devbox/health"); err != nil || !strings.Contains(out, "ok") {
			t.Errorf("gateway health after the attempts: %v %s", err, out)
		}
		// What root sees: uid 996, no capabilities, undumpable (its /proc
		// files then belong to root), an environment without the secret,
		// a log with fingerprints only.
		status, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", gwPID))
		for _, want := range []string{"Uid:\t996\t996\t996\t996", "CapEff:\t0000000000000000", "CapPrm:\t0000000000000000"} {
			if !strings.Contains(string(status), want) {
				t.Errorf("gateway status lacks %q:\n%s", want, status)
			}
		}
		var st syscall.Stat_t
		if err := syscall.Stat(fmt.Sprintf("/proc/%d/environ", gwPID), &st); err != nil || st.Uid != 0 {
			t.Errorf("/proc/%d/environ owned by uid %d (%v): want root, the mark of PR_SET_DUMPABLE 0", gwPID, st.Uid, err)
		}
		env, _ := os.ReadFile(fmt.Sprintf("/proc/%d/environ", gwPID))
		outputs = append(outputs, string(env))
		log, _ := c.run(-1, nil, "", "cat", "/var/log/devbox/gateway.log")
		outputs = append(outputs, log)
		if !strings.Contains(log, "fingerprint") {
			t.Errorf("gateway log has no fingerprint lines:\n%s", log)
		}
	})

	// doctor reports each route, as the agent and as root: secret set,
	// upstream reachable from the gateway, direct access blocked.
	for _, uid := range []int{1000, -1} {
		out, _ := c.run(uid, rootEnv, "", devbox, "doctor", "--json", "--policy", policyFile, "--workspace", home)
		outputs = append(outputs, out)
		var rep struct {
			Findings []struct{ Check, Level, Detail string } `json:"findings"`
		}
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Errorf("doctor --json as uid %d: %v\n%s", uid, err, out)
			continue
		}
		seen := 0
		for _, f := range rep.Findings {
			if strings.HasPrefix(f.Check, "credentials ") {
				seen++
				if f.Level != "ok" || !strings.Contains(f.Detail, "direct access blocked") {
					t.Errorf("doctor as uid %d: %s %s: %s", uid, f.Check, f.Level, f.Detail)
				}
				if uid == 1000 {
					table = append(table, attempt{"`devbox doctor` as the agent: " + f.Check, f.Level + ": " + f.Detail})
				}
			}
		}
		if seen != 2 {
			t.Errorf("doctor as uid %d reported %d credential routes, want 2:\n%s", uid, seen, out)
		}
	}
	// The gateway's upstream connections went through the name gate (its
	// SNI and name binding checked): the agent's own never reached it.
	if out, err := c.run(-1, rootEnv, "", devbox, "firewall", "status", "--json", "--policy", policyFile); err != nil {
		t.Errorf("firewall status: %v\n%s", err, out)
	} else {
		var st struct {
			Gate struct {
				Health *struct {
					Passed  int64 `json:"passed"`
					Refused int64 `json:"refused"`
				} `json:"health"`
			} `json:"gate"`
		}
		if json.Unmarshal([]byte(out), &st); st.Gate.Health == nil || st.Gate.Health.Passed == 0 || st.Gate.Health.Refused != 0 {
			t.Errorf("gate health %+v: want the gateway's connections passed, none refused", st.Gate.Health)
		} else {
			table = append(table, attempt{"name gate counters after the run", fmt.Sprintf("%d connections passed (the gateway's, SNI checked), %d refused", st.Gate.Health.Passed, st.Gate.Health.Refused)})
		}
	}
	for _, o := range outputs {
		for _, s := range secretBytes {
			if strings.Contains(o, s) {
				t.Errorf("an output contains the secret:\n%s", o)
			}
		}
	}
	var b strings.Builder
	b.WriteString("\n| attempt | result |\n| --- | --- |\n")
	for _, a := range table {
		fmt.Fprintf(&b, "| %s | %s |\n", a.what, strings.ReplaceAll(strings.ReplaceAll(a.result, "\n", " "), "|", "\\|"))
	}
	t.Logf("attempts (every output grepped for the secrets' bytes: %d outputs):%s", len(outputs), b.String())
}

// gatewayPID finds the gateway: the process of uid 996 in the container.
func gatewayPID(t *testing.T, c *container) int {
	t.Helper()
	for _, pid := range c.pids() {
		status, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		if strings.Contains(string(status), "\nUid:\t996\t") {
			return pid
		}
	}
	t.Fatal("no gateway process (uid 996) in the container")
	return 0
}
