package kube

import (
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	podutil "k8s.io/kubernetes/pkg/api/pod"
	"k8s.io/kubernetes/pkg/apis/batch"
	batchinstall "k8s.io/kubernetes/pkg/apis/batch/install"
	batchvalidation "k8s.io/kubernetes/pkg/apis/batch/validation"
	"k8s.io/kubernetes/pkg/apis/core"
	coreinstall "k8s.io/kubernetes/pkg/apis/core/install"
	corevalidation "k8s.io/kubernetes/pkg/apis/core/validation"
	"k8s.io/kubernetes/pkg/apis/networking"
	networkinginstall "k8s.io/kubernetes/pkg/apis/networking/install"
	networkingvalidation "k8s.io/kubernetes/pkg/apis/networking/validation"
)

// The API server's own path for a create, minus storage: default the
// versioned object, convert it to the internal type, and run the
// validation of k8s.io/kubernetes/pkg/apis/*/validation on it.
var scheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	coreinstall.Install(s)
	batchinstall.Install(s)
	networkinginstall.Install(s)
	return s
}()

func toInternal(t *testing.T, in runtime.Object, out any) {
	t.Helper()
	in = in.DeepCopyObject()
	scheme.Default(in)
	if err := scheme.Convert(in, out, nil); err != nil {
		t.Fatal(err)
	}
}

func failOn(t *testing.T, what string, errs field.ErrorList) {
	t.Helper()
	for _, e := range errs {
		t.Errorf("%s: %v", what, e)
	}
}

func validatePodSpec(t *testing.T, what string, meta metav1.ObjectMeta, spec corev1.PodSpec) {
	t.Helper()
	var pt core.PodTemplate
	toInternal(t, &corev1.PodTemplate{ObjectMeta: meta, Template: corev1.PodTemplateSpec{ObjectMeta: meta, Spec: spec}}, &pt)
	tmpl := pt.Template
	failOn(t, what, corevalidation.ValidatePodTemplateSpec(&tmpl, field.NewPath("spec", "podTemplate"), podutil.GetValidationOptionsFromPodTemplate(&tmpl, nil)))
}

func validateEgress(t *testing.T, what string, meta metav1.ObjectMeta, egress []networkingv1.NetworkPolicyEgressRule) {
	t.Helper()
	np := &networkingv1.NetworkPolicy{ObjectMeta: meta, Spec: networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}, Egress: egress}}
	var in networking.NetworkPolicy
	toInternal(t, np, &in)
	failOn(t, what, networkingvalidation.ValidateNetworkPolicy(&in, networkingvalidation.NetworkPolicyValidationOptions{}))
}

// TestAPIServerValidation runs every generated object through the API
// server's validation, after a strict decode of its YAML.
func TestAPIServerValidation(t *testing.T) {
	n := 0
	for k, y := range generated(t) {
		switch {
		case strings.HasSuffix(k, ".pod"), strings.HasSuffix(k, ".podman-pod"), strings.HasSuffix(k, ".podman-job"):
			var p corev1.Pod
			if err := DecodeStrict(y, &p); err != nil {
				t.Fatal(err)
			}
			var in core.Pod
			toInternal(t, &p, &in)
			failOn(t, k, corevalidation.ValidatePodCreate(&in, podutil.GetValidationOptionsFromPodSpecAndMeta(&in.Spec, nil, &in.ObjectMeta, nil)))
		case strings.HasSuffix(k, ".job"):
			var j batchv1.Job
			if err := DecodeStrict(y, &j); err != nil {
				t.Fatal(err)
			}
			// What the Job strategy's PrepareForCreate adds: the generated
			// selector and the labels it selects (and their legacy names).
			uid := types.UID("7f6c1d2e-0000-4000-8000-000000000001")
			sel := map[string]string{batchv1.ControllerUidLabel: string(uid), batchv1.JobNameLabel: j.Name}
			j.UID = uid
			j.Spec.Selector = &metav1.LabelSelector{MatchLabels: sel}
			for l, v := range sel {
				j.Spec.Template.Labels[l] = v
			}
			j.Spec.Template.Labels["controller-uid"] = string(uid)
			j.Spec.Template.Labels["job-name"] = j.Name
			var in batch.Job
			toInternal(t, &j, &in)
			opts := batchvalidation.JobValidationOptions{PodValidationOptions: podutil.GetValidationOptionsFromPodTemplate(&in.Spec.Template, nil), RequirePrefixedLabels: true}
			failOn(t, k, batchvalidation.ValidateJobCreate(&in, opts))
		case strings.HasSuffix(k, ".networkpolicy"):
			var np networkingv1.NetworkPolicy
			if err := DecodeStrict(y, &np); err != nil {
				t.Fatal(err)
			}
			var in networking.NetworkPolicy
			toInternal(t, &np, &in)
			failOn(t, k, networkingvalidation.ValidateNetworkPolicy(&in, networkingvalidation.NetworkPolicyValidationOptions{}))
		case strings.HasSuffix(k, ".sandbox-template"):
			// A custom resource: the API server checks it against
			// agent-sandbox's CRD schema, whose podTemplate.spec is a
			// PodSpec and networkPolicy.egress NetworkPolicy egress rules;
			// the controller creates the Pod and the NetworkPolicy from
			// them, which the API server then validates as such.
			var st SandboxTemplate
			if err := DecodeStrict(y, &st); err != nil {
				t.Fatal(err)
			}
			meta := metav1.ObjectMeta{Name: st.Name, Namespace: st.Namespace, Labels: st.Spec.PodTemplate.Metadata.Labels}
			validatePodSpec(t, k, meta, st.Spec.PodTemplate.Spec)
			validateEgress(t, k, meta, st.Spec.NetworkPolicy.Egress)
		default:
			continue
		}
		n++
	}
	if n != 6*5 {
		t.Errorf("validated %d objects, want 30", n)
	}
}

// TestAPIServerRefuses checks the validation is live: a pod spec broken
// the way a hand edit might break it is refused.
func TestAPIServerRefuses(t *testing.T) {
	o := testOptions(t, "testdata/agent.jsonc")
	p, err := Pod(o)
	if err != nil {
		t.Fatal(err)
	}
	p.Spec.Containers[0].VolumeMounts[0].Name = "no-such-volume"
	var in core.Pod
	toInternal(t, p, &in)
	if errs := corevalidation.ValidatePodCreate(&in, podutil.GetValidationOptionsFromPodSpecAndMeta(&in.Spec, nil, &in.ObjectMeta, nil)); len(errs) == 0 {
		t.Error("a mount of a volume that does not exist passed validation")
	}
}
