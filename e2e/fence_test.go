package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/tailscale/hujson"

	"github.com/devbox-dev/devbox/firewall"
	"github.com/devbox-dev/devbox/internal/devboxtest"
	"github.com/devbox-dev/devbox/internal/entrypoint"
)

// env is what every e2e test needs from scripts/test.
type env struct {
	d        devboxtest.Docker
	base     string
	dcli     string
	registry string
	buildkit string
	devbox   string
	escape   string
	worldd   string
}

func setup(t testing.TB) env {
	t.Helper()
	e := env{
		d:        devboxtest.DockerCLI(t),
		base:     devboxtest.Env(t, "DEVBOX_BASE_IMAGE"),
		dcli:     devboxtest.Env(t, "DEVBOX_DEVCONTAINER_CLI"),
		registry: devboxtest.Env(t, "DEVBOX_REGISTRY"),
		buildkit: devboxtest.BuildkitHost(t),
	}
	devboxtest.Env(t, "DOCKER_CONFIG") // the registry's credentials, for pulls
	e.devbox = devboxtest.BuildDevbox(t)
	bin := t.TempDir()
	e.escape = goBuild(t, "./internal/escape/cmd/devbox-escape", bin)
	e.worldd = goBuild(t, "./internal/testworld/cmd/worldd", bin)
	return e
}

// run runs a command in dir with env extra, failing t on error; it
// returns stdout.
func run(t testing.TB, dir string, extra []string, name string, args ...string) string {
	t.Helper()
	out, err := runErr(dir, extra, name, args...)
	if err != nil {
		t.Fatalf("%s %s: %v", name, strings.Join(args, " "), err)
	}
	return out
}

func runErr(dir string, extra []string, name string, args ...string) (string, error) {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), extra...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("%v\nstdout:\n%s\nstderr:\n%s", err, tail(stdout.String()), tail(stderr.String()))
	}
	return stdout.String(), nil
}

func tail(s string) string {
	if len(s) > 6000 {
		return "…" + s[len(s)-6000:]
	}
	return s
}

// policyFor is the sample repository's policy: one allowed destination,
// no Claude Code (the build stays small; the fence does not depend on it).
// The DNS upstream is the default: resolv.conf, i.e. Docker's embedded
// resolver 127.0.0.11 on the world's user-defined network, which forwards
// to the world's resolver (`--dns`) from inside the container.
func policyFor(e env, w *world, tag string) string {
	return fmt.Sprintf(`// e2e sample policy
{
  "image": {"base": %q, "user": {"name": "dev", "uid": 1000, "gid": 1000}, "tag": %q},
  "agent": {"claudeCode": "none"},
  "network": {
    "allow": ["allowed.test:8080"],
    "log": {"blocked": true},
  },
}
`, e.base, tag)
}

// sampleRepo makes a git repository with the policy, locks it and runs
// `devbox init` (with --image when image is set), then points the
// generated devcontainer.json at the world.
func sampleRepo(t testing.TB, e env, w *world, image string) string {
	t.Helper()
	return repoWithPolicy(t, e, w, image, policyFor(e, w, e.registry+"/devbox/e2e:unused"))
}

// repoWithPolicy is sampleRepo with pol as the repository's policy.
func repoWithPolicy(t testing.TB, e env, w *world, image, pol string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "repo")
	os.MkdirAll(filepath.Join(dir, ".devcontainer"), 0o755)
	run(t, dir, nil, "git", "init", "-q", ".")
	os.WriteFile(filepath.Join(dir, ".git/hooks/pre-commit"), []byte("#!/bin/sh\nexit 0\n"), 0o755)
	os.WriteFile(filepath.Join(dir, ".devcontainer/devbox.policy.jsonc"), []byte(pol), 0o644)
	run(t, dir, nil, e.devbox, "lock", ".devcontainer/devbox.policy.jsonc")
	args := []string{"init"}
	if image != "" {
		args = append(args, "--image", image)
	}
	run(t, dir, nil, e.devbox, args...)
	patchConfig(t, filepath.Join(dir, ".devcontainer/devcontainer.json"), w, image == "")
	// patchConfig writes plain JSON; init puts back the comments around
	// its block of mounts, so the `devbox init` of the initializeCommand
	// (run by root here) finds nothing to rewrite at start.
	run(t, dir, nil, e.devbox, args...)
	// The container's user (uid 1000; the CLI does not remap it when the
	// host user is root) owns the repository, as the developer does on a
	// laptop: only the read-only mounts stop it from writing hooks.
	run(t, dir, nil, "chown", "-R", "1000:1000", ".")
	return dir
}

