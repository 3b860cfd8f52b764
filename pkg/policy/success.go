package policy

import (
	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/frameworks"
)

// Succeeded reports whether the job has succeeded under rule: the leader
// (if any) succeeded, every replica of the AllOf types (if any) succeeded,
// and one replica of the AnyOf types (if any) succeeded.
func Succeeded(v *View, rule frameworks.SuccessRule) bool {
	if rule.Leader == nil && len(rule.AllOf) == 0 && len(rule.AnyOf) == 0 {
		return false
	}
	if rule.Leader != nil {
		r := v.Replica(ReplicaID{Type: rule.Leader.Type, Index: rule.Leader.Index})
		if r == nil || r.Phase != PhaseSucceeded {
			return false
		}
	}
	for _, t := range rule.AllOf {
		of := v.OfType(t)
		if len(of) == 0 {
			return false
		}
		for _, r := range of {
			if r.Phase != PhaseSucceeded {
				return false
			}
		}
	}
	if len(rule.AnyOf) > 0 && firstSucceeded(v, rule.AnyOf) == nil {
		return false
	}
	return true
}

func firstSucceeded(v *View, types []v1alpha1.ReplicaType) *Replica {
	for _, t := range types {
		for _, r := range v.OfType(t) {
			if r.Phase == PhaseSucceeded {
				return v.Replica(r.ReplicaID)
			}
		}
	}
	return nil
}

// MetricsReplica picks the replica whose termination message becomes the
// job's metrics: spec.metricsFrom when set, else the replica that decides
// success (the leader, the first of the AllOf types, or the AnyOf replica
// that succeeded).
func MetricsReplica(v *View, rule frameworks.SuccessRule) *Replica {
	if v.Job.Spec.MetricsFrom != "" {
		from, ok := frameworks.MetricsFrom(v.Job)
		if !ok {
			return nil
		}
		return v.Replica(ReplicaID{Type: from.Type, Index: from.Index})
	}
	switch {
	case rule.Leader != nil:
		return v.Replica(ReplicaID{Type: rule.Leader.Type, Index: rule.Leader.Index})
	case len(rule.AllOf) > 0:
		return v.Replica(ReplicaID{Type: rule.AllOf[0], Index: 0})
	case len(rule.AnyOf) > 0:
		return firstSucceeded(v, rule.AnyOf)
	}
	return nil
}
