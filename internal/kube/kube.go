// Package kube turns a devbox policy and the image that bakes it into
// Kubernetes objects that run the agent with the whole fence: a Pod, a Job
// (one unattended run), an agent-sandbox SandboxTemplate, and the second
// layer the pod cannot lift (a NetworkPolicy, a CiliumNetworkPolicy).
//
// The pod follows the service-mesh pattern. An init container puts the
// network namespace in deny-all first, so a crash never leaves the pod open;
// the fence container (a native sidecar: an init container with
// restartPolicy Always) runs `devbox entrypoint --foreground`, which
// installs the rules and starts the DNS filter, the name gate and the
// credential gateway under their own uids, then stays up; its startup
// probe holds the agent's containers back until the fence is verified.
// The agent's container has no capability, runs as the policy's user, and
// never mounts the Secret. The containers share the pod's network
// namespace, so the owner-match rules work across them as they do inside
// one container.
package kube

import (
	"errors"
	"fmt"
	"path"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/devbox-dev/devbox/internal/gateway"
	"github.com/devbox-dev/devbox/internal/layout"
	"github.com/devbox-dev/devbox/internal/policy"
)

// Options say what to generate.
type Options struct {
	// Name names the objects and labels the pod (default "devbox").
	Name string
	// Namespace, when set, goes into every object's metadata.
	Namespace string
	// Image is the devbox image, by digest (REF@sha256:…): required for
	// the objects that run (Pod, Job, SandboxTemplate).
	Image string
	// Policy is the policy the image bakes: the agent's user, the
	// credentials, the network entries.
	Policy *policy.Policy
	// SecretName is the Kubernetes Secret holding the credentials' secrets,
	// one key per secret name (default Name+"-credentials"). It is mounted
	// only when the policy has credentials, and only into the fence.
	SecretName string
	// RuntimeClass, when set, is the pod's runtimeClassName (gVisor, Kata).
	RuntimeClass string
	// Repo, Branch and Prompt are the Job's run: the repository cloned into
	// the workspace, the branch the result is pushed to, and the prompt
	// given to `claude -p`.
	Repo, Branch, Prompt string
	// Podman shapes the pod for `podman kube play` (4.3), which runs every
	// init container to completion and refuses probes on them: the fence
	// is the first ordinary container instead of a native sidecar, and the
	// agent's command waits for `devbox entrypoint --fenced` itself. The
	// deny-all init container still runs first, so the agent's container
	// starting early reaches nothing.
	Podman bool
}

// Fixed names inside the pod.
const (
	// FenceInitName puts the namespace in deny-all before anything else.
	FenceInitName = "fence-init"
	// FenceName is the sidecar that installs the fence and runs its daemons.
	FenceName = "fence"
	// AgentName is the agent's container.
	AgentName = "agent"
	// CloneName is the Job's init step that clones the repository.
	CloneName = "clone"
	// WorkspaceDir is where the repository is (an emptyDir).
	WorkspaceDir = "/workspace"
	// CredentialsMount is where the fence container sees the Secret; the
	// entrypoint copies it into layout.SecretsDir for the gateway's group.
	CredentialsMount = "/var/run/devbox-credentials"
	// LabelName is the label every object selects the pod by.
	LabelName = "devbox.dev/name"
)

// Volume names.
const (
	volRun         = "devbox-run"
	volLog         = "devbox-log"
	volSecrets     = "devbox-secrets"
	volCredentials = "devbox-credentials"
	volHome        = "agent-claude"
	volCache       = "agent-cache"
	volTmp         = "agent-tmp"
	volWorkspace   = "workspace"
)

// fenceCaps are the capabilities of the fence container, whose root
// process installs the rules (NET_ADMIN, NET_RAW), starts each daemon
// under its own uid with NET_ADMIN as an ambient capability where it must
// change sets at run time (SETUID, SETGID, SETPCAP), gives the secrets and
// state to their owners (CHOWN, FOWNER, DAC_OVERRIDE) and stops a
// previous daemon on restart (KILL). Everything else is dropped.
var fenceCaps = []corev1.Capability{"NET_ADMIN", "NET_RAW", "SETUID", "SETGID", "SETPCAP", "CHOWN", "FOWNER", "DAC_OVERRIDE", "KILL"}

