package reconcile

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	k8stesting "k8s.io/client-go/testing"

	"github.com/trainstep/trainstep/internal/testutil"
	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/gang"
)

// TestBuiltinGangCreatesGatedThenLiftsEveryGate checks the order the
// scheduler sees: every pod is created gated, and the gates are lifted only
// once all of them exist.
func TestBuiltinGangCreatesGatedThenLiftsEveryGate(t *testing.T) {
	job := tfJob(v1alpha1.RestartPolicyNever)
	job.Spec.RunPolicy.SchedulingPolicy.Gang = v1alpha1.GangBuiltin
	h := start(t, job)
	names := []string{"mnist-ps-0", "mnist-worker-0", "mnist-worker-1"}
	testutil.Eventually(h.t, waitTimeout, "every gate lifted", func() bool {
		for _, n := range names {
			if p := h.pod(n); p == nil || gang.HasGate(p) {
				return false
			}
		}
		return true
	})
	creates, firstPatch := 0, -1
	for i, a := range h.client.Actions() {
		switch {
		case a.GetVerb() == "create" && a.GetResource().Resource == "pods":
			pod := a.(k8stesting.CreateAction).GetObject().(*corev1.Pod)
			if !gang.HasGate(pod) {
				t.Errorf("pod %s was created without the gang's gate", pod.Name)
			}
			if firstPatch >= 0 {
				t.Errorf("pod %s was created after a gate was lifted", pod.Name)
			}
			creates++
		case a.GetVerb() == "patch" && a.GetResource().Resource == "pods" && firstPatch < 0:
			firstPatch = i
		case a.GetVerb() == "delete":
			t.Errorf("unexpected delete %v", a)
		}
	}
	if creates != len(names) {
		t.Errorf("created %d pods, want %d", creates, len(names))
	}
}
