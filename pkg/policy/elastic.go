package policy

import "github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"

// ToleratesLoss reports whether an elastic PyTorch job keeps running after
// replica r failed permanently: r is a worker and at least minReplicas
// workers are still alive (pending, running or succeeded).
func ToleratesLoss(v *View, r Replica) bool {
	ep := v.Job.Spec.ElasticPolicy
	if ep == nil || r.Type != v1alpha1.ReplicaTypeWorker {
		return false
	}
	minReplicas := int32(1)
	if ep.MinReplicas != nil {
		minReplicas = *ep.MinReplicas
	}
	alive := int32(0)
	for _, w := range v.OfType(v1alpha1.ReplicaTypeWorker) {
		if w.ReplicaID == r.ReplicaID {
			continue
		}
		switch w.Phase {
		case PhasePending, PhaseRunning, PhaseSucceeded:
			alive++
		}
	}
	return alive >= minReplicas
}