func (o Options) withDefaults() Options {
	if o.Name == "" {
		o.Name = "devbox"
	}
	if o.SecretName == "" {
		o.SecretName = o.Name + "-credentials"
	}
	return o
}

// check returns an error naming what is wrong with o for an object that
// runs the image.
func (o Options) check(runs bool) error {
	if o.Policy == nil {
		return errors.New("kube: no policy")
	}
	if errs := validation.IsDNS1123Label(o.Name); len(errs) > 0 {
		return fmt.Errorf("kube: name %q: %s", o.Name, strings.Join(errs, "; "))
	}
	if o.Namespace != "" {
		if errs := validation.IsDNS1123Label(o.Namespace); len(errs) > 0 {
			return fmt.Errorf("kube: namespace %q: %s", o.Namespace, strings.Join(errs, "; "))
		}
	}
	if !runs {
		return nil
	}
	if err := CheckImage(o.Image); err != nil {
		return err
	}
	if len(o.Policy.Credentials.Secrets()) > 0 {
		if errs := validation.IsDNS1123Subdomain(o.SecretName); len(errs) > 0 {
			return fmt.Errorf("kube: secret name %q: %s", o.SecretName, strings.Join(errs, "; "))
		}
	}
	if o.Podman {
		if errs := validation.IsDNS1123Label(o.Name + "-" + volSecrets); len(errs) > 0 {
			return fmt.Errorf("kube: name %q is too long for the podman shape, whose volumes are named NAME-%s: %s", o.Name, volSecrets, strings.Join(errs, "; "))
		}
	}
	if u := o.Policy.Image.User; u.Name == "" || u.UID <= 0 {
		return fmt.Errorf("kube: the policy's image.user (%q, uid %d) is not a non-root user", u.Name, u.UID)
	}
	return nil
}

// CheckImage returns an error unless ref names an image by digest: a tag
// can be moved under a running fleet, a digest cannot.
func CheckImage(ref string) error {
	if ref == "" {
		return errors.New("kube: no image: pass --image REF@sha256:… (the digest `devbox build --push` prints)")
	}
	r, err := name.ParseReference(ref, name.StrictValidation)
	if err != nil {
		if _, derr := name.NewDigest(ref); derr == nil {
			return nil
		}
		return fmt.Errorf("kube: --image %q: %v", ref, err)
	}
	if _, ok := r.(name.Digest); !ok {
		return fmt.Errorf("kube: --image %q names no digest: pin it as REF@sha256:… (a tag can move under running pods)", ref)
	}
	return nil
}

func (o Options) meta(name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: o.Namespace, Labels: o.labels()}
}

func (o Options) labels() map[string]string {
	return map[string]string{LabelName: o.Name, "app.kubernetes.io/managed-by": "devbox"}
}

// home is the agent's home directory in the image.
func (o Options) home() string { return path.Join("/home", o.Policy.Image.User.Name) }

