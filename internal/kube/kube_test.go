package kube

import (
	"path/filepath"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"

	"github.com/devbox-dev/devbox/internal/golden"
	"github.com/devbox-dev/devbox/internal/policy"
)

const testImage = "registry.example.test:5000/team/devbox@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

func testOptions(t *testing.T, policyFile string) Options {
	t.Helper()
	p, err := policy.Load(policyFile)
	if err != nil {
		t.Fatal(err)
	}
	return Options{
		Name: "agent-1", Namespace: "agents", Image: testImage, Policy: p,
		Repo: "https://git.example.test/team/app.git", Branch: "devbox/fix-1", Prompt: "fix the failing test; say what you changed",
	}
}

// outputs are every object kind, by the name the CLI gives it.
var outputs = []struct {
	name string
	gen  func(Options) (any, error)
	// decode strictly decodes YAML into the typed object.
	decode func([]byte) (any, error)
}{
	{"pod", func(o Options) (any, error) { return Pod(o) }, func(b []byte) (any, error) { var v corev1.Pod; return &v, DecodeStrict(b, &v) }},
	{"job", func(o Options) (any, error) { return Job(o) }, func(b []byte) (any, error) { var v batchv1.Job; return &v, DecodeStrict(b, &v) }},
	{"sandbox-template", func(o Options) (any, error) { return NewSandboxTemplate(o) }, func(b []byte) (any, error) { var v SandboxTemplate; return &v, DecodeStrict(b, &v) }},
	{"networkpolicy", func(o Options) (any, error) { return NetworkPolicy(o) }, func(b []byte) (any, error) { var v networkingv1.NetworkPolicy; return &v, DecodeStrict(b, &v) }},
	{"cilium", func(o Options) (any, error) { return NewCiliumNetworkPolicy(o) }, func(b []byte) (any, error) { var v CiliumNetworkPolicy; return &v, DecodeStrict(b, &v) }},
	{"podman-pod", func(o Options) (any, error) { o.Podman = true; return Pod(o) }, func(b []byte) (any, error) { var v corev1.Pod; return &v, DecodeStrict(b, &v) }},
	{"podman-job", func(o Options) (any, error) { o.Podman = true; return JobPod(o) }, func(b []byte) (any, error) { var v corev1.Pod; return &v, DecodeStrict(b, &v) }},
}

// generated returns every output for the test policy and each example
// policy, as YAML, keyed "case.output".
func generated(t *testing.T) map[string][]byte {
	t.Helper()
	files, _ := filepath.Glob("../../examples/*.jsonc")
	files = append([]string{"testdata/agent.jsonc"}, files...)
	out := map[string][]byte{}
	for _, f := range files {
		o := testOptions(t, f)
		c := strings.TrimSuffix(filepath.Base(f), ".jsonc")
		for _, g := range outputs {
			obj, err := g.gen(o)
			if err != nil {
				t.Fatalf("%s %s: %v", c, g.name, err)
			}
			y, err := Marshal(obj)
			if err != nil {
				t.Fatal(err)
			}
			out[c+"."+g.name] = y
		}
	}
	return out
}

// TestGolden pins every output for the test policy, and the network
// policies of each example (their pods differ only in the user).
func TestGolden(t *testing.T) {
	for k, y := range generated(t) {
		if strings.HasPrefix(k, "agent.") || strings.HasSuffix(k, ".networkpolicy") || strings.HasSuffix(k, ".cilium") {
			golden.Check(t, filepath.Join("testdata", k+".yaml"), y)
		}
	}
}

// TestStrictDecode reads every output back into its type, refusing any
// field the type does not have, and checks the round trip is lossless.
func TestStrictDecode(t *testing.T) {
	for k, y := range generated(t) {
		name := k[strings.IndexByte(k, '.')+1:]
		for _, g := range outputs {
			if g.name != name {
				continue
			}
			obj, err := g.decode(y)
			if err != nil {
				t.Fatalf("%s: %v", k, err)
			}
			again, err := Marshal(obj)
			if err != nil {
				t.Fatal(err)
			}
			if string(again) != string(y) {
				t.Errorf("%s: the round trip changed it:\n%s\n---\n%s", k, y, again)
			}
		}
	}
	// And a misspelt field is refused.
	var p corev1.Pod
	if err := DecodeStrict([]byte("apiVersion: v1\nkind: Pod\nspec:\n  containerz: []\n"), &p); err == nil {
		t.Error("an unknown field decoded")
	}
}

