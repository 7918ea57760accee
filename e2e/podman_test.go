package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/devbox-dev/devbox/internal/devboxtest"
)

// podmanMode is one way of running Debian's podman that scripts/services
// prepared: rootful (root, with its storage and networks under
// DEVBOX_PODMAN_DIR) or rootless (the unprivileged DEVBOX_PODMAN_USER).
type podmanMode struct {
	name string
	dir  string     // DEVBOX_PODMAN_DIR: the configuration files
	user *user.User // nil when rootful
	// initArgs are added to `devbox init`.
	initArgs []string
}

// env is the environment podman and the Dev Containers CLI run with: the
// test registry as an insecure registry, its credentials, and for rootful
// podman the storage and networks under dir; for the rootless user what a
// login gives it.
func (m podmanMode) env(path string) []string {
	env := []string{
		"PATH=" + path,
		"CONTAINERS_REGISTRIES_CONF=" + filepath.Join(m.dir, "registries.conf"),
	}
	if m.user == nil {
		return append(env,
			"HOME="+os.Getenv("HOME"),
			"CONTAINERS_CONF="+filepath.Join(m.dir, "containers.conf"),
			"CONTAINERS_STORAGE_CONF="+filepath.Join(m.dir, "storage.conf"),
			"REGISTRY_AUTH_FILE="+filepath.Join(os.Getenv("DOCKER_CONFIG"), "config.json"))
	}
	return append(env,
		"HOME="+m.user.HomeDir,
		"USER="+m.user.Username,
		"XDG_RUNTIME_DIR=/run/user/"+m.user.Uid,
		"REGISTRY_AUTH_FILE="+filepath.Join(m.dir, "auth.json"))
}

// command runs name args as the mode's user, in dir, with env(path) only.
func (m podmanMode) command(dir, path, name string, args ...string) *exec.Cmd {
	argv := append([]string{"env", "-i"}, m.env(path)...)
	argv = append(argv, name)
	argv = append(argv, args...)
	if m.user != nil {
		argv = append([]string{"runuser", "-u", m.user.Username, "--"}, argv...)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = dir
	return cmd
}

// cli writes a podman wrapper running as the mode's user and returns it
// as the tests' container CLI (the world, exec, cp, restart).
func (m podmanMode) cli(t testing.TB, bin string) devboxtest.Docker {
	t.Helper()
	var q []string
	for _, a := range m.command("/", "/usr/sbin:/usr/bin:/sbin:/bin", "podman").Args {
		q = append(q, "'"+a+"'")
	}
	p := filepath.Join(bin, "podman-"+m.name)
	if err := os.WriteFile(p, []byte("#!/bin/sh\ncd / && exec "+strings.Join(q, " ")+` "$@"`+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return devboxtest.Docker{Path: p}
}

// podmanModes are the two modes scripts/services set up.
func podmanModes(t testing.TB) []podmanMode {
	t.Helper()
	dir := devboxtest.Env(t, "DEVBOX_PODMAN_DIR")
	u, err := user.Lookup(devboxtest.Env(t, "DEVBOX_PODMAN_USER"))
	if err != nil {
		t.Fatalf("the rootless podman user: %v (scripts/services up creates it)", err)
	}
	return []podmanMode{
		{name: "rootful", dir: dir, initArgs: []string{"--engine", "podman-rootful"}},
		{name: "rootless", dir: dir, user: u},
	}
}

// podmanShared makes a world-readable directory (removed after the test)
// and copies each binary into it, pointing *bin at the copy: the rootless
// user runs the binaries and reads the repository from a directory of
// their own that it can read.
func podmanShared(t testing.TB, prefix string, bins ...*string) string {
	t.Helper()
	shared, err := os.MkdirTemp("", prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(shared) })
	os.Chmod(shared, 0o755)
	for _, b := range bins {
		dst := filepath.Join(shared, filepath.Base(*b))
		run(t, "", nil, "cp", *b, dst)
		*b = dst
	}
	return shared
}

// TestPodman: `devcontainer up --docker-path podman` with Debian's podman,
// rootful (as root) and rootless (as an unprivileged user), one dev
// container each from the image `devbox build` pushed. The world is two
// worldd containers on an internal podman network (no gateway, no route
// out) of the same podman. In each mode: the fence is up in the
// container's own network namespace, IPv4 and IPv6 (a denied address is
// refused, an allowed name works over both); the escape suite passes as
// the remote user; after `podman restart` the fence is back (a new start,
// verified again); with the DNS filter killed, names fail closed.
func TestPodman(t *testing.T) {
	e := setup(t)
	modes := podmanModes(t)
	shared := podmanShared(t, "devbox-podman-e2e-", &e.escape, &e.worldd)
	// The sample policy's image: TestFence's when it ran in this binary.
	image := sampleImage
	if image == "" {
		image = buildImageTagged(t, e, nil, "podman-"+randHex(6))
	}

	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			start := time.Now()
			testPodmanMode(t, e, m, image, shared)
			t.Logf("%s: %v", m.name, time.Since(start).Round(time.Millisecond))
		})
	}
}

