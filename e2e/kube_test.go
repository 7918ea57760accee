package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/devbox-dev/devbox/internal/kube"
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
	image := sampleImage
	if image == "" {
		image = buildImageTagged(t, e, nil, "kube-"+randHex(6))
	}
	t.Cleanup(func() { pd.Command(context.Background(), "rmi", image).Run() })
	w := startWorldWith(t, pd, e.base, e.worldd, worldOptions{Prefix4: "10.233", Prefix6: "fd7f:db1", Records: []func(*world) []string{allowedAAAA}})
	// Control: an unfenced container asks the world for a name carrying
	// the nonce, so the world's log is known to record such queries.
	control := "control-" + w.Nonce + ".test"
	pd.Command(context.Background(), append(append([]string{"run", "--rm"}, w.runArgs()...), e.base, "getent", "hosts", control)...).Run()

	// The YAML as a user gets it: no policy file here, so devbox reads the
	// policy baked into the image from the registry.
	name := "kube-" + randHex(4)
	dir := t.TempDir()
	out := run(t, dir, nil, e.devbox, "kube", "pod", "--podman", "--image", image, "--name", name)
	var pod corev1.Pod
	if err := kube.DecodeStrict([]byte(out), &pod); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	// What only the test knows: the world's resolver, the self-test's
	// targets, IPv6 on, and the escape suite's binary (read-only).
	pod.Spec.DNSPolicy = corev1.DNSNone
	pod.Spec.DNSConfig = &corev1.PodDNSConfig{Nameservers: []string{w.W1}}
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		switch c.Name {
		case kube.FenceName:
			for k, v := range w.containerEnv() {
				c.Env = append(c.Env, corev1.EnvVar{Name: k, Value: v})
			}
		case kube.AgentName:
			c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: "e2e-bin", MountPath: "/opt/e2e", ReadOnly: true})
		}
	}
	pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: "e2e-bin", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: shared}}})
	yml, err := kube.Marshal(&pod)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "pod.yaml")
	os.WriteFile(file, yml, 0o644)
	t.Logf("generated pod (test additions: dnsConfig, verify targets, /opt/e2e):\n%s", out)

	start := time.Now()
	t.Cleanup(func() {
		if b, err := pd.Command(context.Background(), "kube", "down", file).CombinedOutput(); err != nil {
			t.Logf("podman kube down: %v\n%s", err, b)
		}
	})
	if b, err := pd.Command(context.Background(), "kube", "play", "--network", w.Net, file).CombinedOutput(); err != nil {
		t.Fatalf("podman kube play: %v\n%s", err, b)
	}
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
	if err != nil || len(strings.Fields(string(daemons))) < 2 {
		t.Fatalf("the agent sees no fence daemons in the shared pid namespace (%v): %q", err, daemons)
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
	busy0, _ := cpuUsec()
	t0 := time.Now()
	escapeSuite(t, pexec(agent, append([]string{"/opt/e2e/devbox-escape"}, podmanEscapeArgs(w, "")...)...), 40, 2)
	busy1, per := cpuUsec()
	t.Logf("escape suite: %v, pod CPU %.1f ms (%s)", time.Since(t0).Round(time.Millisecond), float64(busy1-busy0)/1000, per)
	close(done)
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
	checkWorldLog(t, w, control, "["+w.W1v6+"]:8080")
}