// patchConfig adds what only a test knows: the world's network and DNS,
// and the self-test's targets. What `devbox init` wrote is kept (runArgs
// are merged, e.g. the seccomp profile's option with sandbox.enabled).
func patchConfig(t testing.TB, path string, w *world, buildMode bool) {
	t.Helper()
	w.d.ForgetDevcontainer(t, filepath.Dir(filepath.Dir(path)))
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	std, err := hujson.Standardize(raw)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	var cfg map[string]any
	if err := json.Unmarshal(std, &cfg); err != nil {
		t.Fatal(err)
	}
	cfg["runArgs"] = mergeRunArgs(cfg["runArgs"], w.runArgs())
	ce, _ := cfg["containerEnv"].(map[string]any)
	if ce == nil {
		ce = map[string]any{}
	}
	for k, v := range w.containerEnv() {
		ce[k] = v
	}
	cfg["containerEnv"] = ce
	if len(w.mounts) > 0 {
		m, _ := cfg["mounts"].([]any)
		for _, x := range w.mounts {
			m = append(m, x)
		}
		cfg["mounts"] = m
	}
	if buildMode {
		// When the Dev Containers CLI builds from a Dockerfile it drops
		// the "entrypoint" of the built image's label; devbox init must
		// have set overrideCommand false so the image's ENTRYPOINT fences.
		if v, ok := cfg["overrideCommand"]; !ok || v != false {
			t.Fatalf("build-mode devcontainer.json has overrideCommand %v, want false: the fence would never start", v)
		}
	}
	out, _ := json.MarshalIndent(cfg, "", "  ")
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
}

// mergeRunArgs appends the args of add that are not already in have (the
// runArgs of devcontainer.json, as decoded JSON), keeping have's order.
// An arg is compared with its value when it takes one ("--network X"), so
// an option init wrote is never repeated; a flag init set to another value
// is a test setup error.
func mergeRunArgs(have any, add []string) []any {
	var out []any
	seen := map[string]bool{}
	list, _ := have.([]any)
	for _, a := range list {
		out = append(out, a)
		if s, ok := a.(string); ok {
			seen[s] = true
		}
	}
	for i := 0; i < len(add); i++ {
		a := add[i]
		if strings.HasPrefix(a, "--") && !strings.Contains(a, "=") && i+1 < len(add) {
			// "--flag value": keep the pair together.
			if !seen[a] || !seen[add[i+1]] {
				out = append(out, a, add[i+1])
			}
			i++
			continue
		}
		if !seen[a] {
			out = append(out, a)
		}
	}
	return out
}

// upFenced brings repo's dev container up and requires its fence. It
// returns the container id, the fence's status, a command runner as the
// remote user (with DOCKER_HOST set) and the workspace folder in the
// container.
func upFenced(t testing.TB, e env, repo string) (id string, first entrypoint.Status, dexec func(args ...string) *exec.Cmd, ws string) {
	t.Helper()
	id = devcontainerUp(t, e, repo)
	first = requireFenced(t, e.d, id, "")
	return id, first, devcontainerExec(e, repo, "DOCKER_HOST="+e.d.Host), "/workspaces/" + filepath.Base(repo)
}