func testPodmanMode(t *testing.T, e env, m podmanMode, image, shared string) {
	pd := m.cli(t, shared)
	pe := e
	pe.d = pd
	// Last: the image leaves this podman's store (every devbox binary
	// makes a new digest, so a kept one would only pile up).
	t.Cleanup(func() { pd.Command(context.Background(), "rmi", image).Run() })
	w := startWorldWith(t, pd, e.base, e.worldd, worldOptions{Prefix4: "10.232", Prefix6: "fd7f:db0", Records: []func(*world) []string{allowedAAAA}})
	control := "control-" + w.Nonce + ".test"
	pd.Command(context.Background(), append(append([]string{"run", "--rm"}, w.runArgs()...), e.base, "getent", "hosts", control)...).Run()

	repo := podmanRepo(t, e, w, m, image, shared)
	path := strings.Join([]string{filepath.Dir(e.devbox), filepath.Dir(e.dcli), "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}, ":")
	dcli := func(args ...string) *exec.Cmd {
		return m.command(repo, path, e.dcli, append([]string{args[0], "--workspace-folder", repo, "--docker-path", "podman"}, args[1:]...)...)
	}

	start := time.Now()
	cmd := dcli("up")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	var res struct {
		Outcome     string `json:"outcome"`
		ContainerID string `json:"containerId"`
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	json.Unmarshal([]byte(lines[len(lines)-1]), &res)
	id := res.ContainerID
	if id != "" {
		t.Cleanup(func() { removePodmanContainer(pd, id) })
	}
	if runErr != nil || res.Outcome != "success" {
		t.Fatalf("devcontainer up --docker-path podman (%s): outcome %q: %v\n%s%s", m.name, res.Outcome, runErr, tail(stdout.String()), tail(stderr.String()))
	}
	first := requireFenced(t, pd, id, "")
	t.Logf("devcontainer up --docker-path podman (%s, image pulled or cached) to a fenced container: %v", m.name, time.Since(start).Round(time.Millisecond))

	// The container's uids as the host sees them (the test runs in the
	// host's user namespace, so /proc/PID/uid_map reads in host uids).
	pid := pd.Run(t, "inspect", "--format", "{{.State.Pid}}", id)
	raw, err := os.ReadFile("/proc/" + pid + "/uid_map")
	if err != nil {
		t.Fatal(err)
	}
	uidMap := strings.TrimSpace(string(raw))
	t.Logf("container uid_map, host view: %s", strings.Join(strings.Fields(uidMap), " "))
	prepare(t, pe, id)
	dexec := func(args ...string) *exec.Cmd { return dcli(append([]string{"exec"}, args...)...) }
	out, err := dexec("id", "-u").Output()
	if err != nil || strings.TrimSpace(string(out)) == "0" {
		t.Fatalf("devcontainer exec runs as uid %q (%v), want the non-root remote user", out, err)
	}
	remote := strings.TrimSpace(string(out))
	if m.user == nil {
		// Rootful with --userns=host: no user namespace.
		if f := strings.Fields(uidMap); len(f) != 3 || f[0] != "0" || f[1] != "0" {
			t.Errorf("rootful: uid_map %q, want the host's (0 0 4294967295)", uidMap)
		}
	} else {
		// Rootless: the remote user is the host user (keep-id and the
		// CLI's uid update), container root is one of its subordinate
		// uids, and nothing maps to host root.
		if remote != m.user.Uid {
			t.Errorf("rootless: the remote user is uid %s, want the host user's %s (keep-id)", remote, m.user.Uid)
		}
		if h, ok := hostUID(uidMap, remote); !ok || h != m.user.Uid {
			t.Errorf("rootless: the remote user %s is host uid %q, want %s", remote, h, m.user.Uid)
		}
		if h, ok := hostUID(uidMap, "0"); !ok || h == "0" || h == m.user.Uid {
			t.Errorf("rootless: container root is host uid %q, want a subordinate uid", h)
		}
		if _, ok := outsideUID(uidMap, 0); ok {
			t.Errorf("rootless: host root is mapped into the container: %s", uidMap)
		}
	}
	ws := "/workspaces/" + filepath.Base(repo)
	escapeSuite(t, dexec(append([]string{"devbox-escape"}, podmanEscapeArgs(w, ws)...)...), 40, 2)
	if out, err := dexec("devbox", "doctor", "--workspace", ws).CombinedOutput(); err != nil {
		t.Errorf("devbox doctor as the remote user: %v\n%s", err, out)
	}
	// IPv6 both ways: the allowed name works over IPv6, a denied address
	// does not.
	requireIPv6(t, dexec, w)

	// Restart: a new start of the entrypoint fences the new namespace.
	pd.Run(t, "restart", "-t", "2", id)
	requireFenced(t, pd, id, first.StartID)
	escapeSuite(t, dexec(append([]string{"devbox-escape"}, podmanEscapeArgs(w, ws)...)...), 40, 2)
	dnsFilterDownWith(t, pe, w, id, dexec, podmanEscapeArgs(w, ""))
	checkWorldLog(t, w, control, "["+w.W1v6+"]:8080")
}

// requireIPv6 connects as the remote user to allowed.test over IPv6 (its
// AAAA answer is W1's IPv6 address) and to W2's IPv6 address directly.
func requireIPv6(t testing.TB, dexec func(args ...string) *exec.Cmd, w *world) {
	t.Helper()
	curl := func(url string) (string, error) {
		out, err := dexec("curl", "-6", "-sS", "-o", "/dev/null", "-w", "%{http_code} %{remote_ip}", "--max-time", "5", url).CombinedOutput()
		return strings.TrimSpace(string(out)), err
	}
	out, err := curl("http://allowed.test:8080/")
	if err != nil || out != "200 "+w.W1v6 {
		t.Errorf("curl -6 http://allowed.test:8080/ as the remote user: %q (%v), want 200 from %s", out, err, w.W1v6)
	}
	out, err = curl("http://[" + w.W2v6 + "]:8080/")
	if err == nil || strings.HasPrefix(out, "200") {
		t.Errorf("curl -6 to the denied [%s]:8080 as the remote user: %q (%v), want a failure", w.W2v6, out, err)
	}
	t.Logf("IPv6: allowed.test:8080 answered from %s; [%s]:8080 refused: %s", w.W1v6, w.W2v6, out)
}

// podmanRepo is sampleRepo for podman mode m: `devbox init` with the
// mode's arguments, the world in runArgs, and the repository owned by the
// user who runs `devcontainer up` (the rootless user reads it through
// directories it can enter).
func podmanRepo(t testing.TB, e env, w *world, m podmanMode, image, shared string) string {
	t.Helper()
	dir := filepath.Join(shared, m.name, "repo")
	os.MkdirAll(filepath.Join(dir, ".devcontainer"), 0o755)
	os.Chmod(filepath.Dir(dir), 0o755)
	run(t, dir, nil, "git", "init", "-q", ".")
	os.WriteFile(filepath.Join(dir, ".git/hooks/pre-commit"), []byte("#!/bin/sh\nexit 0\n"), 0o755)
	os.WriteFile(filepath.Join(dir, ".devcontainer/devbox.policy.jsonc"), []byte(policyFor(e, w, e.registry+"/devbox/e2e:unused")), 0o644)
	run(t, dir, nil, e.devbox, "lock", ".devcontainer/devbox.policy.jsonc")
	owner := "1000:1000"
	if m.user != nil {
		owner = m.user.Uid + ":" + m.user.Gid
	}
	// init runs as the user who runs `devcontainer up`: the git audit's
	// first state is that user's, and the initializeCommand checks it.
	devboxInit := func() {
		run(t, dir, nil, "chown", "-R", owner, ".")
		cmd := m.command(dir, "/usr/sbin:/usr/bin:/sbin:/bin", e.devbox, append([]string{"init", "--image", image}, m.initArgs...)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("devbox init as the %s user: %v\n%s", m.name, err, out)
		}
	}
	devboxInit()
	patchConfig(t, filepath.Join(dir, ".devcontainer/devcontainer.json"), w, false)
	devboxInit()
	return dir
}

// allowedAAAA also answers allowed.test's AAAA query with W1's IPv6
// address, so an allowed destination can be reached over IPv6.
func allowedAAAA(w *world) []string { return []string{"allowed.test AAAA 60 " + w.W1v6} }

// podmanEscapeArgs are the world's escape targets for a world whose
// allowed.test also has an AAAA record: W1's IPv6 address on the allowed
// port is allowed (the entrypoint's self-test has resolved the name), so
// the IPv6 attempts there use another port.
func podmanEscapeArgs(w *world, ws string) []string {
	args := w.escapeArgs(ws)
	for i, a := range args {
		if a == "["+w.W1v6+"]:8080" {
			args[i] = "[" + w.W1v6 + "]:80"
		}
	}
	return args
}

// removePodmanContainer removes the container and the image the Dev
// Containers CLI derived for it (the remote user's uid), so runs leave no
// pile of images in the user's storage.
func removePodmanContainer(d devboxtest.Docker, id string) {
	img, _ := d.Command(context.Background(), "inspect", "--format", "{{.ImageName}}", id).Output()
	d.Command(context.Background(), "rm", "-f", "-t", "0", id).Run()
	if name := strings.TrimSpace(string(img)); strings.Contains(name, "vsc-") {
		d.Command(context.Background(), "rmi", name).Run()
	}
}

// hostUID maps a container uid to the host's through uid_map lines
// ("inside outside count").
func hostUID(uidMap, inside string) (string, bool) {
	var in uint64
	if _, err := fmt.Sscan(inside, &in); err != nil {
		return "", false
	}
	for _, line := range strings.Split(uidMap, "\n") {
		var a, b, n uint64
		if _, err := fmt.Sscan(line, &a, &b, &n); err == nil && in >= a && in < a+n {
			return fmt.Sprint(b + in - a), true
		}
	}
	return "", false
}

// outsideUID says whether host uid h is mapped into the container.
func outsideUID(uidMap string, h uint64) (uint64, bool) {
	for _, line := range strings.Split(uidMap, "\n") {
		var a, b, n uint64
		if _, err := fmt.Sscan(line, &a, &b, &n); err == nil && h >= b && h < b+n {
			return a + h - b, true
		}
	}
	return 0, false
}
