package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/devbox-dev/devbox/internal/devboxtest"
	"github.com/devbox-dev/devbox/internal/kube"
	"github.com/devbox-dev/devbox/internal/layout"
	"github.com/devbox-dev/devbox/internal/policy"
	"github.com/devbox-dev/devbox/internal/sandbox"
)

// TestKube runs the Pod `devbox kube pod --podman` writes with Debian's
// podman (`podman kube play`, rootful), on an internal podman network
// holding the world: the deny-all init container, then the fence
// container, fenced and verified; in the agent's container (uid 1000, no
// capability) the escape suite finds no way out and devbox doctor is
// clean; the agent cannot see the fence's files. It logs the time from
// `kube play` to fenced and the pod's memory and CPU at rest and under
// the escape suite (podman pod stats). Cleanup: `podman kube down`, the
// image removed from podman's store.
func TestKube(t *testing.T) {
	e := setup(t)
	var m podmanMode
	for _, mm := range podmanModes(t) {
		if mm.user == nil {
			m = mm
		}
	}
	shared := podmanShared(t, "devbox-kube-e2e-", &e.escape, &e.worldd)
	pd := m.cli(t, shared)
	// The credentials policy (the anthropic and git routes, both hosts
	// served by the world's HTTPS server at host 250) without Claude Code:
	// the Job borrows the host's pinned binary, which keeps this build to
	// the small layers.
	pol := credentialsPolicy(e, policy.ClaudeCodeNone)
	image := pushPolicyImage(t, e, pol)
	t.Cleanup(func() { pd.Command(context.Background(), "rmi", "-f", image).Run() })
	apiKey, gitToken := "sk-ant-api03-"+randHex(16), "ghp_"+randHex(16)
	w := startWorldWith(t, pd, e.base, e.worldd, worldOptions{Prefix4: "10.233", Prefix6: "fd7f:db1", Records: []func(*world) []string{allowedAAAA, func(w *world) []string {
		return []string{"api.anthropic.test A 60 " + w.IP(250), "git.test A 60 " + w.IP(250)}
	}}})
	tls := tlsDir(t, "api.anthropic.test", "git.test")
	w.env = map[string]string{"SSL_CERT_FILE": testCAPath}
	// Control: an unfenced container asks the world for a name carrying
	// the nonce, so the world's log is known to record such queries.
	control := "control-" + w.Nonce + ".test"
	pd.Command(context.Background(), append(append([]string{"run", "--rm"}, w.runArgs()...), e.base, "getent", "hosts", control)...).Run()

	// The YAML as a user gets it: no policy file here, so devbox reads the
	// policy baked into the image from the registry.
	name := "kube-" + randHex(4)
	dir := t.TempDir()
	secret := createKubeSecret(t, pd, dir, name+"-credentials", map[string]string{"anthropic": apiKey, "github": gitToken})
	out := run(t, dir, nil, e.devbox, "kube", "pod", "--podman", "--image", image, "--name", name, "--secret", secret)
	file := kubeTestPod(t, w, out, filepath.Join(dir, "pod.yaml"), []corev1.Volume{hostPathVolume("e2e-bin", shared), hostPathVolume("e2e-ca", filepath.Join(tls, "ca.pem"))},
		map[string][]corev1.VolumeMount{
			kube.FenceName: {{Name: "e2e-ca", MountPath: testCAPath, ReadOnly: true}},
			kube.AgentName: {{Name: "e2e-bin", MountPath: "/opt/e2e", ReadOnly: true}},
		}, nil)
	t.Logf("generated pod (test additions: dnsConfig, verify targets, the test CA in the fence, /opt/e2e in the agent):\n%s", out)

	start := time.Now()
	kubePlay(t, pd, w, file, name)
	played := time.Since(start)
	fence, agent := name+"-"+kube.FenceName, name+"-"+kube.AgentName
	t.Cleanup(func() {
		if t.Failed() {
			ps, _ := pd.Command(context.Background(), "ps", "-a", "--pod", "--format", "{{.Names}} {{.Status}}").CombinedOutput()
			logs, _ := pd.Command(context.Background(), "logs", fence).CombinedOutput()
			t.Logf("containers:\n%s\nfence log:\n%s", ps, logs)
		}
	})
	pexec := func(ctr string, args ...string) *exec.Cmd {
		return pd.Command(context.Background(), append([]string{"exec", ctr}, args...)...)
	}
	waitFor(t, 90*time.Second, "the fence container fenced", func() (bool, string) {
		b, err := pexec(fence, "devbox", "entrypoint", "--fenced").CombinedOutput()
		if err != nil {
			logs, _ := pd.Command(context.Background(), "logs", fence).CombinedOutput()
			return false, string(b) + "\nfence log:\n" + string(logs)
		}
		return true, ""
	})
	t.Logf("podman kube play → fenced: %v (kube play returned after %v)", time.Since(start).Round(time.Millisecond), played.Round(time.Millisecond))

	// The world's HTTPS server (the fake Messages API and git over smart
	// HTTP), started now: it runs from the devbox image, which has git,
	// and which kube play has just pulled, so the pull stays in the figure
	// above.
	https := w.Net + "-https"
	t.Cleanup(func() { pd.Command(context.Background(), "rm", "-f", "-t", "0", https).Run() })
	pd.Run(t, "run", "-d", "--name", https, "--network", w.Net, "--ip", w.IP(250), "--user", "0",
		"--entrypoint", "/opt/e2e/"+filepath.Base(e.worldd), "-v", shared+":/opt/e2e:ro", "-v", tls+":/world:ro", image,
		"-addr", w.IP(250), "-tcp", "", "-udp", "",
		"-tls-cert", "/world/cert.pem", "-tls-key", "/world/key.pem",
		"-api-host", "api.anthropic.test", "-api-key", apiKey,
		"-git-host", "git.test", "-git-token", gitToken, "-git-dir", "/srv/git", "-git-repo", "acme/app")
	worldLog := func() string {
		b, _ := pd.Command(context.Background(), "logs", https).CombinedOutput()
		return string(b)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the world's HTTPS server saw:\n%s", worldLog())
		}
	})
	waitFor(t, 30*time.Second, https+" ready", func() (bool, string) {
		l := worldLog()
		return strings.Contains(l, "worldd: ready"), l
	})

	// The agent's container: its own uid, no capability.
	if b, err := pexec(agent, "id", "-u").Output(); err != nil || strings.TrimSpace(string(b)) != "1000" {
		t.Fatalf("agent runs as %q (%v), want 1000", b, err)
	}
	if b, err := pexec(agent, "grep", "^Cap", "/proc/self/status").Output(); err != nil || strings.Count(string(b), "0000000000000000") != 5 {
		t.Errorf("agent capabilities (%v):\n%s", err, b)
	}
	// The fence's state is readable, not writable; the fence's secrets
	// directory and log are not in the agent's container at all.
	if err := pexec(agent, "sh", "-c", "echo x > /run/devbox/status").Run(); err == nil {
		t.Error("the agent wrote the fence's status")
	}
	if err := pexec(agent, "ls", "/var/run/devbox-credentials").Run(); err == nil {
		t.Error("the agent's container has the credentials mount")
	}

	// shareProcessNamespace lets the agent see the fence's daemons (doctor
	// needs it); it must not let it read or signal them.
	daemons, err := pexec(agent, "sh", "-c", `for p in /proc/[0-9]*; do u=$(awk '/^Uid:/{print $2}' $p/status 2>/dev/null); case "$u" in 996|997|998) echo ${p#/proc/};; esac; done`).Output()
	if err != nil || len(strings.Fields(string(daemons))) < 3 {
		t.Fatalf("the agent does not see the three fence daemons (DNS filter, gate, gateway) in the shared pid namespace (%v): %q", err, daemons)
	}
	for _, pid := range strings.Fields(string(daemons)) {
		for _, try := range [][]string{{"cat", "/proc/" + pid + "/environ"}, {"ls", "/proc/" + pid + "/root/"}, {"cat", "/proc/" + pid + "/mem"}, {"sh", "-c", "kill -0 " + pid}} {
			if b, err := pexec(agent, try...).CombinedOutput(); err == nil {
				t.Errorf("the agent could %v a fence daemon's process:\n%s", try, b)
			}
		}
	}
	t.Logf("the agent sees the fence's daemons %v and can neither read (environ, root, mem) nor signal them", strings.Fields(string(daemons)))

	stats := func() string {
		b, _ := pd.Command(context.Background(), "pod", "stats", "--no-stream", "--format", "{{.Name}} cpu {{.CPU}} mem {{.MemUsage}} pids {{.PIDS}}", name).Output()
		return strings.ReplaceAll(strings.TrimSpace(string(b)), "\n", "; ")
	}
	// The pod's CPU time from its cgroup, read on the host (cgroup v1
	// cpuacct.usage in ns, or v2 cpu.stat usage_usec): podman's CPU % is
	// an average since each container started.
	cg := strings.TrimSpace(pd.Run(t, "pod", "inspect", "--format", "{{.CgroupPath}}", name))
	cpuUsec := func() (int64, string) {
		if b, err := os.ReadFile(filepath.Join("/sys/fs/cgroup/cpuacct", cg, "cpuacct.usage")); err == nil {
			var ns int64
			fmt.Sscan(strings.TrimSpace(string(b)), &ns)
			return ns / 1000, "cgroup v1 " + cg
		}
		b, err := os.ReadFile(filepath.Join("/sys/fs/cgroup", cg, "cpu.stat"))
		if err != nil {
			t.Fatalf("the pod's cgroup %s: %v", cg, err)
		}
		var us int64
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "usage_usec "); ok {
				fmt.Sscan(v, &us)
			}
		}
		return us, "cgroup v2 " + cg
	}
	idle0, _ := cpuUsec()
	time.Sleep(10 * time.Second)
	idle1, per := cpuUsec()
	t.Logf("pod at rest: %s; CPU over 10 s idle: %.2f ms (%s)", stats(), float64(idle1-idle0)/1000, per)

	// The escape suite as the agent, while sampling the pod's use.
	var mu sync.Mutex
	var samples []string
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-done:
				return
			case <-time.After(time.Second):
				s := stats()
				mu.Lock()
				samples = append(samples, s)
				mu.Unlock()
			}
		}
	}()
	conns := func() int { return strings.Count(worldLog(), "conn https ") }
	conns0 := conns()
	busy0, _ := cpuUsec()
	t0 := time.Now()
	// With the gateway's attempts (a foreign key, a path out of the
	// route, …) and the protected hosts reached directly.
	escapeSuite(t, pexec(agent, append([]string{"/opt/e2e/devbox-escape", "--gateway", layout.GatewayAddr,
		"--protected-name", "api.anthropic.test:443", "--protected-name", "git.test:443"}, podmanEscapeArgs(w, "")...)...), 60, 2)
	busy1, per := cpuUsec()
	t.Logf("escape suite: %v, pod CPU %.1f ms (%s)", time.Since(t0).Round(time.Millisecond), float64(busy1-busy0)/1000, per)
	close(done)
	if n := conns() - conns0; n != 0 {
		t.Errorf("%d connections reached the world's HTTPS server during the escape suite, want 0", n)
	}
	mu.Lock()
	t.Logf("pod under the escape suite (1 s samples):\n%s", strings.Join(samples, "\n"))
	mu.Unlock()

	var doctor bytes.Buffer
	cmd := pexec(agent, "devbox", "doctor", "--workspace", kube.WorkspaceDir)
	cmd.Stdout, cmd.Stderr = &doctor, &doctor
	if err := cmd.Run(); err != nil {
		t.Errorf("devbox doctor in the agent's container: %v\n%s", err, doctor.String())
	} else {
		t.Logf("devbox doctor:\n%s", doctor.String())
	}

	t.Run("credential route", func(t *testing.T) {
		kubeCredentialRoute(t, pd, fence, agent, apiKey, gitToken, worldLog)
	})
	t.Run("job", func(t *testing.T) {
		kubeJob(t, e, pd, w, image, pol, secret, tls, apiKey, worldLog)
	})
	// Last: reading the world's log stops its servers.
	checkWorldLog(t, w, control, "["+w.W1v6+"]:8080")
}

