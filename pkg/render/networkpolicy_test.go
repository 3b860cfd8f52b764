package render_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/render"
)

// The job's NetworkPolicy selects every pod of the job and admits
// connections from those pods only; it is owned and labelled like the
// job's other objects.
func TestNetworkPolicyAdmitsOnlyTheJobsPods(t *testing.T) {
	job := newJob(v1alpha1.FrameworkPyTorch, "ddp", replicas{master: 1, worker: 2})
	id := identity("team-a", "ddp")
	got := render.NetworkPolicy(job, id)
	own := metav1.LabelSelector{MatchLabels: map[string]string{"trainstep.dev/job-name": "ddp"}}
	want := &networkingv1.NetworkPolicy{
		TypeMeta: metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "NetworkPolicy"},
		ObjectMeta: metav1.ObjectMeta{
			Name:            "ddp",
			Namespace:       "team-a",
			Labels:          map[string]string{"trainstep.dev/job-name": "ddp", "workflows.argoproj.io/workflow": "wf-1"},
			OwnerReferences: controllerRef(),
		},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: own,
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress:     []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{PodSelector: &own}}}},
		},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("NetworkPolicy (-want +got):\n%s", diff)
	}
	// Every replica's pod is selected, so each is covered by the policy.
	objs, err := render.Render(job, id, render.Inputs{})
	if err != nil {
		t.Fatal(err)
	}
	selector, err := metav1.LabelSelectorAsSelector(&got.Spec.PodSelector)
	if err != nil {
		t.Fatal(err)
	}
	for _, pod := range objs.Pods {
		if !selector.Matches(labels.Set(pod.Labels)) {
			t.Errorf("pod %s (labels %v) is not selected", pod.Name, pod.Labels)
		}
	}
}

// The template author's allowance adds one rule: pods of the named
// namespaces, to the named ports of the job's pods over TCP; the job's own
// rule stays first.
func TestNetworkPolicyAdmitsTheAllowedNamespaces(t *testing.T) {
	job := newJob(v1alpha1.FrameworkPyTorch, "ddp", replicas{master: 1, worker: 2})
	id := identity("team-a", "ddp")
	got := render.NetworkPolicyAdmitting(job, id, render.IngressAllowance{
		Namespaces: []string{"monitoring", "team-a"}, Ports: []intstr.IntOrString{intstr.FromInt32(9090), intstr.FromString("metrics")}})
	tcp := corev1.ProtocolTCP
	p9090, metrics := intstr.FromInt32(9090), intstr.FromString("metrics")
	want := []networkingv1.NetworkPolicyIngressRule{
		render.NetworkPolicy(job, id).Spec.Ingress[0],
		{
			From: []networkingv1.NetworkPolicyPeer{{NamespaceSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
				Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpIn, Values: []string{"monitoring", "team-a"}}}}}},
			Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: &p9090}, {Protocol: &tcp, Port: &metrics}},
		},
	}
	if diff := cmp.Diff(want, got.Spec.Ingress); diff != "" {
		t.Errorf("ingress rules (-want +got):\n%s", diff)
	}
	if none := render.NetworkPolicyAdmitting(job, id, render.IngressAllowance{}); len(none.Spec.Ingress) != 1 {
		t.Errorf("an empty allowance adds rules: %+v", none.Spec.Ingress)
	}
}