// devcontainerUp runs `devcontainer up` and returns the container id.
func devcontainerUp(t testing.TB, e env, repo string) string {
	t.Helper()
	// devbox on PATH, as on a developer's host: the initializeCommand runs
	// `devbox audit` (and image mode needs it there).
	path := "PATH=" + filepath.Dir(e.devbox) + string(os.PathListSeparator) + os.Getenv("PATH")
	out, err := runErr(repo, []string{"DOCKER_HOST=" + e.d.Host, path}, e.dcli, "up", "--workspace-folder", repo, "--docker-path", e.d.Path)
	if err != nil && strings.Contains(err.Error(), "No such image: sha256:") {
		// dockerd's classic builder reused a cached layer that another
		// test process removed at that moment (ForgetDevcontainer's rmi
		// prunes untagged parents): a race between the test processes'
		// builds and clean-ups, not devbox's. Built again, the layer is
		// made afresh (seen once in CI run 9, TestCredentials).
		t.Logf("devcontainer up lost a cached layer to another test's clean-up; building again")
		out, err = runErr(repo, []string{"DOCKER_HOST=" + e.d.Host, path}, e.dcli, "up", "--workspace-folder", repo, "--docker-path", e.d.Path)
	}
	var res struct {
		Outcome     string `json:"outcome"`
		ContainerID string `json:"containerId"`
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	json.Unmarshal([]byte(lines[len(lines)-1]), &res)
	if res.ContainerID != "" {
		// The named volumes init's devcontainer.json mounts (Claude Code's
		// state, the secrets) outlive the container: remove them with it.
		vols, _ := e.d.Command(context.Background(), "inspect", "--format",
			`{{range .Mounts}}{{if eq .Type "volume"}}{{.Name}} {{end}}{{end}}`, res.ContainerID).Output()
		t.Cleanup(func() {
			e.d.Command(context.Background(), "rm", "-f", res.ContainerID).Run()
			for _, v := range strings.Fields(string(vols)) {
				if strings.HasPrefix(v, "devbox-") {
					e.d.Command(context.Background(), "volume", "rm", v).Run()
				}
			}
		})
	}
	if err != nil || res.Outcome != "success" {
		t.Fatalf("devcontainer up: outcome %q: %v", res.Outcome, err)
	}
	return res.ContainerID
}

// fenceStatus waits for the entrypoint to finish and returns its status.
func fenceStatus(t testing.TB, d devboxtest.Docker, id, notStartID string) entrypoint.Status {
	t.Helper()
	var st entrypoint.Status
	waitFor(t, 60*time.Second, "fence status in "+id[:12], func() (bool, string) {
		out, err := d.Command(context.Background(), "exec", id, "cat", entrypoint.StatusPath).CombinedOutput()
		if err != nil {
			logs, _ := d.Command(context.Background(), "logs", id).CombinedOutput()
			state, _ := d.Command(context.Background(), "inspect", "--format", "{{json .State}}", id).CombinedOutput()
			return false, fmt.Sprintf("%v: %s\nstate: %s\nlogs:\n%s", err, out, state, tail(string(logs)))
		}
		st = entrypoint.Status{}
		if err := json.Unmarshal(out, &st); err != nil {
			return false, err.Error()
		}
		return st.State != entrypoint.Starting && st.StartID != notStartID, string(out)
	})
	return st
}

func requireFenced(t testing.TB, d devboxtest.Docker, id, notStartID string) entrypoint.Status {
	t.Helper()
	st := fenceStatus(t, d, id, notStartID)
	if st.State != entrypoint.Fenced {
		logs, _ := d.Command(context.Background(), "logs", id).CombinedOutput()
		t.Fatalf("fence state %q: %s\ncontainer log:\n%s", st.State, st.Reason, tail(string(logs)))
	}
	t.Logf("fenced and verified: entrypoint took %.1f ms (%+v)", st.ElapsedMS, st.Steps)
	return st
}

// requireEmbeddedDNS checks the DNS filter forwards to Docker's embedded
// resolver (the default upstream on a user-defined network) and that
// dockerd's forwards left through the firewall's uid-0 exemption: allowed
// names resolved through 127.0.0.11, with no loop.
func requireEmbeddedDNS(t testing.TB, d devboxtest.Docker, id string) {
	t.Helper()
	out := d.Run(t, "exec", "-u", "root", id, "devbox", "firewall", "status", "--json")
	var st firewall.Status
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("devbox firewall status --json: %v\n%s", err, out)
	}
	h := st.Daemon.Health
	if h == nil || strings.Join(h.Upstreams, ",") != firewall.DockerDNS.String() || h.Forwarded == 0 || h.UpstreamErrors != 0 {
		t.Fatalf("DNS filter health %+v: want upstream %s, forwarded queries, no upstream errors", h, firewall.DockerDNS)
	}
	var exempt uint64
	for _, fs := range st.Families {
		for _, r := range fs.Rules {
			if strings.Contains(r.Rule, "owner UID match 0") {
				exempt += r.Packets
			}
		}
	}
	if exempt == 0 {
		t.Errorf("no packet went through the Docker DNS exemption:\n%s", out)
	}
}

