package policy

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/frameworks"
	"github.com/trainstep/trainstep/pkg/result"
)

const (
	ps     = v1alpha1.ReplicaTypePS
	worker = v1alpha1.ReplicaTypeWorker
	chief  = v1alpha1.ReplicaTypeChief
)

var worker0Leads = frameworks.SuccessRule{Leader: &frameworks.ReplicaRef{Type: worker, Index: 0}}

var timeouts = Timeouts{Stuck: 10 * time.Minute, Pending: 30 * time.Minute}

func TestDecide(t *testing.T) {
	tf := func(policy v1alpha1.RestartPolicy) *v1alpha1.TrainJob {
		return jobWith(v1alpha1.FrameworkTensorFlow, policy, map[v1alpha1.ReplicaType]int32{ps: 1, worker: 2})
	}
	withBackoff := func(job *v1alpha1.TrainJob, n int32) *v1alpha1.TrainJob {
		job.Spec.RunPolicy.BackoffLimit = ptr(n)
		return job
	}
	withDeadline := func(job *v1alpha1.TrainJob, s int64) *v1alpha1.TrainJob {
		job.Spec.RunPolicy.ActiveDeadlineSeconds = ptr(s)
		return job
	}
	cases := []struct {
		name string
		view *View
		rule frameworks.SuccessRule
		want Decision
	}{
		{
			name: "all running keeps running",
			view: viewOf(tf(v1alpha1.RestartPolicyNever)),
			rule: worker0Leads,
			want: Decision{Outcome: OutcomeRunning},
		},
		{
			name: "worker-0 success ends the job while ps still runs",
			view: viewOf(tf(v1alpha1.RestartPolicyNever), set(worker, 0, exited(0))),
			rule: worker0Leads,
			want: Decision{Outcome: OutcomeSucceeded, Reason: result.ReasonSucceeded, Message: "the job succeeded"},
		},
		{
			name: "worker-1 success alone does not end the job",
			view: viewOf(tf(v1alpha1.RestartPolicyNever), set(worker, 1, exited(0))),
			rule: worker0Leads,
			want: Decision{Outcome: OutcomeRunning},
		},
		{
			name: "exit 1 under Never fails the job",
			view: viewOf(tf(v1alpha1.RestartPolicyNever), set(worker, 1, exited(1))),
			rule: worker0Leads,
			want: Decision{Outcome: OutcomeFailed, Reason: result.ReasonReplicaFailed, Message: "replica Worker/1 failed with exit code 1"},
		},
		{
			name: "exit 137 under ExitCode is recreated",
			view: viewOf(tf(v1alpha1.RestartPolicyExitCode), set(worker, 1, exited(137))),
			rule: worker0Leads,
			want: Decision{Outcome: OutcomeRunning, Recreate: []ReplicaID{{worker, 1}}},
		},
		{
			name: "exit 1 under ExitCode is permanent",
			view: viewOf(tf(v1alpha1.RestartPolicyExitCode), set(worker, 1, exited(1))),
			rule: worker0Leads,
			want: Decision{Outcome: OutcomeFailed, Reason: result.ReasonReplicaFailed, Message: "replica Worker/1 failed with exit code 1"},
		},
		{
			name: "a retryableExitCodes code is recreated",
			view: viewOf(func() *v1alpha1.TrainJob {
				j := tf(v1alpha1.RestartPolicyExitCode)
				j.Spec.ReplicaSpecs[worker].RetryableExitCodes = []int32{75}
				return j
			}(), set(worker, 0, exited(75))),
			rule: worker0Leads,
			want: Decision{Outcome: OutcomeRunning, Recreate: []ReplicaID{{worker, 0}}},
		},
		{
			name: "a lost replica under Never is recreated",
			view: viewOf(tf(v1alpha1.RestartPolicyNever), set(ps, 0, func(r *Replica) { r.Phase, r.Lost = PhaseMissing, true })),
			rule: worker0Leads,
			want: Decision{Outcome: OutcomeRunning, Recreate: []ReplicaID{{ps, 0}}},
		},
		{
			name: "third retryable failure passes backoffLimit 2",
			view: viewOf(withBackoff(tf(v1alpha1.RestartPolicyExitCode), 2), set(worker, 1, exited(137)), func(v *View) { v.Restarts = 2 }),
			rule: worker0Leads,
			want: Decision{Outcome: OutcomeFailed, Reason: result.ReasonBackoffLimitExceeded, Message: "the job failed again after 2 restarts, and backoffLimit=2 allows no more"},
		},
		{
			name: "two retryable failures at once need more than the one restart backoffLimit 2 leaves",
			view: viewOf(withBackoff(tf(v1alpha1.RestartPolicyExitCode), 2), set(worker, 1, exited(143)), set(ps, 0, exited(143)), func(v *View) { v.Restarts = 1 }),
			rule: worker0Leads,
			want: Decision{Outcome: OutcomeFailed, Reason: result.ReasonBackoffLimitExceeded, Message: "2 replicas failed at once after 1 restarts, and backoffLimit=2 allows 1 more"},
		},
		{
			name: "second retryable failure stays within backoffLimit 2",
			view: viewOf(withBackoff(tf(v1alpha1.RestartPolicyExitCode), 2), set(worker, 1, exited(137)), func(v *View) { v.Restarts = 1 }),
			rule: worker0Leads,
			want: Decision{Outcome: OutcomeRunning, Recreate: []ReplicaID{{worker, 1}}},
		},
		{
			name: "in-place restarts past backoffLimit fail the job",
			view: viewOf(withBackoff(tf(v1alpha1.RestartPolicyOnFailure), 1), func(v *View) { v.Restarts = 2 }),
			rule: worker0Leads,
			want: Decision{Outcome: OutcomeFailed, Reason: result.ReasonBackoffLimitExceeded, Message: "the job restarted 2 times, more than backoffLimit=1"},
		},
		{
			name: "deadline passed fails the job",
			view: viewOf(withDeadline(tf(v1alpha1.RestartPolicyNever), 30)),
			rule: worker0Leads,
			want: Decision{Outcome: OutcomeFailed, Reason: result.ReasonDeadlineExceeded, Message: "the job ran longer than activeDeadlineSeconds=30"},
		},
		{
			name: "deadline ahead asks for a recheck when it falls",
			view: viewOf(withDeadline(tf(v1alpha1.RestartPolicyNever), 90)),
			rule: worker0Leads,
			want: Decision{Outcome: OutcomeRunning, RecheckAfter: 30 * time.Second},
		},
		{
			name: "success wins over a deadline that passed in the same moment",
			view: viewOf(withDeadline(tf(v1alpha1.RestartPolicyNever), 30), set(worker, 0, exited(0))),
			rule: worker0Leads,
			want: Decision{Outcome: OutcomeSucceeded, Reason: result.ReasonSucceeded, Message: "the job succeeded"},
		},
		{
			name: "image pull back-off past the stuck bound fails with that reason",
			view: viewOf(tf(v1alpha1.RestartPolicyNever), set(worker, 1, func(r *Replica) {
				r.Phase, r.WaitingReason, r.WaitingSince = PhasePending, "ImagePullBackOff", t0
			}), func(v *View) { v.Now = t0.Add(11 * time.Minute) }),
			rule: worker0Leads,
			want: Decision{Outcome: OutcomeFailed, Reason: "ImagePullBackOff", Message: "replica Worker/1 waited in ImagePullBackOff for 11m0s (limit 10m0s)"},
		},
		{
			name: "image pull back-off within the bound rechecks when it would expire",
			view: viewOf(tf(v1alpha1.RestartPolicyNever), set(worker, 1, func(r *Replica) {
				r.Phase, r.WaitingReason, r.WaitingSince = PhasePending, "ImagePullBackOff", t0
			}), func(v *View) { v.Now = t0.Add(4 * time.Minute) }),
			rule: worker0Leads,
			want: Decision{Outcome: OutcomeRunning, RecheckAfter: 6 * time.Minute},
		},
		{
			name: "unschedulable past the pending bound is transient",
			view: viewOf(tf(v1alpha1.RestartPolicyNever), set(worker, 1, func(r *Replica) {
				r.Phase, r.Unschedulable, r.PendingSince = PhasePending, true, t0
			}), func(v *View) { v.Now = t0.Add(31 * time.Minute) }),
			rule: worker0Leads,
			want: Decision{Outcome: OutcomeTransient, Reason: result.ReasonPendingTimeout, Message: "replica Worker/1 could not be scheduled for 31m0s (limit 30m0s)"},
		},
		{
			name: "AllWorkers needs every worker",
			view: viewOf(tf(v1alpha1.RestartPolicyNever), set(worker, 0, exited(0))),
			rule: frameworks.SuccessRule{AllOf: []v1alpha1.ReplicaType{worker}},
			want: Decision{Outcome: OutcomeRunning},
		},
		{
			name: "AllWorkers succeeds when every worker has",
			view: viewOf(tf(v1alpha1.RestartPolicyNever), set(worker, 0, exited(0)), set(worker, 1, exited(0))),
			rule: frameworks.SuccessRule{AllOf: []v1alpha1.ReplicaType{worker}},
			want: Decision{Outcome: OutcomeSucceeded, Reason: result.ReasonSucceeded, Message: "the job succeeded"},
		},
		{
			name: "chief decides when present",
			view: viewOf(jobWith(v1alpha1.FrameworkTensorFlow, v1alpha1.RestartPolicyNever, map[v1alpha1.ReplicaType]int32{chief: 1, worker: 2}),
				set(worker, 0, exited(0)), set(worker, 1, exited(0))),
			rule: frameworks.SuccessRule{Leader: &frameworks.ReplicaRef{Type: chief, Index: 0}},
			want: Decision{Outcome: OutcomeRunning},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := Decide(tc.view, tc.rule, timeouts)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Decide() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestElasticJobSurvivesLosingAWorkerAboveMinReplicas(t *testing.T) {
	job := jobWith(v1alpha1.FrameworkPyTorch, v1alpha1.RestartPolicyNever, map[v1alpha1.ReplicaType]int32{worker: 3})
	job.Spec.ElasticPolicy = &v1alpha1.ElasticPolicy{MinReplicas: ptr(int32(2)), MaxReplicas: ptr(int32(3)), GrowIntoCapacity: ptr(true)}
	rule := frameworks.SuccessRule{AnyOf: []v1alpha1.ReplicaType{worker}}

	oneLost := Decide(viewOf(job, set(worker, 2, exited(1))), rule, timeouts)
	if oneLost.Outcome != OutcomeRunning {
		t.Fatalf("losing 1 of 3 workers with minReplicas 2: outcome %s (%s), want Running", oneLost.Outcome, oneLost.Message)
	}
	twoLost := Decide(viewOf(job, set(worker, 1, exited(1)), set(worker, 2, exited(1))), rule, timeouts)
	if twoLost.Outcome != OutcomeFailed || twoLost.Reason != result.ReasonReplicaFailed {
		t.Fatalf("losing 2 of 3 workers with minReplicas 2: %s/%s, want Failed/ReplicaFailed", twoLost.Outcome, twoLost.Reason)
	}
	anyDone := Decide(viewOf(job, set(worker, 2, exited(1)), set(worker, 1, exited(0))), rule, timeouts)
	if anyDone.Outcome != OutcomeSucceeded {
		t.Fatalf("elastic job with one worker succeeded: %s, want Succeeded", anyDone.Outcome)
	}
}

func TestRestartsInPlaceFollowsTheKubelet(t *testing.T) {
	cases := []struct {
		policy v1alpha1.RestartPolicy
		code   int32
		want   bool
	}{
		{v1alpha1.RestartPolicyAlways, 0, true},
		{v1alpha1.RestartPolicyAlways, 1, true},
		{v1alpha1.RestartPolicyOnFailure, 0, false},
		{v1alpha1.RestartPolicyOnFailure, 137, true},
		{v1alpha1.RestartPolicyNever, 1, false},
		{v1alpha1.RestartPolicyExitCode, 137, false},
	}
	for _, tc := range cases {
		if got := RestartsInPlace(tc.policy, tc.code); got != tc.want {
			t.Errorf("RestartsInPlace(%s, %d) = %v, want %v", tc.policy, tc.code, got, tc.want)
		}
	}
}

func TestMetricsReplica(t *testing.T) {
	job := jobWith(v1alpha1.FrameworkTensorFlow, v1alpha1.RestartPolicyNever, map[v1alpha1.ReplicaType]int32{ps: 1, worker: 2})
	if got := MetricsReplica(viewOf(job), worker0Leads); got == nil || got.ReplicaID != (ReplicaID{worker, 0}) {
		t.Errorf("default metrics replica = %v, want Worker/0", got)
	}
	job.Spec.MetricsFrom = "Worker/1"
	if got := MetricsReplica(viewOf(job), worker0Leads); got == nil || got.ReplicaID != (ReplicaID{worker, 1}) {
		t.Errorf("metricsFrom Worker/1 gave %v", got)
	}
}
