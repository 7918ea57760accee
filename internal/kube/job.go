package kube

import (
	"errors"
	"fmt"
	"net/url"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Environment of the Job's steps: the values reach the shell as variables,
// never spliced into its text, so a prompt cannot become a command.
const (
	envRepo   = "DEVBOX_REPO"
	envBranch = "DEVBOX_BRANCH"
	envPrompt = "DEVBOX_PROMPT"
)

// cloneScript clones the repository into the workspace.
const cloneScript = `git clone --quiet -- "$` + envRepo + `" ` + WorkspaceDir + `/repo`

// jobScript is the agent's run: Claude Code on the prompt, its JSON result
// on standard output (the pod's log), then the work committed on the
// branch and pushed through the credential gateway's git route (the
// policy's credentials.git decides whether the push is allowed).
const jobScript = `set -eu
cd ` + WorkspaceDir + `/repo
git switch -c "$` + envBranch + `"
claude -p "$` + envPrompt + `" --output-format json --permission-mode acceptEdits
git add -A
if git diff --cached --quiet; then echo "devbox: no change to push" >&2; exit 0; fi
git commit -q -m "devbox: $` + envPrompt + `"
git push origin "HEAD:refs/heads/$` + envBranch + `"
`

// Job is one unattended run: the repository cloned (after the fence is up,
// as the agent's user, through the gateway's git route when the policy has
// git credentials) into an emptyDir, so nothing the agent writes reaches
// anyone's checkout; then `claude -p` and the branch pushed.
func Job(o Options) (*batchv1.Job, error) {
	o = o.withDefaults()
	if o.Podman {
		return nil, errors.New("kube: podman kube play runs no Job: use JobPod (devbox kube job --podman writes a Pod)")
	}
	spec, err := o.jobPodSpec()
	if err != nil {
		return nil, err
	}
	return &batchv1.Job{
		TypeMeta:   metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
		ObjectMeta: o.meta(o.Name),
		Spec: batchv1.JobSpec{
			// One run: a failed agent is looked at, not retried blindly.
			BackoffLimit:            ptr(int32(0)),
			TTLSecondsAfterFinished: ptr(int32(3600)),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: o.labels()},
				Spec:       spec,
			},
		},
	}, nil
}

// JobPod is the Job's run as a bare Pod that runs once (restartPolicy
// Never): for podman kube play, which takes no Job. In the podman shape
// the clone is the first step of the agent's script, after the wait for
// the fence (an init container would run before the fence is up).
func JobPod(o Options) (*corev1.Pod, error) {
	o = o.withDefaults()
	spec, err := o.jobPodSpec()
	if err != nil {
		return nil, err
	}
	return &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: o.podMeta(),
		Spec:       spec,
	}, nil
}

func (o Options) jobPodSpec() (corev1.PodSpec, error) {
	if err := o.check(true); err != nil {
		return corev1.PodSpec{}, err
	}
	if err := o.checkRun(); err != nil {
		return corev1.PodSpec{}, err
	}
	script := jobScript
	if o.Podman {
		script = cloneScript + "\n" + script
	}
	spec := o.podSpec([]string{"sh", "-c", script}, true)
	env := []corev1.EnvVar{{Name: envRepo, Value: o.Repo}, {Name: envBranch, Value: o.Branch}, {Name: envPrompt, Value: o.Prompt}}
	for i := range spec.InitContainers {
		if spec.InitContainers[i].Name == CloneName {
			spec.InitContainers[i].Command = []string{"sh", "-c", "exec " + cloneScript}
			spec.InitContainers[i].Env = append(spec.InitContainers[i].Env, env...)
		}
	}
	agent := &spec.Containers[len(spec.Containers)-1]
	agent.Env = append(agent.Env, env...)
	agent.Env = append(agent.Env,
		corev1.EnvVar{Name: "GIT_AUTHOR_NAME", Value: "devbox agent"}, corev1.EnvVar{Name: "GIT_AUTHOR_EMAIL", Value: "agent@devbox.invalid"},
		corev1.EnvVar{Name: "GIT_COMMITTER_NAME", Value: "devbox agent"}, corev1.EnvVar{Name: "GIT_COMMITTER_EMAIL", Value: "agent@devbox.invalid"})
	return spec, nil
}

// checkRun checks the Job's repository, branch and prompt.
func (o Options) checkRun() error {
	if o.Repo == "" || o.Branch == "" || o.Prompt == "" {
		return errors.New("kube: a job needs --repo URL, --branch NAME and --prompt TEXT")
	}
	u, err := url.Parse(o.Repo)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil {
		return fmt.Errorf("kube: --repo %q: want an https:// URL without credentials (the gateway adds them)", o.Repo)
	}
	if strings.HasPrefix(o.Branch, "-") || strings.ContainsAny(o.Branch, " ~^:?*[\\\x00") || strings.Contains(o.Branch, "..") {
		return fmt.Errorf("kube: --branch %q is not a branch name", o.Branch)
	}
	return nil
}