// prepare copies the escape suite in and plants a root-only secret.
func prepare(t testing.TB, e env, id string) {
	t.Helper()
	e.d.Run(t, "cp", e.escape, id+":/usr/local/bin/devbox-escape")
	e.d.Run(t, "exec", "-u", "root", id, "sh", "-c", "umask 077 && echo s3cret > /root/devbox-secret")
}

var summaryRE = regexp.MustCompile(`(\d+) attempts, (\d+) escapes; (\d+) allowed checks, (\d+) broken`)

// escapeSuite runs devbox-escape through cmd and requires 0 escapes,
// nothing broken, and at least minAttempts attempts.
func escapeSuite(t testing.TB, cmd *exec.Cmd, minAttempts, wantAllowed int) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	t.Logf("escape suite:\n%s%s", stdout.String(), stderr.String())
	m := summaryRE.FindStringSubmatch(stdout.String())
	if m == nil {
		t.Fatalf("no summary line in the escape suite's output (%v)", err)
	}
	if err != nil || m[2] != "0" || m[4] != "0" {
		t.Fatalf("escape suite failed (%v): %s", err, m[0])
	}
	var attempts, allowed int
	fmt.Sscan(m[1], &attempts)
	fmt.Sscan(m[3], &allowed)
	if attempts < minAttempts || allowed != wantAllowed {
		t.Fatalf("escape suite ran %d attempts and %d allowed checks, want ≥ %d and %d", attempts, allowed, minAttempts, wantAllowed)
	}
	return stdout.String()
}

// everyRow requires every row of the escape suite's table whose check
// contains check to say want (the outcome's detail), and counts them.
func everyRow(t testing.TB, table, check, want string) int {
	t.Helper()
	n := 0
	for _, line := range strings.Split(table, "\n") {
		if strings.Contains(line, check) {
			n++
			if !strings.Contains(line, want) {
				t.Errorf("not %q: %s", want, line)
			}
		}
	}
	return n
}

// escapeAs runs the escape suite through dexec (as the container's user)
// against world w, with the workspace ws ("" for none), and requires two
// allowed checks (see escapeSuite).
func escapeAs(t testing.TB, dexec func(args ...string) *exec.Cmd, w *world, ws string, minAttempts int) string {
	t.Helper()
	return escapeSuite(t, dexec(append([]string{"devbox-escape"}, w.escapeArgs(ws)...)...), minAttempts, 2)
}

// restartFenced restarts container id and requires that the entrypoint
// fenced the new start (a StartID other than notStartID), that the escape
// suite still finds no escape, and that the fence stays shut with the DNS
// filter killed.
func restartFenced(t testing.TB, e env, w *world, id, notStartID string, dexec func(args ...string) *exec.Cmd, ws string, minAttempts int) {
	t.Helper()
	e.d.Run(t, "restart", "-t", "2", id)
	requireFenced(t, e.d, id, notStartID)
	escapeAs(t, dexec, w, ws, minAttempts)
	dnsFilterDown(t, e, w, id, dexec)
}

