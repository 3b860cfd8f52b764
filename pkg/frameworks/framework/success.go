package framework

import "github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"

// SuccessRule says which replicas' success ends a job. The executor's
// policy code reads it; each framework's folder says how it is built.
type SuccessRule struct {
	// Leader is the replica whose success ends the job.
	Leader *ReplicaRef
	// AllOf lists replica types every replica of which must succeed.
	AllOf []v1alpha1.ReplicaType
	// AnyOf lists replica types one success of which ends the job (elastic).
	AnyOf []v1alpha1.ReplicaType
}

// LeaderIfPresent is the rule "rt/0 decides" when the job has such a replica.
func LeaderIfPresent(job *v1alpha1.TrainJob, rt v1alpha1.ReplicaType) (SuccessRule, bool) {
	if Count(job, rt) == 0 {
		return SuccessRule{}, false
	}
	return SuccessRule{Leader: &ReplicaRef{Type: rt, Index: 0}}, true
}

// AllOfEveryType is the fallback for a job that has none of the replica
// types its framework decides success by: every replica must succeed.
func AllOfEveryType(job *v1alpha1.TrainJob) SuccessRule {
	return SuccessRule{AllOf: SortedReplicaTypes(job)}
}
