package v1alpha1

import (
	"encoding/json"
	"fmt"
)

// ReplicaCount is how many pods of this type run: Replicas, 1 when unset
// (the default), 0 for a nil spec.
func (s *ReplicaSpec) ReplicaCount() int32 {
	if s == nil {
		return 0
	}
	if s.Replicas == nil {
		return 1
	}
	return *s.Replicas
}

// TrainerStatusName is the name of the Service that reaches the step's
// progress endpoint and of the Secret holding its CA and token, which the
// replicas mount.
func TrainerStatusName(jobName string) string { return jobName + "-status" }

// TrainerStatusTLSName is the name of the Secret holding the endpoint's
// serving certificate and key, which only the step reads.
func TrainerStatusTLSName(jobName string) string { return jobName + "-status-tls" }

// CleanPodPolicyOrDefault returns the job's clean pod policy, Running when unset.
func (p *RunPolicy) CleanPodPolicyOrDefault() CleanPodPolicy {
	if p.CleanPodPolicy == nil {
		return CleanPodPolicyRunning
	}
	return *p.CleanPodPolicy
}

// DeepCopy returns an independent copy of the job, so a caller can default
// or override it without touching the original. Every field of a TrainJob
// round-trips through JSON, which keeps this free of generated code.
func (j *TrainJob) DeepCopy() *TrainJob {
	if j == nil {
		return nil
	}
	data, err := json.Marshal(j)
	if err != nil {
		panic(fmt.Sprintf("copying TrainJob: %v", err)) // cannot happen: plain data types
	}
	out := &TrainJob{}
	if err := json.Unmarshal(data, out); err != nil {
		panic(fmt.Sprintf("copying TrainJob: %v", err))
	}
	return out
}

// DeepCopy copies a failure policy, rules and all.
func (in *FailurePolicy) DeepCopy() *FailurePolicy {
	if in == nil {
		return nil
	}
	out := &FailurePolicy{Restart: in.Restart}
	if in.Rules != nil {
		out.Rules = make([]FailurePolicyRule, len(in.Rules))
		for i, r := range in.Rules {
			c := FailurePolicyRule{Action: r.Action}
			if r.OnExitCodes != nil {
				c.OnExitCodes = &ExitCodesRequirement{Operator: r.OnExitCodes.Operator, Values: append([]int32(nil), r.OnExitCodes.Values...)}
			}
			c.OnPodConditions = append([]PodConditionPattern(nil), r.OnPodConditions...)
			c.ReplicaTypes = append([]ReplicaType(nil), r.ReplicaTypes...)
			out.Rules[i] = c
		}
	}
	return out
}