// requireReadOnly checks the escape suite stopped the writes to the files
// the host runs because their mounts are read-only, not by chance.
func requireReadOnly(t testing.TB, table string) {
	t.Helper()
	n := 0
	for _, line := range strings.Split(table, "\n") {
		if strings.Contains(line, "write a file the host runs") || strings.Contains(line, "replace a read-only directory") {
			n++
			if !strings.Contains(line, "read-only file system") && !strings.Contains(line, "device or resource busy") {
				t.Errorf("not stopped by a read-only mount: %s", line)
			}
		}
	}
	if n != 6 {
		t.Errorf("%d read-only checks in the table, want 6", n)
	}
}

// procStatus finds the process named name in the container and returns
// its /proc status as root reads it.
func procStatus(t testing.TB, d devboxtest.Docker, id, name string) entrypoint.ProcStatus {
	t.Helper()
	out := d.Run(t, "exec", "-u", "root", id, "sh", "-c",
		`for p in /proc/[0-9]*; do if grep -q "^Name:[[:space:]]*`+name+`$" $p/status 2>/dev/null; then cat $p/status; exit 0; fi; done; exit 1`)
	ps, err := entrypoint.ParseProcStatus(out)
	if err != nil {
		t.Fatal(err)
	}
	return ps
}

func dnsFilterDown(t testing.TB, e env, w *world, id string, execUser func(args ...string) *exec.Cmd) {
	t.Helper()
	dnsFilterDownWith(t, e, w, id, execUser, w.escapeArgs(""))
}

// dnsFilterDownWith is dnsFilterDown with the escape suite's targets.
func dnsFilterDownWith(t testing.TB, e env, w *world, id string, execUser func(args ...string) *exec.Cmd, targets []string) {
	t.Helper()
	e.d.Run(t, "exec", "-u", "root", id, "sh", "-c", "read pid start < /run/devbox/dns.pid && kill -9 $pid")
	waitFor(t, 10*time.Second, "DNS filter gone", func() (bool, string) {
		// A zombie (dead, not yet reaped) does not count.
		out, _ := e.d.Command(context.Background(), "exec", id, "sh", "-c",
			`for s in /proc/[0-9]*/status; do grep -q "^Uid:[[:space:]]*998[[:space:]]" $s && ! grep -q "^State:[[:space:]]*Z" $s && echo $s; done; true`).CombinedOutput()
		return strings.TrimSpace(string(out)) == "", string(out)
	})
	// Deny-all, not allow-all: the allowed name no longer resolves, and
	// every other attempt still fails.
	args := append([]string{"devbox-escape", "--skip", "DNS filter", "--deny-name", "allowed.test:8080"}, targets...)
	args = dropPairs(args, "--allow-name", "--allow-url", "--gated-name")
	escapeSuite(t, execUser(args...), 30, 0)
	out, err := execUser("devbox", "doctor").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "DNS filter (uid 998) is not running") {
		t.Errorf("devbox doctor with the filter down (%v):\n%s", err, out)
	}
}

// dropPairs removes "flag value" pairs from args.
func dropPairs(args []string, flags ...string) []string {
	var out []string
	for i := 0; i < len(args); i++ {
		drop := false
		for _, f := range flags {
			if args[i] == f {
				drop = true
			}
		}
		if drop {
			i++
			continue
		}
		out = append(out, args[i])
	}
	return out
}

