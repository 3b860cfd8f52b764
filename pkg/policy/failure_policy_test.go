package policy

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/frameworks"
	"github.com/trainstep/trainstep/pkg/result"
)

const master = v1alpha1.ReplicaTypeMaster

var masterLeads = frameworks.SuccessRule{Leader: &frameworks.ReplicaRef{Type: master, Index: 0}}

// ddp is a PyTorch DDP job (a master and two workers) with the failure
// policy SetDefaults gives it: restart the job, disruptions for free.
func ddp(policy v1alpha1.RestartPolicy, backoff int32) *v1alpha1.TrainJob {
	job := jobWith(v1alpha1.FrameworkPyTorch, policy, map[v1alpha1.ReplicaType]int32{master: 1, worker: 2})
	job.Spec.RunPolicy.BackoffLimit = ptr(backoff)
	job.Spec.RunPolicy.FailurePolicy = &v1alpha1.FailurePolicy{Restart: v1alpha1.FailureRestartJob, Rules: frameworks.DefaultFailureRules()}
	return job
}

func finishedAt(at time.Time) func(*Replica) { return func(r *Replica) { r.FinishedAt = at } }

func both(fs ...func(*Replica)) func(*Replica) {
	return func(r *Replica) {
		for _, f := range fs {
			f(r)
		}
	}
}

func disrupted(r *Replica) {
	r.Phase, r.Lost, r.Conditions = PhaseMissing, true, []string{"DisruptionTarget"}
}

// markedForPreemption is a running replica whose pod a disruption marked
// for removal at at; its end is not seen yet.
func markedForPreemption(at time.Time) func(*Replica) {
	return func(r *Replica) {
		r.Phase, r.Conditions, r.DisruptedAt = PhaseRunning, []string{"DisruptionTarget"}, at
	}
}

