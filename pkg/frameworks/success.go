package frameworks

import "github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"

// SuccessRule says which replicas' success ends a job. The executor's
// policy code reads it; each framework's file says how it is built.
type SuccessRule struct {
	// Leader is the replica whose success ends the job.
	Leader *ReplicaRef
	// AllOf lists replica types every replica of which must succeed.
	AllOf []v1alpha1.ReplicaType
	// AnyOf lists replica types one success of which ends the job (elastic).
	AnyOf []v1alpha1.ReplicaType
}

// SuccessRuleFor returns the success rule of job's framework; the zero rule
// for an unknown framework (validation rejects those).
func SuccessRuleFor(job *v1alpha1.TrainJob) SuccessRule {
	fw, err := For(job.Spec.Framework)
	if err != nil {
		return SuccessRule{}
	}
	return fw.SuccessRule(job)
}

// Leaders returns the replicas whose logs stream by default: the one that
// decides success (chief, master, launcher), else index 0 of the first type
// whose replicas decide it (worker-0).
func Leaders(job *v1alpha1.TrainJob) []ReplicaRef {
	rule := SuccessRuleFor(job)
	if rule.Leader != nil {
		return []ReplicaRef{*rule.Leader}
	}
	for _, types := range [][]v1alpha1.ReplicaType{rule.AllOf, rule.AnyOf} {
		for _, rt := range types {
			if Replicas(job, rt) > 0 {
				return []ReplicaRef{{Type: rt, Index: 0}}
			}
		}
	}
	return nil
}

// leaderIfPresent is the rule "rt/0 decides" when the job has such a replica.
func leaderIfPresent(job *v1alpha1.TrainJob, rt v1alpha1.ReplicaType) (SuccessRule, bool) {
	if Replicas(job, rt) == 0 {
		return SuccessRule{}, false
	}
	return SuccessRule{Leader: &ReplicaRef{Type: rt, Index: 0}}, true
}

// allOfEveryType is the fallback for a job that has none of the replica
// types its framework decides success by: every replica must succeed.
func allOfEveryType(job *v1alpha1.TrainJob) SuccessRule {
	return SuccessRule{AllOf: v1alpha1.SortedReplicaTypes(job)}
}
