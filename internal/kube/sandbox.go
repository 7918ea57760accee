package kube

import (
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// SandboxGroupVersion is agent-sandbox's extensions API
// (kubernetes-sigs/agent-sandbox, extensions/api/v1beta1, its storage
// version; v1alpha1 is served too).
const SandboxGroupVersion = "extensions.agents.x-k8s.io/v1beta1"

// SandboxTemplate mirrors the fields of agent-sandbox's SandboxTemplate
// that devbox sets; the rest of its spec (volumeClaimTemplates, service,
// envVarsInjectionPolicy, generatedSecrets) is left to the controller's
// defaults. Strict decoding into it catches a misspelt field.
type SandboxTemplate struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              SandboxTemplateSpec `json:"spec"`
}

// SandboxTemplateSpec is the template's pod and the NetworkPolicy the
// controller keeps for every sandbox made from it.
type SandboxTemplateSpec struct {
	PodTemplate             SandboxPodTemplate    `json:"podTemplate"`
	NetworkPolicy           *SandboxNetworkPolicy `json:"networkPolicy,omitempty"`
	NetworkPolicyManagement string                `json:"networkPolicyManagement,omitempty"`
}

// SandboxPodTemplate is agent-sandbox's PodTemplate: labels and
// annotations, and a PodSpec.
type SandboxPodTemplate struct {
	Metadata SandboxPodMetadata `json:"metadata"`
	Spec     corev1.PodSpec     `json:"spec"`
}

// SandboxPodMetadata is the pod metadata agent-sandbox copies.
type SandboxPodMetadata struct {
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// SandboxNetworkPolicy is the restricted NetworkPolicySpec agent-sandbox
// takes: the controller adds the pod selector and policy types.
type SandboxNetworkPolicy struct {
	Ingress []networkingv1.NetworkPolicyIngressRule `json:"ingress,omitempty"`
	Egress  []networkingv1.NetworkPolicyEgressRule  `json:"egress,omitempty"`
}

// NewSandboxTemplate is the Pod's shape as an agent-sandbox template, with
// the policy's NetworkPolicy egress for the controller to keep (no
// ingress: nothing connects to an agent).
func NewSandboxTemplate(o Options) (*SandboxTemplate, error) {
	o = o.withDefaults()
	if err := o.check(true); err != nil {
		return nil, err
	}
	np, err := NetworkPolicy(o)
	if err != nil {
		return nil, err
	}
	return &SandboxTemplate{
		TypeMeta:   metav1.TypeMeta{APIVersion: SandboxGroupVersion, Kind: "SandboxTemplate"},
		ObjectMeta: o.meta(o.Name),
		Spec: SandboxTemplateSpec{
			PodTemplate:             SandboxPodTemplate{Metadata: SandboxPodMetadata{Labels: o.labels()}, Spec: o.podSpec([]string{"sleep", "infinity"}, false)},
			NetworkPolicy:           &SandboxNetworkPolicy{Egress: np.Spec.Egress},
			NetworkPolicyManagement: "Managed",
		},
	}, nil
}