// podSpec is the pod every runnable output shares; job adds the clone step
// and the run, and makes the pod run once.
func (o Options) podSpec(agentCmd []string, job bool) corev1.PodSpec {
	p := o.Policy
	uid, gid := int64(p.Image.User.UID), int64(p.Image.User.GID)
	hasCreds := len(p.Credentials.Secrets()) > 0
	no, yes := false, true
	root := int64(0)
	always := corev1.ContainerRestartPolicyAlways

	emptyDir := func(n string, medium corev1.StorageMedium) corev1.Volume {
		return corev1.Volume{Name: n, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: medium}}}
	}
	vols := []corev1.Volume{emptyDir(volRun, corev1.StorageMediumMemory), emptyDir(volLog, ""), emptyDir(volHome, ""), emptyDir(volCache, ""), emptyDir(volTmp, ""), emptyDir(volWorkspace, "")}
	runMount := corev1.VolumeMount{Name: volRun, MountPath: layout.RunDir}
	fenceMounts := []corev1.VolumeMount{runMount, {Name: volLog, MountPath: layout.LogDir}}
	fenceCmd := []string{layout.BinaryPath, "entrypoint", "--foreground"}
	if hasCreds {
		// The secrets directory is the fence container's own (in memory),
		// filled at start from the Secret, which only this container mounts.
		src := &corev1.SecretVolumeSource{SecretName: o.SecretName, DefaultMode: ptr(int32(0o400))}
		if o.Podman {
			// podman 4.3.1's kube play dereferences `optional` without a
			// nil check and panics when it is left out (checked here).
			src.Optional = ptr(false)
		}
		vols = append(vols, emptyDir(volSecrets, corev1.StorageMediumMemory), corev1.Volume{Name: volCredentials, VolumeSource: corev1.VolumeSource{Secret: src}})
		fenceMounts = append(fenceMounts, corev1.VolumeMount{Name: volSecrets, MountPath: layout.SecretsDir}, corev1.VolumeMount{Name: volCredentials, MountPath: CredentialsMount, ReadOnly: true})
		fenceCmd = append(fenceCmd, "--secrets-from", CredentialsMount)
	}
	rootCtx := func(caps []corev1.Capability) *corev1.SecurityContext {
		return &corev1.SecurityContext{
			RunAsUser:                &root,
			RunAsGroup:               &root,
			RunAsNonRoot:             &no,
			AllowPrivilegeEscalation: &no,
			Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}, Add: caps},
		}
	}
	agentCtx := &corev1.SecurityContext{
		RunAsUser:                &uid,
		RunAsGroup:               &gid,
		RunAsNonRoot:             &yes,
		AllowPrivilegeEscalation: &no,
		ReadOnlyRootFilesystem:   &yes,
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
	}
	agentMounts := []corev1.VolumeMount{
		// The fence's state, read-only: devbox doctor reads the status,
		// the applied policy and the daemons' pidfiles there.
		{Name: volRun, MountPath: layout.RunDir, ReadOnly: true},
		{Name: volHome, MountPath: path.Join(o.home(), layout.ClaudeDir)},
		{Name: volCache, MountPath: path.Join(o.home(), ".cache")},
		{Name: volTmp, MountPath: "/tmp"},
		{Name: volWorkspace, MountPath: WorkspaceDir},
	}
	agentEnv := []corev1.EnvVar{
		{Name: "HOME", Value: o.home()},
		{Name: "USER", Value: p.Image.User.Name},
		{Name: "CLAUDE_CONFIG_DIR", Value: path.Join(o.home(), layout.ClaudeDir)},
	}
	for _, kv := range gateway.GitConfigEnv(p.Credentials, layout.GatewayAddr) {
		agentEnv = append(agentEnv, corev1.EnvVar{Name: kv[0], Value: kv[1]})
	}
	agentContainer := func(n string, cmd []string) corev1.Container {
		return corev1.Container{
			Name: n, Image: o.Image, Command: cmd, WorkingDir: WorkspaceDir,
			Env: agentEnv, VolumeMounts: agentMounts, SecurityContext: agentCtx,
			ImagePullPolicy: corev1.PullIfNotPresent,
		}
	}

	inits := []corev1.Container{
		{
			// Deny-all before anything else runs in the namespace: if the
			// fence container never comes up, nothing gets out.
			Name: FenceInitName, Image: o.Image,
			Command:         []string{layout.BinaryPath, "firewall", "deny-all"},
			VolumeMounts:    []corev1.VolumeMount{runMount},
			SecurityContext: rootCtx([]corev1.Capability{"NET_ADMIN", "NET_RAW", "KILL"}),
			ImagePullPolicy: corev1.PullIfNotPresent,
		},
		{
			Name: FenceName, Image: o.Image, Command: fenceCmd,
			RestartPolicy:   &always,
			VolumeMounts:    fenceMounts,
			SecurityContext: rootCtx(fenceCaps),
			ImagePullPolicy: corev1.PullIfNotPresent,
			// The agent's containers start only once this passes: the
			// fence is installed and verified for this start.
			StartupProbe: &corev1.Probe{
				ProbeHandler:     corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{layout.BinaryPath, "entrypoint", "--fenced"}}},
				PeriodSeconds:    1,
				FailureThreshold: 120,
			},
			// Afterwards the foreground entrypoint exits (and the kubelet
			// restarts the fence) when a daemon dies; the probe says so too.
			LivenessProbe: &corev1.Probe{
				ProbeHandler:  corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{layout.BinaryPath, "entrypoint", "--fenced"}}},
				PeriodSeconds: 10,
			},
		},
	}
	containers := []corev1.Container{agentContainer(AgentName, agentCmd)}
	if o.Podman {
		fence := inits[1]
		fence.RestartPolicy, fence.StartupProbe, fence.LivenessProbe = nil, nil, nil
		inits = inits[:1]
		containers = []corev1.Container{fence, agentContainer(AgentName, append([]string{"sh", "-c", waitFenced + `exec "$@"`, "sh"}, agentCmd...))}
		podmanVolumeNames(o.Name, vols, inits, containers)
	}
	if job && !o.Podman {
		inits = append(inits, agentContainer(CloneName, []string{"git", "clone", "--", o.Repo, WorkspaceDir + "/repo"}))
	}
	spec := corev1.PodSpec{
		InitContainers: inits,
		Containers:     containers,
		Volumes:        vols,
		// The agent gets no cluster credentials and no service variables.
		AutomountServiceAccountToken: &no,
		EnableServiceLinks:           &no,
		// devbox doctor in the agent's container checks the daemons by pid
		// and uid; without a shared pid namespace it cannot see them.
		ShareProcessNamespace: &yes,
		SecurityContext: &corev1.PodSecurityContext{
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		},
	}
	if o.RuntimeClass != "" {
		spec.RuntimeClassName = &o.RuntimeClass
	}
	switch {
	case job:
		spec.RestartPolicy = corev1.RestartPolicyNever
	case o.Podman:
		// podman 4.3 gives the pod's restart policy to the init containers
		// too: with Always it re-ran deny-all in a loop (checked here),
		// stopping the daemons each time. OnFailure restarts a fence that
		// exits 1 (a daemon died) and leaves the finished deny-all alone.
		spec.RestartPolicy = corev1.RestartPolicyOnFailure
	}
	return spec
}