// checkWorldLog reads what the world saw and fails on anything that got
// out: a tunnelling query, or a connection to a denied address or port.
// Queries and connections of the test's own control container are
// expected (they prove the log records what arrives); so are connections
// to the allowed destinations in also (the local address as worldd logs
// it, e.g. "[fd7e:db0:1::2]:8080").
func checkWorldLog(t testing.TB, w *world, control string, also ...string) {
	t.Helper()
	log := w.log(t)
	if !strings.Contains(log, control) {
		t.Fatalf("the world's log lacks the control query %q: the log proves nothing\n%s", control, log)
	}
	var bad []string
	for _, line := range strings.Split(log, "\n") {
		switch {
		case strings.Contains(line, control):
		case strings.Contains(line, w.Nonce), strings.Contains(line, "exfil.test"), strings.Contains(line, "nowhere.test"), strings.Contains(line, "denied.test"):
			bad = append(bad, line)
		case strings.Contains(line, " conn ") && !strings.Contains(line, " conn tcp "+w.W1+":8080 ") && !connTo(line, also):
			bad = append(bad, line)
		}
	}
	if len(bad) > 0 {
		t.Errorf("these reached the world (escapes):\n%s", strings.Join(bad, "\n"))
	}
	if !strings.Contains(log, "conn tcp "+w.W1+":8080") {
		t.Errorf("no allowed connection in the world's log:\n%s", log)
	}
}

// connTo says a worldd log line is a TCP connection to one of addrs.
func connTo(line string, addrs []string) bool {
	for _, a := range addrs {
		if strings.Contains(line, " conn tcp "+a+" ") {
			return true
		}
	}
	return false
}

// buildImage builds the sample policy's image with `devbox build --push`
// and returns its REPO@sha256:… reference.
func buildImage(t testing.TB, e env, w *world) string {
	t.Helper()
	return buildImageTagged(t, e, w, w.Nonce)
}

// sampleImage is the last image buildImageTagged pushed in this test
// binary: the sample policy's, which later tests (TestPodman) reuse
// instead of building it again.
var sampleImage string

// buildImageTagged is buildImage pushing to the tag nonce.
func buildImageTagged(t testing.TB, e env, w *world, nonce string) string {
	t.Helper()
	image := pushPolicyImage(t, e, policyFor(e, w, e.registry+"/devbox/e2e:"+nonce))
	sampleImage = image
	return image
}

// pushPolicyImage builds the image of the policy pol with `devbox build
// --push` and returns the REPO@sha256 reference it printed.
func pushPolicyImage(t testing.TB, e env, pol string) string {
	t.Helper()
	repo := filepath.Join(t.TempDir(), "img")
	os.MkdirAll(repo, 0o755)
	os.WriteFile(filepath.Join(repo, "devbox.policy.jsonc"), []byte(pol), 0o644)
	out := run(t, repo, []string{"BUILDKIT_HOST=" + e.buildkit}, e.devbox, "build", "--push", "--progress", "plain", "--policy", "devbox.policy.jsonc")
	var image string
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, "@sha256:") {
			image = strings.TrimSpace(line)
		}
	}
	if image == "" {
		t.Fatalf("devbox build --push printed no REPO@sha256 reference:\n%s", out)
	}
	t.Logf("pushed %s", image)
	return image
}

