package render_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

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
