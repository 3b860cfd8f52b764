package frameworks

import (
	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/frameworks/framework"
)

// RestartsWithJob reports whether a failure of a replica of type rt
// restarts the whole job: failurePolicy restart is Job and the type takes
// part in the collective (an MPI launcher and a TensorFlow evaluator do
// not).
func RestartsWithJob(job *v1alpha1.TrainJob, rt v1alpha1.ReplicaType) bool {
	fp := job.Spec.RunPolicy.FailurePolicy
	if fp == nil || fp.Restart != v1alpha1.FailureRestartJob {
		return false
	}
	return !replicaType(job, rt).OutsideCollective
}

// InPlaceRestartPolicy is the restart policy a replica's pod (or local
// process) is given: its own, except in a job that restarts as a whole,
// where no container is restarted in place — trainstep restarts every
// replica together instead, so one rank's failure costs one restart.
func InPlaceRestartPolicy(job *v1alpha1.TrainJob, rt v1alpha1.ReplicaType) v1alpha1.RestartPolicy {
	spec := job.Spec.ReplicaSpecs[rt]
	if spec == nil || RestartsWithJob(job, rt) {
		return v1alpha1.RestartPolicyNever
	}
	return spec.RestartPolicy
}

// FailsWithPeers reports whether a replica of type rt fails when a peer
// goes: every rank of a collective does, but not a process that only
// serves the driver (an MPI worker's sshd serves mpirun).
func FailsWithPeers(job *v1alpha1.TrainJob, rt v1alpha1.ReplicaType) bool {
	return !replicaType(job, rt).ServesPeers
}

// Driver returns the job's type that runs its entry point and reaches the
// others itself (MPI's launcher), and false when it has none.
func Driver(job *v1alpha1.TrainJob) (v1alpha1.ReplicaType, bool) {
	for _, t := range conventions(job).ReplicaTypes {
		if t.Drives {
			if _, ok := job.Spec.ReplicaSpecs[t.Type]; ok {
				return t.Type, true
			}
		}
	}
	return "", false
}

// IsSlot reports whether replicas of type rt run no process of their own
// on one machine (MPI's workers are slots of the launcher's hostfile).
func IsSlot(job *v1alpha1.TrainJob, rt v1alpha1.ReplicaType) bool {
	return replicaType(job, rt).Slot
}

// HeldUntilReady returns the job's type that is created only once every
// replica of another is Ready (an MPI launcher under WaitForWorkersReady),
// and that other type; ok is false for a job that holds nothing back.
func HeldUntilReady(job *v1alpha1.TrainJob) (held, awaited v1alpha1.ReplicaType, ok bool) {
	if s, is := of(job).(framework.Staged); is {
		return s.HeldUntilReady(job)
	}
	return "", "", false
}

// FailureRestart is what a retryable failure of the job restarts when it
// does not say (spec.runPolicy.failurePolicy.restart).
func FailureRestart(job *v1alpha1.TrainJob) v1alpha1.FailureRestart {
	if f := of(job); f != nil {
		return f.FailureRestart(job)
	}
	return v1alpha1.FailureRestartJob
}
