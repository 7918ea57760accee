package main

import (
	"errors"
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/devbox-dev/devbox/internal/atomicfile"
	"github.com/devbox-dev/devbox/internal/image"
	"github.com/devbox-dev/devbox/internal/kube"
	"github.com/devbox-dev/devbox/internal/policy"
	"github.com/devbox-dev/devbox/internal/registry"
)

// kubeFlags are shared by every `devbox kube` output.
var kubeFlags = []cli.Flag{
	policyFileFlag,
	&cli.StringFlag{Name: "image", Usage: "the devbox image by digest, `REF@sha256:…` (required for pod, job and sandbox-template; without --policy and no policy file here, its baked policy is read from the registry)"},
	&cli.StringFlag{Name: "name", Value: "devbox", Usage: "`NAME` of the objects and of the pod label they select (devbox.dev/name)"},
	&cli.StringFlag{Name: "namespace", Usage: "`NAMESPACE` written into the objects (default: none, kubectl's)"},
	&cli.StringFlag{Name: "secret", Usage: "Kubernetes Secret `NAME` holding the credentials' secrets, one key per secret (default: NAME-credentials)"},
	&cli.StringFlag{Name: "runtime-class", Usage: "the pod's runtimeClassName (`CLASS`: gvisor, kata, …)"},
	&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Usage: "write the YAML to `FILE` instead of standard output"},
}

var kubeJobFlags = []cli.Flag{
	&cli.StringFlag{Name: "repo", Usage: "https `URL` of the repository to clone (through the credential gateway's git route when the policy has one)"},
	&cli.StringFlag{Name: "branch", Usage: "`BRANCH` the agent's work is committed on and pushed to"},
	&cli.StringFlag{Name: "prompt", Usage: "`TEXT` given to claude -p"},
}

var kubeCommand = &cli.Command{
	Name:  "kube",
	Usage: "write Kubernetes objects that run the agent with the whole fence",
	Description: `Turns the policy (--policy, else the policy file found here, else the one
baked into --image) into Kubernetes YAML: a Pod, a Job for one unattended
run, an agent-sandbox SandboxTemplate, and the second layer outside the pod:
a NetworkPolicy and, where Cilium is the CNI, a CiliumNetworkPolicy.
See docs/kubernetes.md.`,
	Subcommands: []*cli.Command{
		kubeOutput("pod", "a Pod: the fence as an init container and a native sidecar, the agent's container without capabilities", func(o kube.Options) (any, error) { return kube.Pod(o) }),
		kubeOutput("job", "a Job: clone --repo, claude -p --prompt, push --branch through the gateway (with --podman a Pod that runs once)", func(o kube.Options) (any, error) {
			if o.Podman {
				return kube.JobPod(o)
			}
			return kube.Job(o)
		}),
		kubeOutput("sandbox-template", "an agent-sandbox SandboxTemplate (extensions.agents.x-k8s.io/v1beta1) with the pod and its NetworkPolicy egress", func(o kube.Options) (any, error) { return kube.NewSandboxTemplate(o) }),
		kubeOutput("networkpolicy", "a NetworkPolicy: DNS, the static prefixes as the fence decides them, the named entries' ports", func(o kube.Options) (any, error) { return kube.NetworkPolicy(o) }),
		kubeOutput("cilium", "a CiliumNetworkPolicy: toFQDNs for the named entries, DNS limited to them", func(o kube.Options) (any, error) { return kube.NewCiliumNetworkPolicy(o) }),
	},
}

func kubeOutput(name, usage string, gen func(kube.Options) (any, error)) *cli.Command {
	flags := kubeFlags
	if name == "job" {
		flags = append(append([]cli.Flag{}, kubeFlags...), kubeJobFlags...)
	}
	if name == "pod" || name == "job" {
		flags = append(append([]cli.Flag{}, flags...), &cli.BoolFlag{Name: "podman", Usage: "the shape podman kube play (4.3) runs: the fence as the first container, not a native sidecar (docs/kubernetes.md)"})
	}
	return &cli.Command{
		Name:  name,
		Usage: usage,
		Flags: flags,
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return fmt.Errorf("kube %s: no arguments (the policy is --policy FILE)", name)
			}
			runs := name == "pod" || name == "job" || name == "sandbox-template"
			if runs || c.String("image") != "" {
				if err := kube.CheckImage(c.String("image")); err != nil {
					return err
				}
			}
			p, err := kubePolicy(c)
			if err != nil {
				return err
			}
			obj, err := gen(kube.Options{
				Name: c.String("name"), Namespace: c.String("namespace"), Image: c.String("image"), Policy: p,
				SecretName: c.String("secret"), RuntimeClass: c.String("runtime-class"),
				Repo: c.String("repo"), Branch: c.String("branch"), Prompt: c.String("prompt"),
				Podman: c.Bool("podman"),
			})
			if err != nil {
				return err
			}
			y, err := kube.Marshal(obj)
			if err != nil {
				return err
			}
			if f := c.String("output"); f != "" {
				return atomicfile.WriteFile(f, y, 0o644)
			}
			_, err = c.App.Writer.Write(y)
			return err
		},
	}
}

// kubePolicy is --policy, else the policy file found here, else the policy
// baked into --image (its dev.devbox.policy label, read from the registry).
func kubePolicy(c *cli.Context) (*policy.Policy, error) {
	if c.String(policyFileFlag.Name) != "" {
		return policy.Load(c.String(policyFileFlag.Name))
	}
	path, ferr := policy.Find(".")
	if ferr == nil {
		return policy.Load(path)
	}
	ref := c.String("image")
	if ref == "" {
		return nil, fmt.Errorf("%w; give --policy FILE or --image REF@sha256:…", ferr)
	}
	img, err := registry.Pull(c.Context, ref, hostPlatform())
	if err != nil {
		return nil, err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("image %s: %w", ref, err)
	}
	raw, ok := cfg.Config.Labels[image.LabelPolicy]
	if !ok {
		return nil, errors.New("image " + ref + " has no " + image.LabelPolicy + " label: not a devbox image; give --policy FILE")
	}
	return policy.Parse("image "+ref, []byte(raw))
}