func TestFailurePolicy(t *testing.T) {
	now := t0.Add(time.Minute)
	at := now.Add(-10 * time.Second)
	cases := []struct {
		name string
		view *View
		want Decision
	}{{
		name: "one rank killed, its peers' collective calls fail after it: one counted job restart",
		view: viewOf(ddp(v1alpha1.RestartPolicyExitCode, 1),
			set(worker, 1, both(exited(137), finishedAt(at))),
			set(master, 0, both(exited(1), finishedAt(at.Add(300*time.Millisecond)))),
			set(worker, 0, both(exited(1), finishedAt(at.Add(2*time.Second))))),
		want: Decision{Outcome: OutcomeRunning, RestartJob: &JobRestart{Cause: ReplicaID{worker, 1}, Counted: true, Why: "worker-1 exit 137"}},
	}, {
		name: "OnFailure: any non-zero exit restarts the job once, not each rank in place",
		view: viewOf(ddp(v1alpha1.RestartPolicyOnFailure, 1), set(worker, 0, both(exited(1), finishedAt(at)))),
		want: Decision{Outcome: OutcomeRunning, RestartJob: &JobRestart{Cause: ReplicaID{worker, 0}, Counted: true, Why: "worker-0 exit 1"}},
	}, {
		name: "OnFailure: a killed rank and a peer's error exit in the same second: the killed rank is the cause",
		view: viewOf(ddp(v1alpha1.RestartPolicyOnFailure, 1),
			set(worker, 0, both(exited(1), finishedAt(at))),
			set(worker, 1, both(exited(137), finishedAt(at)))),
		want: Decision{Outcome: OutcomeRunning, RestartJob: &JobRestart{Cause: ReplicaID{worker, 1}, Counted: true, Why: "worker-1 exit 137"}},
	}, {
		name: "OnFailure: an error exit just now waits for a killed peer's end to be seen",
		view: viewOf(ddp(v1alpha1.RestartPolicyOnFailure, 1), set(worker, 0, both(exited(1), finishedAt(now.Add(-2*time.Second))))),
		want: Decision{Outcome: OutcomeRunning, RecheckAfter: 8 * time.Second, Settling: 8 * time.Second},
	}, {
		name: "OnFailure: an error exit just now with no peer still running restarts the job at once",
		view: viewOf(ddp(v1alpha1.RestartPolicyOnFailure, 1),
			set(worker, 0, both(exited(1), finishedAt(now.Add(-2*time.Second)))),
			set(worker, 1, func(r *Replica) { r.Phase = PhasePending }), set(master, 0, func(r *Replica) { r.Phase = PhasePending })),
		want: Decision{Outcome: OutcomeRunning, RestartJob: &JobRestart{Cause: ReplicaID{worker, 0}, Counted: true, Why: "worker-0 exit 1"}},
	}, {
		name: "OnFailure: a rank killed just now restarts the job at once",
		view: viewOf(ddp(v1alpha1.RestartPolicyOnFailure, 1), set(worker, 1, both(exited(137), finishedAt(now.Add(-time.Second))))),
		want: Decision{Outcome: OutcomeRunning, RestartJob: &JobRestart{Cause: ReplicaID{worker, 1}, Counted: true, Why: "worker-1 exit 137"}},
	}, {
		name: "a rank gone with no end on record is the cause of a peer's later error exit",
		view: viewOf(ddp(v1alpha1.RestartPolicyNever, 1),
			set(master, 0, func(r *Replica) { r.Phase, r.Lost, r.LostUnseen = PhaseMissing, true, true }),
			set(worker, 0, both(exited(1), finishedAt(at)))),
		want: Decision{Outcome: OutcomeRunning, RestartJob: &JobRestart{Cause: ReplicaID{master, 0}, Counted: false, Why: "master-0 lost"}},
	}, {
		name: "a rank killed at a known time is the cause, not a peer gone with no end on record",
		view: viewOf(ddp(v1alpha1.RestartPolicyNever, 1),
			set(master, 0, func(r *Replica) { r.Phase, r.Lost, r.LostUnseen = PhaseMissing, true, true }),
			set(worker, 1, both(exited(143), finishedAt(at)))),
		want: Decision{Outcome: OutcomeFailed, Reason: result.ReasonReplicaFailed, Message: "replica Worker/1 failed with exit code 143"},
	}, {
		name: "a rank still running whose pod a preemption marked is the cause of a peer's later error exit",
		view: viewOf(ddp(v1alpha1.RestartPolicyNever, 0),
			set(worker, 0, markedForPreemption(at)),
			set(worker, 1, both(exited(1), finishedAt(at.Add(3*time.Second))))),
		want: Decision{Outcome: OutcomeRunning, RestartJob: &JobRestart{Cause: ReplicaID{worker, 0}, Counted: false,
			Why: "worker-0 disrupted (preemption, eviction or a lost node)"}},
	}, {
		name: "a peer's error exit before a rank's pod was marked for preemption is the cause",
		view: viewOf(ddp(v1alpha1.RestartPolicyNever, 0),
			set(worker, 0, markedForPreemption(at.Add(3*time.Second))),
			set(worker, 1, both(exited(1), finishedAt(at)))),
		want: Decision{Outcome: OutcomeFailed, Reason: result.ReasonReplicaFailed, Message: "replica Worker/1 failed with exit code 1"},
	}, {
		name: "an MPI worker's error exit is no collateral of a worker gone with no end on record",
		view: viewOf(mpiJobRestartingAsAWhole(),
			set(worker, 0, func(r *Replica) { r.Phase, r.Lost, r.LostUnseen = PhaseMissing, true, true }),
			set(worker, 1, both(exited(3), finishedAt(at)))),
		want: Decision{Outcome: OutcomeFailed, Reason: result.ReasonReplicaFailed, Message: "replica Worker/1 failed with exit code 3"},
	}, {
		name: "an MPI worker's error exit after a worker's deletion was delivered follows that loss",
		view: viewOf(mpiJobRestartingAsAWhole(),
			set(worker, 0, func(r *Replica) {
				r.Phase, r.Lost, r.LostUnseen, r.GoneBy = PhaseMissing, true, true, at.Add(-30*time.Second)
			}),
			set(worker, 1, both(exited(3), finishedAt(at)))),
		want: Decision{Outcome: OutcomeRunning, RestartJob: &JobRestart{Cause: ReplicaID{worker, 0}, Counted: false, Why: "worker-0 lost"}},
	}, {
		name: "a rank killed after a peer's deletion was delivered follows that loss",
		view: viewOf(ddp(v1alpha1.RestartPolicyNever, 1),
			set(master, 0, func(r *Replica) {
				r.Phase, r.Lost, r.LostUnseen, r.GoneBy = PhaseMissing, true, true, at.Add(-time.Second)
			}),
			set(worker, 1, both(exited(143), finishedAt(at)))),
		want: Decision{Outcome: OutcomeRunning, RestartJob: &JobRestart{Cause: ReplicaID{master, 0}, Counted: false, Why: "master-0 lost"}},
	}, {
		name: "a bug (exit 1 under ExitCode) fails the job without restarting anyone",
		view: viewOf(ddp(v1alpha1.RestartPolicyExitCode, 1), set(master, 0, both(exited(1), finishedAt(at)))),
		want: Decision{Outcome: OutcomeFailed, Reason: result.ReasonReplicaFailed, Message: "replica Master/0 failed with exit code 1"},
	}, {
		name: "a permanent exit just now waits for its peers' failures before deciding",
		view: viewOf(ddp(v1alpha1.RestartPolicyExitCode, 1), set(master, 0, both(exited(1), finishedAt(now.Add(-time.Second))))),
		want: Decision{Outcome: OutcomeRunning, RecheckAfter: 9 * time.Second, Settling: 9 * time.Second},
	}, {
		name: "a preemption restarts the job without counting",
		view: viewOf(ddp(v1alpha1.RestartPolicyExitCode, 0), set(worker, 1, disrupted)),
		want: Decision{Outcome: OutcomeRunning, RestartJob: &JobRestart{Cause: ReplicaID{worker, 1}, Counted: false,
			Why: "worker-1 disrupted (preemption, eviction or a lost node)"}},
	}, {
		name: "without the default rule a preemption counts",
		view: viewOf(func() *v1alpha1.TrainJob {
			j := ddp(v1alpha1.RestartPolicyExitCode, 0)
			j.Spec.RunPolicy.FailurePolicy.Rules = []v1alpha1.FailurePolicyRule{}
			return j
		}(), set(worker, 1, disrupted)),
		want: Decision{Outcome: OutcomeFailed, Reason: result.ReasonBackoffLimitExceeded, Message: "the job failed again after 0 restarts, and backoffLimit=0 allows no more"},
	}, {
		name: "a FailJob rule on exit code 42 ends the job at once",
		view: viewOf(func() *v1alpha1.TrainJob {
			j := ddp(v1alpha1.RestartPolicyOnFailure, 5)
			j.Spec.RunPolicy.FailurePolicy.Rules = append(j.Spec.RunPolicy.FailurePolicy.Rules, v1alpha1.FailurePolicyRule{
				Action: v1alpha1.FailureActionFailJob, OnExitCodes: &v1alpha1.ExitCodesRequirement{Operator: v1alpha1.ExitCodesOpIn, Values: []int32{42}}})
			return j
		}(), set(worker, 0, both(exited(42), finishedAt(at)))),
		want: Decision{Outcome: OutcomeFailed, Reason: result.ReasonReplicaFailed, Message: "replica Worker/0 failed with exit code 42"},
	}, {
		name: "backoffLimit counts the job restart",
		view: func() *View {
			v := viewOf(ddp(v1alpha1.RestartPolicyExitCode, 1), set(worker, 1, both(exited(137), finishedAt(at))))
			v.Restarts = 1
			return v
		}(),
		want: Decision{Outcome: OutcomeFailed, Reason: result.ReasonBackoffLimitExceeded, Message: "the job failed again after 1 restarts, and backoffLimit=1 allows no more"},
	}, {
		name: "restart: Replica with the default rule: a disrupted worker is replaced alone, for free",
		view: viewOf(func() *v1alpha1.TrainJob {
			j := ddp(v1alpha1.RestartPolicyExitCode, 0)
			j.Spec.RunPolicy.FailurePolicy.Restart = v1alpha1.FailureRestartReplica
			return j
		}(), set(worker, 1, disrupted)),
		want: Decision{Outcome: OutcomeRunning, RecreateUncounted: []ReplicaID{{worker, 1}}},
	}, {
		name: "a RestartReplica rule for workers in a job that restarts as a whole",
		view: viewOf(func() *v1alpha1.TrainJob {
			j := ddp(v1alpha1.RestartPolicyExitCode, 3)
			j.Spec.RunPolicy.FailurePolicy.Rules = []v1alpha1.FailurePolicyRule{{Action: v1alpha1.FailureActionRestartReplica,
				ReplicaTypes: []v1alpha1.ReplicaType{worker}, OnExitCodes: &v1alpha1.ExitCodesRequirement{Operator: v1alpha1.ExitCodesOpNotIn, Values: []int32{1}}}}
			return j
		}(), set(worker, 1, both(exited(137), finishedAt(at)))),
		want: Decision{Outcome: OutcomeRunning, Recreate: []ReplicaID{{worker, 1}}},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.view.Now = now
			if diff := cmp.Diff(tc.want, Decide(tc.view, masterLeads, timeouts)); diff != "" {
				t.Errorf("decision (-want +got):\n%s", diff)
			}
		})
	}
}

// mpiJobRestartingAsAWhole is an MPI job of a launcher and two workers that
// restarts as a whole under the default failure rules, backoffLimit 3.
func mpiJobRestartingAsAWhole() *v1alpha1.TrainJob {
	j := jobWith(v1alpha1.FrameworkMPI, v1alpha1.RestartPolicyExitCode, map[v1alpha1.ReplicaType]int32{v1alpha1.ReplicaTypeLauncher: 1, worker: 2})
	j.Spec.RunPolicy.BackoffLimit = ptr(int32(3))
	j.Spec.RunPolicy.FailurePolicy = &v1alpha1.FailurePolicy{Restart: v1alpha1.FailureRestartJob, Rules: frameworks.DefaultFailureRules()}
	return j
}