// createKubeSecret makes the podman secret name holding keys, in the form
// podman 4.3.1's kube play reads for a Secret volume: a Kubernetes Secret
// whose data values it writes into the files verbatim, undecoded
// (podman#16625, fixed in 4.4; a cluster and a newer podman decode
// base64 there, and a Secret object in the played YAML is stored encoded).
// It is removed when t ends.
func createKubeSecret(t *testing.T, pd devboxtest.Docker, dir, name string, keys map[string]string) string {
	t.Helper()
	data := map[string]string{}
	for k, v := range keys {
		data[k] = v
	}
	b, err := kube.Marshal(&corev1.Secret{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"}, ObjectMeta: metav1.ObjectMeta{Name: name}, StringData: data})
	if err != nil {
		t.Fatal(err)
	}
	// stringData, which podman 4.3.1 ignores, renamed to data, which it
	// takes verbatim.
	b = bytes.Replace(b, []byte("\nstringData:\n"), []byte("\ndata:\n"), 1)
	file := filepath.Join(dir, "secret.yaml")
	if err := os.WriteFile(file, b, 0o600); err != nil {
		t.Fatal(err)
	}
	pd.Command(context.Background(), "secret", "rm", name).Run()
	pd.Run(t, "secret", "create", name, file)
	t.Cleanup(func() { pd.Command(context.Background(), "secret", "rm", name).Run() })
	os.Remove(file)
	return name
}

// kubePlay runs `podman kube play` of file on the world's network; when t
// ends, `podman kube down` and the removal of the pod's volumes, which
// podman 4.3.1 keeps (each emptyDir is a named volume NAME-…).
func kubePlay(t *testing.T, pd devboxtest.Docker, w *world, file, name string) {
	t.Helper()
	t.Cleanup(func() {
		if b, err := pd.Command(context.Background(), "kube", "down", file).CombinedOutput(); err != nil {
			t.Logf("podman kube down: %v\n%s", err, b)
		}
		vols, _ := pd.Command(context.Background(), "volume", "ls", "-q", "--filter", "name=^"+name+"-").Output()
		if v := strings.Fields(string(vols)); len(v) > 0 {
			if b, err := pd.Command(context.Background(), append([]string{"volume", "rm"}, v...)...).CombinedOutput(); err != nil {
				t.Errorf("podman volume rm %v: %v\n%s", v, err, b)
			}
		}
	})
	if b, err := pd.Command(context.Background(), "kube", "play", "--network", w.Net, file).CombinedOutput(); err != nil {
		t.Fatalf("podman kube play: %v\n%s", err, b)
	}
}

func hostPathVolume(name, path string) corev1.Volume {
	return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: path}}}
}