func TestFence(t *testing.T) {
	e := setup(t)
	w := startWorld(t, e.d, e.base, e.worldd)

	// Control: an unfenced container on the same network asks the world
	// for a name carrying the nonce; it must show up in the world's log,
	// or the log check at the end would prove nothing.
	control := "control-" + w.Nonce + ".test"
	e.d.Command(context.Background(), append(append([]string{"run", "--rm"}, w.runArgs()...), e.base, "getent", "hosts", control)...).Run()

	var image string // pushed REPO@sha256:…, shared by the last two subtests
	t.Run("devcontainer/build", func(t *testing.T) {
		repo := sampleRepo(t, e, w, "")
		id, first, dexec, ws := upFenced(t, e, repo)
		prepare(t, e, id)
		if out, err := dexec("id", "-u").Output(); err != nil || strings.TrimSpace(string(out)) == "0" {
			t.Fatalf("devcontainer exec runs as uid %q (%v), want the non-root remote user", out, err)
		}
		requireReadOnly(t, escapeAs(t, dexec, w, ws, 40))
		requireEmbeddedDNS(t, e.d, id)
		if out, err := dexec("devbox", "doctor", "--workspace", ws).CombinedOutput(); err != nil {
			t.Errorf("devbox doctor as the remote user: %v\n%s", err, out)
		}

		// Restart: the entrypoint runs again and fences again.
		restartFenced(t, e, w, id, first.StartID, dexec, ws, 40)
	})

	t.Run("build and push", func(t *testing.T) { image = buildImage(t, e, w) })

	t.Run("devcontainer/image", func(t *testing.T) {
		if image == "" {
			t.Fatal("no pushed image (build and push failed)")
		}
		repo := sampleRepo(t, e, w, image)
		id, first, dexec, ws := upFenced(t, e, repo)
		prepare(t, e, id)
		escapeAs(t, dexec, w, ws, 40)
		restartFenced(t, e, w, id, first.StartID, dexec, ws, 40)
	})

	t.Run("docker run", func(t *testing.T) {
		if image == "" {
			t.Fatal("no pushed image (build and push failed)")
		}
		id := dockerRun(t, e, w, image)
		first := requireFenced(t, e.d, id, "")
		prepare(t, e, id)
		dexec := func(args ...string) *exec.Cmd {
			return e.d.Command(context.Background(), append([]string{"exec", "-u", "dev", id}, args...)...)
		}
		escapeAs(t, dexec, w, "", 35)
		requireEmbeddedDNS(t, e.d, id)
		restartFenced(t, e, w, id, first.StartID, dexec, "", 35)
	})

	t.Run("docker run/plain", func(t *testing.T) {
		if image == "" {
			t.Fatal("no pushed image (build and push failed)")
		}
		// Only what the image needs to start its fence: no security
		// options, no init. The command still runs unprivileged.
		args := append([]string{"run", "-d", "--cap-add", "NET_ADMIN", "--cap-add", "NET_RAW"}, w.runArgs()...)
		id := e.d.Run(t, append(args, image)...)
		t.Cleanup(func() { e.d.Command(context.Background(), "rm", "-f", id).Run() })
		requireFenced(t, e.d, id, "")
		ps := procStatus(t, e.d, id, "sleep")
		if err := ps.Unprivileged(); err != nil || ps.CapBnd != 0 || ps.UID[0] == 0 {
			t.Errorf("the image's command runs with uid %v, bounding %s: %v", ps.UID, entrypoint.CapNames(ps.CapBnd), err)
		}
	})

	t.Run("docker run/stale pidfile after restart", func(t *testing.T) {
		if image == "" {
			t.Fatal("no pushed image (build and push failed)")
		}
		// Regression: /run/devbox survives a restart, pids start again
		// from 1. A DNS filter pidfile naming the pid the entrypoint gets
		// on the next start made the firewall SIGTERM the entrypoint
		// itself (~1 restart in 6 when one of its threads drew the old
		// filter's number). Plant exactly that and restart.
		id := dockerRun(t, e, w, image)
		first := requireFenced(t, e.d, id, "")
		// The entrypoint execs the command: its pid is the command's, and
		// docker-init gives it the same pid on every start.
		pid := strings.TrimSpace(e.d.Run(t, "exec", id, "sh", "-c",
			`for p in /proc/[0-9]*; do if [ "$(tr '\0' ' ' < $p/cmdline)" = "sleep infinity " ]; then basename $p; fi; done`))
		if pid == "" {
			t.Fatal("no `sleep infinity` (the entrypoint's pid) in the container")
		}
		// The pidfile records the filter's pid and start time; keep the
		// earlier filter's start time and put the entrypoint's pid in it,
		// as when that number is drawn again after the restart.
		rec := strings.Fields(e.d.Run(t, "exec", id, "cat", "/run/devbox/dns.pid"))
		if len(rec) != 2 {
			t.Fatalf("/run/devbox/dns.pid holds %q, want \"PID START\"", rec)
		}
		e.d.Run(t, "stop", "-t", "2", id)
		stale := filepath.Join(t.TempDir(), "dns.pid")
		os.WriteFile(stale, []byte(pid+" "+rec[1]+"\n"), 0o644)
		e.d.Run(t, "cp", stale, id+":/run/devbox/dns.pid")
		e.d.Run(t, "start", id)
		// Before the fix the entrypoint, whose pid the file named, killed
		// itself stopping "the earlier filter" and the container exited.
		requireFenced(t, e.d, id, first.StartID)
	})

	t.Run("docker run/no NET_ADMIN", func(t *testing.T) {
		if image == "" {
			t.Fatal("no pushed image (build and push failed)")
		}
		// Without the capability the fence cannot be installed: the
		// entrypoint must fail, loudly, and the command must not run.
		out, err := e.d.Command(context.Background(), append(append([]string{"run", "--rm"}, w.runArgs()...), image, "echo", "RAN")...).CombinedOutput()
		if err == nil || strings.Contains(string(out), "RAN") || !strings.Contains(string(out), "THE FENCE IS NOT UP") {
			t.Errorf("docker run without NET_ADMIN: err=%v\n%s", err, out)
		}
	})

	checkWorldLog(t, w, control)
}