// Pod is the interactive pod: the agent's container waits, and the user
// runs Claude Code in it (`kubectl exec -it POD -c agent -- claude`).
func Pod(o Options) (*corev1.Pod, error) {
	o = o.withDefaults()
	if err := o.check(true); err != nil {
		return nil, err
	}
	return &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: o.podMeta(),
		Spec:       o.podSpec([]string{"sleep", "infinity"}, false),
	}, nil
}

// podmanInitType is podman's annotation for how its init containers run.
// kube play's default, "once", fails on podman 4.3.1 here after the init
// container exited ("failed to remove once init container … as it is
// running"); "always" runs deny-all on every start of the pod, which is
// what the fence wants anyway.
const podmanInitType = "io.podman.annotations.init.container.type"

// podMeta is a bare Pod's metadata: with the podman annotation in the
// podman shape.
func (o Options) podMeta() metav1.ObjectMeta {
	m := o.meta(o.Name)
	if o.Podman {
		m.Annotations = map[string]string{podmanInitType: "always"}
	}
	return m
}

// podmanVolumeNames prefixes each emptyDir volume, and the mounts of it,
// with the pod's name. podman 4.3.1's kube play makes an emptyDir a named
// volume called by the volume's name, on disk whatever its medium, shared
// by every pod that names it and left behind by `podman kube down`
// (checked here: a second pod's fence took over the first's /run/devbox,
// and the gateway's secrets stayed in a volume named devbox-secrets).
// With the prefix each pod has its own, and `podman volume rm NAME-…`
// finds them.
func podmanVolumeNames(prefix string, vols []corev1.Volume, ctrs ...[]corev1.Container) {
	renamed := map[string]string{}
	for i := range vols {
		if vols[i].EmptyDir != nil {
			renamed[vols[i].Name] = prefix + "-" + vols[i].Name
			vols[i].Name = renamed[vols[i].Name]
		}
	}
	for _, cs := range ctrs {
		for i := range cs {
			// A copy: the containers share their mount slices.
			ms := append([]corev1.VolumeMount(nil), cs[i].VolumeMounts...)
			for j := range ms {
				if n, ok := renamed[ms[j].Name]; ok {
					ms[j].Name = n
				}
			}
			cs[i].VolumeMounts = ms
		}
	}
}

// waitFenced is the podman shape's wait, as the agent's user: the status
// is read-only for it, so only the fence can say it is up.
const waitFenced = `until ` + layout.BinaryPath + ` entrypoint --fenced >/dev/null 2>&1; do sleep 0.2; done; `

func ptr[T any](v T) *T { return &v }