// kubeTestPod decodes the pod devbox kube wrote (out), adds what only the
// test knows (the world's resolver, the self-test's targets and the
// world's env in the fence, the test's volumes, mounts and agent env) and
// writes it to file.
func kubeTestPod(t *testing.T, w *world, out, file string, vols []corev1.Volume, mounts map[string][]corev1.VolumeMount, agentEnv map[string]string) string {
	t.Helper()
	var pod corev1.Pod
	if err := kube.DecodeStrict([]byte(out), &pod); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	pod.Spec.DNSPolicy = corev1.DNSNone
	pod.Spec.DNSConfig = &corev1.PodDNSConfig{Nameservers: []string{w.W1}}
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		c.VolumeMounts = append(c.VolumeMounts, mounts[c.Name]...)
		env := agentEnv
		if c.Name == kube.FenceName {
			env = w.containerEnv()
		} else if c.Name != kube.AgentName {
			continue
		}
		keys := make([]string, 0, len(env))
		for k := range env {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			c.Env = append(c.Env, corev1.EnvVar{Name: k, Value: env[k]})
		}
	}
	pod.Spec.Volumes = append(pod.Spec.Volumes, vols...)
	yml, err := kube.Marshal(&pod)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, yml, 0o644); err != nil {
		t.Fatal(err)
	}
	return file
}

