package executor_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/trainstep/trainstep/executor"
	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/result"
	"github.com/trainstep/trainstep/test/cluster"
)

// The job's NetworkPolicy exists before its replicas, admits only the job's
// own pods, and is deleted with the job's last pod (cleanPodPolicy All; a pod
// the policy keeps keeps it, like the job's other shared objects). (The test
// cluster's network does not enforce it; docs/security.md says what it
// allows.)
func TestTheJobsNetworkPolicyComesAndGoesWithTheJob(t *testing.T) {
	t.Parallel()
	c := cluster.Get(t)
	ns := c.Namespace(t)
	job := newJob("np", v1alpha1.FrameworkTensorFlow).replicas(ps, 1, nil).replicas(worker, 2, exitsAfter("3s", 0)).
		with(func(j *v1alpha1.TrainJob) { j.Spec.RunPolicy.CleanPodPolicy = ptr.To(v1alpha1.CleanPodPolicyAll) })
	wait := startJob(t, c, ns, job.yaml(t))
	waitRunning(t, c, ns, "np", 3)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	np, err := c.Client.NetworkingV1().NetworkPolicies(ns).Get(ctx, "np", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the job's NetworkPolicy while it runs: %v", err)
	}
	own := metav1.LabelSelector{MatchLabels: map[string]string{v1alpha1.LabelJobName: "np", v1alpha1.LabelIdentity: executor.RunIdentity(testIdentity(t))}}
	want := networkingv1.NetworkPolicySpec{
		PodSelector: own,
		PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
		Ingress:     []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{PodSelector: &own}}}},
	}
	if diff := cmp.Diff(want, np.Spec); diff != "" {
		t.Errorf("NetworkPolicy spec (-want +got):\n%s", diff)
	}
	for _, pod := range listPods(t, c, ns, "np") {
		if pod.CreationTimestamp.Before(&np.CreationTimestamp) {
			t.Errorf("pod %s was created at %s, before the NetworkPolicy (%s)", pod.Name, pod.CreationTimestamp, np.CreationTimestamp)
		}
	}
	out := wait()
	if out.res.Phase != result.PhaseSucceeded {
		t.Fatalf("phase %s (%s), want Succeeded", out.res.Phase, out.res.Message)
	}
	if pods := listPods(t, c, ns, "np"); len(pods) != 0 {
		t.Errorf("after the run %d pods are left", len(pods))
	}
	if _, err := c.Client.NetworkingV1().NetworkPolicies(ns).Get(ctx, "np", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("after the run the NetworkPolicy is still there (err %v)", err)
	}
}

// A NetworkPolicy of the job's name that is not the job's is neither taken
// over nor deleted: the run ends Invalid, naming it, before any replica.
func TestAForeignNetworkPolicyOfTheJobsNameIsLeftAlone(t *testing.T) {
	t.Parallel()
	c := cluster.Get(t)
	ns := c.Namespace(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	foreign, err := c.Client.NetworkingV1().NetworkPolicies(ns).Create(ctx, &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Labels: map[string]string{"team": "frontend"}},
		Spec:       networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	job := newJob("web", v1alpha1.FrameworkTensorFlow).replicas(worker, 2, exitsAfter("1s", 0))
	out := runJob(t, c, ns, job.yaml(t))
	if out.res.Phase != result.PhaseInvalid || !strings.Contains(out.res.Message, "networkpolicy web (no trainstep.dev/job-name label") {
		t.Fatalf("phase %s (%s), want Invalid naming the NetworkPolicy", out.res.Phase, out.res.Message)
	}
	if pods := listPods(t, c, ns, "web"); len(pods) != 0 {
		t.Errorf("%d pods were created", len(pods))
	}
	got, err := c.Client.NetworkingV1().NetworkPolicies(ns).Get(ctx, "web", metav1.GetOptions{})
	if err != nil || got.UID != foreign.UID || len(got.OwnerReferences) != 0 || !cmp.Equal(got.Spec, foreign.Spec) {
		t.Errorf("the foreign NetworkPolicy was changed or deleted: %+v (%v)", got, err)
	}
}

// With the NetworkPolicy turned off (--network-policy=false) the job makes none.
func TestNoNetworkPolicyWhenTurnedOff(t *testing.T) {
	t.Parallel()
	c := cluster.Get(t)
	ns := c.Namespace(t)
	job := newJob("open", v1alpha1.FrameworkTensorFlow).replicas(worker, 1, exitsAfter("2s", 0))
	wait := startJob(t, c, ns, job.yaml(t), func(cfg *executor.Config) { cfg.NoNetworkPolicy = true })
	waitRunning(t, c, ns, "open", 1)
	// The pods run, so a NetworkPolicy would have been created before them.
	list, err := c.Client.NetworkingV1().NetworkPolicies(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil || len(list.Items) != 0 {
		t.Errorf("NetworkPolicies while the job runs: %v (%v), want none", list, err)
	}
	if out := wait(); out.res.Phase != result.PhaseSucceeded {
		t.Fatalf("phase %s (%s), want Succeeded", out.res.Phase, out.res.Message)
	}
}