func TestMergeRunArgs(t *testing.T) {
	world := []string{"--network", "n1", "--dns", "10.0.0.2", "--sysctl", "net.ipv6.conf.all.disable_ipv6=0"}
	for _, tc := range []struct {
		name string
		have any
		want string
	}{
		{"none", nil, "--network n1 --dns 10.0.0.2 --sysctl net.ipv6.conf.all.disable_ipv6=0"},
		{"init's seccomp kept first", []any{"--security-opt=seccomp=x.json"},
			"--security-opt=seccomp=x.json --network n1 --dns 10.0.0.2 --sysctl net.ipv6.conf.all.disable_ipv6=0"},
		{"already there", []any{"--network", "n1", "--dns", "10.0.0.2", "--sysctl", "net.ipv6.conf.all.disable_ipv6=0"},
			"--network n1 --dns 10.0.0.2 --sysctl net.ipv6.conf.all.disable_ipv6=0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, a := range mergeRunArgs(tc.have, world) {
				got = append(got, a.(string))
			}
			if strings.Join(got, " ") != tc.want {
				t.Errorf("mergeRunArgs = %q, want %q", strings.Join(got, " "), tc.want)
			}
		})
	}
}

// dockerRun starts image detached with `docker run` and what the image's
// devcontainer.metadata label would give under the Dev Containers CLI (the
// capabilities, no-new-privileges, an init), on the world's network, and
// returns the container id; the container is removed when t ends.
func dockerRun(t *testing.T, e env, w *world, image string) string {
	t.Helper()
	args := append([]string{"run", "-d", "--cap-add", "NET_ADMIN", "--cap-add", "NET_RAW",
		"--security-opt", "no-new-privileges", "--init"}, w.runArgs()...)
	for k, v := range w.containerEnv() {
		args = append(args, "-e", k+"="+v)
	}
	id := e.d.Run(t, append(args, image)...)
	t.Cleanup(func() { e.d.Command(context.Background(), "rm", "-f", id).Run() })
	return id
}

// devcontainerExec returns a command builder that runs its arguments in
// repo's dev container through `devcontainer exec` (so as the remote user),
// with extraEnv added to the environment (DOCKER_HOST at least).
func devcontainerExec(e env, repo string, extraEnv ...string) func(args ...string) *exec.Cmd {
	return func(args ...string) *exec.Cmd {
		c := exec.Command(e.dcli, append([]string{"exec", "--workspace-folder", repo, "--docker-path", e.d.Path}, args...)...)
		c.Env = append(os.Environ(), extraEnv...)
		return c
	}
}
