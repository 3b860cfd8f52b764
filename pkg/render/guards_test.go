package render_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/render"
)

// A job whose ranks restart as a whole, or that is gang-scheduled, gets a
// PodDisruptionBudget that holds every rank (and only its ranks: not an
// MPI launcher, not an evaluator); a job whose replicas restart alone gets
// none.
func TestDisruptionBudgetHoldsEveryRank(t *testing.T) {
	builtin := withGang(v1alpha1.SchedulingPolicy{Gang: v1alpha1.GangBuiltin})
	cases := []struct {
		name    string
		job     *v1alpha1.TrainJob
		min     int
		covers  []string // replica pods the selector selects
		ignores []string
	}{
		{"PyTorch DDP", newJob(v1alpha1.FrameworkPyTorch, "ddp", replicas{master: 1, worker: 3}), 4, []string{"master", "worker"}, nil},
		{"MPI: the workers, not the launcher", newJob(v1alpha1.FrameworkMPI, "pi", replicas{launcher: 1, worker: 2}), 2, []string{"worker"}, []string{"launcher"}},
		{"TensorFlow with a gang, without its evaluator", newJob(v1alpha1.FrameworkTensorFlow, "tf", replicas{ps: 1, worker: 2, evaluator: 1}, builtin), 3, []string{"ps", "worker"}, []string{"evaluator"}},
		{"TensorFlow PS/worker without a gang restarts replicas alone", newJob(v1alpha1.FrameworkTensorFlow, "tf", replicas{ps: 1, worker: 2}), 0, nil, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			id := identity("team-a", tc.job.Name)
			id.OwnerID = "1d"
			pdb := render.DisruptionBudget(tc.job, id)
			if tc.min == 0 {
				if pdb != nil {
					t.Fatalf("a PodDisruptionBudget for a job whose replicas restart alone: %+v", pdb.Spec)
				}
				return
			}
			if pdb == nil || pdb.Spec.MinAvailable.IntValue() != tc.min || pdb.Name != tc.job.Name {
				t.Fatalf("PodDisruptionBudget %+v, want %s with minAvailable %d", pdb, tc.job.Name, tc.min)
			}
			if diff := cmp.Diff(controllerRef(), pdb.OwnerReferences); diff != "" {
				t.Errorf("owner (-want +got):\n%s", diff)
			}
			selector, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
			if err != nil {
				t.Fatal(err)
			}
			pod := func(rt string, job string, identity string) labels.Set {
				return labels.Set{v1alpha1.LabelJobName: job, v1alpha1.LabelIdentity: identity, v1alpha1.LabelReplicaType: rt}
			}
			for _, rt := range tc.covers {
				if !selector.Matches(pod(rt, tc.job.Name, "1d")) {
					t.Errorf("the budget does not hold the %s pods", rt)
				}
				if selector.Matches(pod(rt, tc.job.Name, "another")) || selector.Matches(pod(rt, "other", "1d")) {
					t.Errorf("the budget holds %s pods of another job or identity", rt)
				}
			}
			for _, rt := range tc.ignores {
				if selector.Matches(pod(rt, tc.job.Name, "1d")) {
					t.Errorf("the budget holds the %s pods, which are no rank", rt)
				}
			}
		})
	}
}
