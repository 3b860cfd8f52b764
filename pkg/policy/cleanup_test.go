package policy

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
)

func TestCleanup(t *testing.T) {
	replicas := []Replica{
		{ReplicaID: ReplicaID{ps, 0}, Phase: PhaseRunning},
		{ReplicaID: ReplicaID{worker, 0}, Phase: PhaseSucceeded},
		{ReplicaID: ReplicaID{worker, 1}, Phase: PhasePending},
		{ReplicaID: ReplicaID{worker, 2}, Phase: PhaseMissing},
	}
	cases := []struct {
		name       string
		policy     v1alpha1.CleanPodPolicy
		terminated bool
		want       CleanupPlan
	}{
		{"Running deletes running and pending pods", v1alpha1.CleanPodPolicyRunning, false,
			CleanupPlan{Pods: []ReplicaID{{ps, 0}, {worker, 1}}}},
		{"All deletes every pod and the shared objects", v1alpha1.CleanPodPolicyAll, false,
			CleanupPlan{Pods: []ReplicaID{{ps, 0}, {worker, 0}, {worker, 1}}, Shared: true}},
		{"None deletes nothing", v1alpha1.CleanPodPolicyNone, false, CleanupPlan{}},
		{"termination deletes everything whatever the policy", v1alpha1.CleanPodPolicyNone, true,
			CleanupPlan{Pods: []ReplicaID{{ps, 0}, {worker, 0}, {worker, 1}}, Shared: true}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, Cleanup(tc.policy, tc.terminated, replicas)); diff != "" {
				t.Errorf("Cleanup() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}
