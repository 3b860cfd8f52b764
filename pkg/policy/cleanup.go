package policy

import "github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"

// CleanupPlan says which replicas to delete when the job ends. A replica's
// own Service goes with its pod; job-wide objects (the MPI Service, the
// hostfile ConfigMap, the SSH Secret) go when no pod remains.
type CleanupPlan struct {
	Pods []ReplicaID
	// Shared is true when every remaining pod is deleted, so the job-wide
	// objects are no longer needed.
	Shared bool
}

// Cleanup plans the end-of-job deletions. A terminated step (SIGTERM)
// deletes everything whatever the policy: Argo stopped it.
func Cleanup(policy v1alpha1.CleanPodPolicy, terminated bool, replicas []Replica) CleanupPlan {
	plan := CleanupPlan{Shared: true}
	for _, r := range replicas {
		if r.Phase == PhaseMissing {
			continue
		}
		if terminated || deletesAtEnd(policy, r.Phase) {
			plan.Pods = append(plan.Pods, r.ReplicaID)
		} else {
			plan.Shared = false
		}
	}
	return plan
}

// deletesAtEnd follows Kubeflow's cleanPodPolicy: All deletes every pod,
// Running deletes pods still pending or running, None deletes nothing.
func deletesAtEnd(policy v1alpha1.CleanPodPolicy, phase Phase) bool {
	switch policy {
	case v1alpha1.CleanPodPolicyAll:
		return true
	case v1alpha1.CleanPodPolicyNone:
		return false
	default:
		return phase == PhasePending || phase == PhaseRunning
	}
}