// kubeCredentialRoute: from the agent's container a request to the
// credential gateway reaches the world's fake Messages API with the
// Secret's key in place of the agent's, and the agent finds the key
// nowhere it can read (files, any process's environment or command line,
// the fence's files through /proc/PID/root), while the fence container
// holds it (so the search would have found a mount of it).
func kubeCredentialRoute(t *testing.T, pd devboxtest.Docker, fence, agent, apiKey, gitToken string, worldLog func() string) {
	body := `{"model":"claude-test","max_tokens":16,"messages":[{"role":"user","content":"hi"}]}`
	b, err := pd.Command(context.Background(), "exec", agent, "curl", "-sS", "--max-time", "20", "http://"+layout.GatewayAddr+"/v1/messages",
		"-H", "x-api-key: attacker-key", "-H", "content-type: application/json", "-H", "anthropic-version: 2023-06-01", "-d", body).CombinedOutput()
	if err != nil || !strings.Contains(string(b), "hello from the world's Messages API") {
		t.Fatalf("curl to the gateway from the agent's container: %v\n%s", err, b)
	}
	n := apiSawOnly(t, worldLog(), apiKey, "attacker-key")
	t.Logf("agent → gateway → api.anthropic.test: %d request(s), each with the Secret's key only (answer %s)", n, tail1(string(b)))

	// The control: the fence container has both secrets.
	for k, v := range map[string]string{"anthropic": apiKey, "github": gitToken} {
		if got, err := pd.Command(context.Background(), "exec", fence, "cat", layout.SecretsDir+"/"+k).Output(); err != nil || string(got) != v {
			t.Fatalf("the fence container's %s/%s: %q (%v), want the Secret's value", layout.SecretsDir, k, got, err)
		}
	}
	// Every file the agent can read, searched for the secrets' random
	// parts (patterns on stdin, so no command line carries them), with a
	// file of its own as the control.
	marker := "kube-control-" + randHex(8)
	if err := pd.Command(context.Background(), "exec", agent, "sh", "-c", "echo "+marker+" > /tmp/control").Run(); err != nil {
		t.Fatal(err)
	}
	grep := pd.Command(context.Background(), "exec", "-i", agent, "grep", "-rlsF", "-D", "skip", "--exclude-dir=proc", "--exclude-dir=sys", "-f", "-", "/")
	grep.Stdin = strings.NewReader(strings.TrimPrefix(apiKey, "sk-ant-api03-") + "\n" + strings.TrimPrefix(gitToken, "ghp_") + "\n" + marker + "\n")
	found, _ := grep.Output()
	if strings.TrimSpace(string(found)) != "/tmp/control" {
		t.Errorf("files holding a secret (or the control) in the agent's container: want /tmp/control only, got:\n%s", found)
	}
	// Every process's environment and command line, and the secrets
	// through every process's root.
	procs, _ := pd.Command(context.Background(), "exec", agent, "sh", "-c",
		`for p in /proc/[0-9]*; do cat $p/environ $p/cmdline; echo; for f in `+layout.SecretsDir+`/anthropic `+kube.CredentialsMount+`/anthropic; do cat $p/root$f; done; done 2>/dev/null`).Output()
	if !strings.Contains(string(procs), "CLAUDE_CONFIG_DIR=") {
		t.Fatalf("the agent read no environment under /proc (the search proves nothing):\n%s", procs)
	}
	for _, s := range []string{strings.TrimPrefix(apiKey, "sk-ant-api03-"), strings.TrimPrefix(gitToken, "ghp_")} {
		if strings.Contains(string(procs), s) {
			t.Errorf("a secret is readable through /proc in the agent's container")
		}
	}
	if b, err := pd.Command(context.Background(), "exec", agent, "env").Output(); err != nil || strings.Contains(string(b), strings.TrimPrefix(apiKey, "sk-ant-api03-")) {
		t.Errorf("the agent's environment (%v) holds the key", err)
	}
	t.Logf("the agent finds the secrets in no file (grep -r / found only its control), no /proc/PID/environ|cmdline, no /proc/PID/root; the fence container holds them")
}