func TestPodShape(t *testing.T) {
	o := testOptions(t, "testdata/agent.jsonc")
	pod, err := Pod(o)
	if err != nil {
		t.Fatal(err)
	}
	s := pod.Spec
	if len(s.InitContainers) != 2 || s.InitContainers[0].Name != FenceInitName || s.InitContainers[1].Name != FenceName {
		t.Fatalf("init containers: %+v", s.InitContainers)
	}
	if s.InitContainers[0].RestartPolicy != nil {
		t.Error("deny-all init container must run to completion first")
	}
	fence := s.InitContainers[1]
	if fence.RestartPolicy == nil || *fence.RestartPolicy != corev1.ContainerRestartPolicyAlways || fence.StartupProbe == nil {
		t.Error("fence is not a native sidecar with a startup probe")
	}
	agent := s.Containers[0]
	sc := agent.SecurityContext
	if *sc.RunAsUser != 1000 || !*sc.RunAsNonRoot || *sc.AllowPrivilegeEscalation || !*sc.ReadOnlyRootFilesystem || len(sc.Capabilities.Add) != 0 || sc.Capabilities.Drop[0] != "ALL" {
		t.Errorf("agent security context: %+v", sc)
	}
	if s.SecurityContext.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Error("no RuntimeDefault seccomp profile")
	}
	// The Secret is a volume of the fence container only.
	secretVol := ""
	for _, v := range s.Volumes {
		if v.Secret != nil {
			secretVol = v.Name
		}
	}
	if secretVol == "" {
		t.Fatal("no Secret volume for a policy with credentials")
	}
	for _, c := range append(append([]corev1.Container{}, s.InitContainers...), s.Containers...) {
		for _, m := range c.VolumeMounts {
			if m.Name == secretVol && c.Name != FenceName {
				t.Errorf("container %s mounts the Secret", c.Name)
			}
			if m.Name == volRun && c.Name == AgentName && !m.ReadOnly {
				t.Error("the agent can write the fence's state")
			}
		}
	}
	// Without credentials: no Secret at all.
	o.Policy.Credentials = policy.Credentials{}
	pod, err = Pod(o)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range pod.Spec.Volumes {
		if v.Secret != nil {
			t.Error("a Secret volume without credentials")
		}
	}
}

func TestImageByDigest(t *testing.T) {
	o := testOptions(t, "testdata/agent.jsonc")
	for _, ref := range []string{"", "registry.example.test/team/devbox:1", "registry.example.test/team/devbox", "registry.example.test/team/devbox@sha256:abc"} {
		o.Image = ref
		_, err := Pod(o)
		if err == nil || !strings.Contains(err.Error(), "--image") {
			t.Errorf("image %q: err = %v, want one naming --image", ref, err)
		}
	}
	o.Image = testImage
	if _, err := Job(o); err != nil {
		t.Error(err)
	}
	o.Repo = "https://user:pw@git.example.test/team/app.git"
	if _, err := Job(o); err == nil {
		t.Error("a repository URL with credentials was accepted")
	}
}

// TestPodmanShape: podman kube play (4.3) runs every init container to
// completion and refuses probes on them, so only deny-all stays an init
// container, the fence is the first container, and the agent waits.
func TestPodmanShape(t *testing.T) {
	o := testOptions(t, "testdata/agent.jsonc")
	o.Podman = true
	for _, mk := range []func(Options) (*corev1.Pod, error){Pod, JobPod} {
		pod, err := mk(o)
		if err != nil {
			t.Fatal(err)
		}
		s := pod.Spec
		if len(s.InitContainers) != 1 || s.InitContainers[0].Name != FenceInitName {
			t.Errorf("init containers: %+v", s.InitContainers)
		}
		if len(s.Containers) != 2 || s.Containers[0].Name != FenceName || s.Containers[0].StartupProbe != nil || s.Containers[0].RestartPolicy != nil {
			t.Fatalf("containers: %+v", s.Containers)
		}
		if cmd := strings.Join(s.Containers[1].Command, " "); !strings.Contains(cmd, "entrypoint --fenced") {
			t.Errorf("the agent does not wait for the fence: %s", cmd)
		}
		// podman 4.3.1 panics on a Secret volume without `optional`, and
		// names an emptyDir's volume after it on the whole host.
		n := 0
		names := map[string]bool{}
		for _, v := range s.Volumes {
			names[v.Name] = true
			if v.EmptyDir != nil && !strings.HasPrefix(v.Name, pod.Name+"-") {
				t.Errorf("the emptyDir %s is not named after the pod %s", v.Name, pod.Name)
			}
			if v.Secret != nil {
				n++
				if v.Secret.Optional == nil || *v.Secret.Optional {
					t.Errorf("the Secret volume %s is not optional: false", v.Name)
				}
			}
		}
		if n != 1 {
			t.Errorf("%d Secret volumes, want 1 (testdata/agent.jsonc has credentials)", n)
		}
		for _, c := range append(s.InitContainers, s.Containers...) {
			for _, m := range c.VolumeMounts {
				if !names[m.Name] {
					t.Errorf("container %s mounts %s, which is no volume of the pod", c.Name, m.Name)
				}
			}
		}
	}
	if _, err := Job(o); err == nil {
		t.Error("a Job for podman")
	}
	o.Name = strings.Repeat("a", 49)
	if _, err := Pod(o); err == nil {
		t.Error("a 49-character name for the podman shape (its volumes' names would pass 63)")
	}
}