// kubeJob runs the Pod `devbox kube job --podman` writes, once: the
// agent's script waits for the fence, clones git.test/acme/app through
// the gateway's git route into the workspace emptyDir, runs `claude -p`
// (the host's pinned Claude Code, mounted read-only, with the managed
// settings the image build writes for this policy: the gateway as its
// API) against the world's fake Messages API, and, as the fake API edits
// nothing, pushes nothing. The agent's container must exit 0 with Claude
// Code's JSON result in its log.
func kubeJob(t *testing.T, e env, pd devboxtest.Docker, w *world, image, pol, secret, tls, apiKey string, worldLog func() string) {
	claude, err := filepath.EvalSymlinks(devboxtest.Env(t, "DEVBOX_CLAUDE"))
	if err != nil {
		t.Fatal(err)
	}
	p, err := policy.Parse("credentials policy", []byte(pol))
	if err != nil {
		t.Fatal(err)
	}
	settings, err := sandbox.ClaudeManagedSettings(p)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	os.Chmod(dir, 0o755)
	settingsFile := filepath.Join(dir, "managed-settings.json")
	if err := os.WriteFile(settingsFile, settings, 0o644); err != nil {
		t.Fatal(err)
	}
	name := "kube-job-" + randHex(4)
	out := run(t, dir, nil, e.devbox, "kube", "job", "--podman", "--image", image, "--name", name, "--secret", secret,
		"--repo", "https://git.test/acme/app.git", "--branch", "devbox/kube-e2e", "--prompt", "say hello")
	file := kubeTestPod(t, w, out, filepath.Join(dir, "job.yaml"),
		[]corev1.Volume{hostPathVolume("e2e-ca", filepath.Join(tls, "ca.pem")), hostPathVolume("e2e-claude", filepath.Dir(claude)), hostPathVolume("e2e-settings", settingsFile)},
		map[string][]corev1.VolumeMount{
			kube.FenceName: {{Name: "e2e-ca", MountPath: testCAPath, ReadOnly: true}},
			kube.AgentName: {{Name: "e2e-claude", MountPath: "/opt/claude", ReadOnly: true}, {Name: "e2e-settings", MountPath: sandbox.ClaudeManagedSettingsPath, ReadOnly: true}},
		},
		map[string]string{"PATH": "/opt/claude:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"})
	t.Logf("generated job pod (test additions: dnsConfig, verify targets, the test CA in the fence, Claude Code and its managed settings in the agent):\n%s", out)

	start := time.Now()
	kubePlay(t, pd, w, file, name)
	agent := name + "-" + kube.AgentName
	logs := func() string {
		b, _ := pd.Command(context.Background(), "logs", agent).CombinedOutput()
		return string(b)
	}
	var state string
	waitFor(t, 180*time.Second, "the job's agent container exited", func() (bool, string) {
		b, _ := pd.Command(context.Background(), "inspect", "--format", "{{.State.Status}} {{.State.ExitCode}}", agent).Output()
		state = strings.TrimSpace(string(b))
		return strings.HasPrefix(state, "exited"), state + "\n" + logs()
	})
	log := logs()
	t.Logf("job: kube play → agent exited in %v (%s); its log:\n%s", time.Since(start).Round(time.Millisecond), state, log)
	if state != "exited 0" {
		fl, _ := pd.Command(context.Background(), "logs", name+"-"+kube.FenceName).CombinedOutput()
		t.Fatalf("the job's agent container: %s, want exited 0\nfence log:\n%s", state, fl)
	}
	var res struct {
		Result  string `json:"result"`
		IsError bool   `json:"is_error"`
	}
	i := strings.Index(log, `{"type":"result"`)
	if i < 0 {
		i = strings.IndexByte(log, '{')
	}
	if i < 0 || json.NewDecoder(strings.NewReader(log[i:])).Decode(&res) != nil || res.IsError || !strings.Contains(res.Result, "hello from the world's Messages API") {
		t.Fatalf("no Claude Code result in the job's log")
	}
	if !strings.Contains(log, "no change to push") {
		t.Errorf("the job's log does not say it had nothing to push")
	}
	wl := worldLog()
	if !strings.Contains(wl, "git GET /acme/app.git/info/refs?service=git-upload-pack") || !strings.Contains(wl, "git POST /acme/app.git/git-upload-pack") {
		t.Errorf("the world's git server saw no clone of acme/app")
	}
	want := fmt.Sprintf("x-api-key=%q authorization=[]", []string{apiKey})
	var api, git int
	for _, line := range strings.Split(wl, "\n") {
		switch {
		case strings.HasPrefix(line, "git "):
			git++
		case strings.HasPrefix(line, "api "):
			api++
			if !strings.HasSuffix(line, want) {
				t.Errorf("the fake API saw %q: want the Secret's key only", line)
			}
		}
	}
	t.Logf("job result %q; the world's HTTPS server saw %d API requests (the route's check and the job's), each with the Secret's key only, and %d git requests (the clone)", res.Result, api, git)
}
