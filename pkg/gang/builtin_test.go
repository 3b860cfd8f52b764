package gang

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/utils/ptr"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
)

func TestNextWalksAnAttemptFromGatedToAdmittedOrBackoff(t *testing.T) {
	p := Params{MinAvailable: 4, Timeout: 10 * time.Second, MaxAttempts: 3, BaseBackoff: 2 * time.Second, MaxBackoff: 10 * time.Second}
	t0 := time.Unix(1000, 0)
	waiting := Admission{Attempt: 1, Stage: StageWaiting, UngatedAt: t0}
	cases := []struct {
		name   string
		state  Admission
		pods   Pods
		now    time.Time
		jitter float64
		want   Step
	}{
		{
			name:  "some pods not created yet: keep the gates",
			state: Start(), pods: Pods{Desired: 4, Existing: 3, Gated: 3}, now: t0,
			want: Step{Next: Start()},
		},
		{
			name:  "all pods exist: lift every gate together and start the clock",
			state: Start(), pods: Pods{Desired: 4, Existing: 4, Gated: 4}, now: t0,
			want: Step{Action: ActionUngate, Next: waiting, RecheckAfter: 10 * time.Second},
		},
		{
			name:  "adopted pods already ungated: only start the clock",
			state: Start(), pods: Pods{Desired: 4, Existing: 4}, now: t0,
			want: Step{Next: waiting, RecheckAfter: 10 * time.Second},
		},
		{
			name:  "enough pods bound: admitted",
			state: waiting, pods: Pods{Desired: 4, Existing: 4, Bound: 4}, now: t0.Add(3 * time.Second),
			want: Step{Next: Admission{Attempt: 1, Stage: StageAdmitted, UngatedAt: t0}},
		},
		{
			name:  "partly bound within the timeout: look again when it ends",
			state: waiting, pods: Pods{Desired: 4, Existing: 4, Bound: 3}, now: t0.Add(4 * time.Second),
			want: Step{Next: waiting, RecheckAfter: 6 * time.Second},
		},
		{
			name:  "partly bound at the timeout: release everything and back off",
			state: waiting, pods: Pods{Desired: 4, Existing: 4, Bound: 3}, now: t0.Add(10 * time.Second), jitter: 0.5,
			want: Step{Action: ActionReleaseAll, RecheckAfter: 2 * time.Second,
				Next:    Admission{Attempt: 1, Stage: StageBackingOff, RetryAt: t0.Add(12 * time.Second)},
				Message: "attempt 1 of 3: 3 of 4 pods bound within 10s, 4 needed; released every pod, next attempt in 2s"},
		},
		{
			name:  "last attempt times out: give up",
			state: Admission{Attempt: 3, Stage: StageWaiting, UngatedAt: t0}, pods: Pods{Desired: 4, Existing: 4, Bound: 2}, now: t0.Add(11 * time.Second),
			want: Step{Action: ActionGiveUp, Next: Admission{Attempt: 3, Stage: StageWaiting, UngatedAt: t0},
				Message: "attempt 3 of 3: 2 of 4 pods bound within 10s, 4 needed"},
		},
		{
			name:  "backoff not over: wait for it",
			state: Admission{Attempt: 1, Stage: StageBackingOff, RetryAt: t0.Add(5 * time.Second)}, pods: Pods{Desired: 4}, now: t0.Add(2 * time.Second),
			want: Step{Next: Admission{Attempt: 1, Stage: StageBackingOff, RetryAt: t0.Add(5 * time.Second)}, RecheckAfter: 3 * time.Second},
		},
		{
			name:  "backoff over but released pods still terminating: wait for them",
			state: Admission{Attempt: 1, Stage: StageBackingOff, RetryAt: t0}, pods: Pods{Desired: 4, Existing: 1}, now: t0.Add(time.Second),
			want: Step{Next: Admission{Attempt: 1, Stage: StageBackingOff, RetryAt: t0}, RecheckAfter: time.Second},
		},
		{
			name:  "backoff over and nothing left: next attempt",
			state: Admission{Attempt: 1, Stage: StageBackingOff, RetryAt: t0}, pods: Pods{Desired: 4}, now: t0.Add(time.Second),
			want: Step{Action: ActionRetry, Next: Admission{Attempt: 2, Stage: StageCreating}},
		},
		{
			name:  "admitted: a replica lost later is none of the gang's business",
			state: Admission{Attempt: 2, Stage: StageAdmitted}, pods: Pods{Desired: 4, Existing: 3, Bound: 3}, now: t0,
			want: Step{Next: Admission{Attempt: 2, Stage: StageAdmitted}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := p.Next(tc.state, tc.pods, tc.now, tc.jitter)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Next (-want +got):\n%s", diff)
			}
		})
	}
}

func TestBackoffDoublesIsCappedAndSpreadByJitter(t *testing.T) {
	p := Params{BaseBackoff: time.Second, MaxBackoff: 5 * time.Second}
	cases := []struct {
		attempt int
		jitter  float64
		want    time.Duration
	}{
		{1, 0.5, time.Second},
		{2, 0.5, 2 * time.Second},
		{3, 0.5, 4 * time.Second},
		{4, 0.5, 5 * time.Second}, // capped
		{1, 0, 500 * time.Millisecond},
		{1, 0.999, 1499 * time.Millisecond},
		{2, 7, 3 * time.Second}, // out-of-range jitter is clamped
	}
	for _, tc := range cases {
		if got := p.Backoff(tc.attempt, tc.jitter).Round(time.Millisecond); got != tc.want {
			t.Errorf("Backoff(%d, %v) = %s, want %s", tc.attempt, tc.jitter, got, tc.want)
		}
	}
}

// Under Kubernetes' gang the scheduler holds the pods: no gates to lift, the
// clock starts once minAvailable pods exist (by their creation, whenever
// the first look comes), and the one wait ends the job.
func TestNextUnderKubernetesGangWaitsOnceWithoutGates(t *testing.T) {
	p := Params{MinAvailable: 2, Timeout: 10 * time.Second, MaxAttempts: 1, SchedulerHolds: true}
	t0 := time.Unix(1000, 0)
	waiting := Admission{Attempt: 1, Stage: StageWaiting, UngatedAt: t0}
	cases := []struct {
		name  string
		state Admission
		pods  Pods
		now   time.Time
		want  Step
	}{
		{"fewer than minAvailable pods: the clock has not started", Start(), Pods{Desired: 3, Existing: 1}, t0,
			Step{Next: Start()}},
		{"minAvailable pods exist: the clock starts, nothing to ungate", Start(), Pods{Desired: 3, Existing: 2}, t0,
			Step{Next: waiting, RecheckAfter: 10 * time.Second}},
		{"minAvailable bound: admitted", waiting, Pods{Desired: 3, Existing: 3, Bound: 2}, t0.Add(time.Second),
			Step{Next: Admission{Attempt: 1, Stage: StageAdmitted, UngatedAt: t0}}},
		{"none bound at the timeout: give up at the first", waiting, Pods{Desired: 3, Existing: 3}, t0.Add(10 * time.Second),
			Step{Action: ActionGiveUp, Next: waiting, Message: "0 of 3 pods bound within 10s, 2 needed"}},
		{"a later first look (a re-attached step): the clock started when minAvailable pods existed", Start(),
			Pods{Desired: 3, Existing: 3, Created: []time.Time{t0.Add(5 * time.Second), t0.Add(-time.Second), t0}}, t0.Add(4 * time.Second),
			Step{Next: waiting, RecheckAfter: 6 * time.Second}},
		{"a later first look past the timeout since they existed: give up", Start(),
			Pods{Desired: 3, Existing: 2, Created: []time.Time{t0, t0.Add(-time.Minute)}}, t0.Add(10 * time.Second),
			Step{Action: ActionGiveUp, Next: waiting, Message: "0 of 3 pods bound within 10s, 2 needed"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, p.Next(tc.state, tc.pods, tc.now, 0.5)); diff != "" {
				t.Errorf("Next (-want +got):\n%s", diff)
			}
		})
	}
}

// A scheduler that binds a gang all together has placed it once any of its
// pods is bound: a peer preempted before the first look (its replacement
// unbound, or not created yet) does not make the wait time out.
func TestNextUnderASchedulerThatBindsTogetherAdmitsOnOnePodBound(t *testing.T) {
	p := Params{MinAvailable: 3, Timeout: 10 * time.Second, MaxAttempts: 1, SchedulerHolds: true, BindsTogether: true}
	t0 := time.Unix(1000, 0)
	waiting := Admission{Attempt: 1, Stage: StageWaiting, UngatedAt: t0}
	cases := []struct {
		name  string
		state Admission
		pods  Pods
		want  Step
	}{
		{"past the timeout, a peer's replacement unbound", waiting, Pods{Desired: 3, Existing: 3, Bound: 2},
			Step{Next: Admission{Attempt: 1, Stage: StageAdmitted, UngatedAt: t0}}},
		{"a first look with a peer's replacement not created", Start(), Pods{Desired: 3, Existing: 2, Bound: 2, QuotaRefuses: true},
			Step{Next: Admission{Attempt: 1, Stage: StageAdmitted}}},
		{"none bound at the timeout: give up", waiting, Pods{Desired: 3, Existing: 3},
			Step{Action: ActionGiveUp, Next: waiting, Message: "0 of 3 pods bound within 10s, 3 needed"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, p.Next(tc.state, tc.pods, t0.Add(time.Minute), 0.5)); diff != "" {
				t.Errorf("Next (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParamsForASchedulerThatHoldsThePodsMakesOneAttempt(t *testing.T) {
	job := testJob(&v1alpha1.SchedulingPolicy{Gang: v1alpha1.GangKubernetes, ScheduleTimeoutSeconds: ptr.To[int32](45), MaxScheduleAttempts: ptr.To[int32](3)})
	p := ParamsFor(job)
	if !p.SchedulerHolds || !p.BindsTogether || p.MaxAttempts != 1 || p.Timeout != 45*time.Second || p.MinAvailable != 4 {
		t.Errorf("ParamsFor = %+v, want the scheduler holding and binding together, 1 attempt of 45s for 4 pods", p)
	}
	if sp := ParamsFor(testJob(&v1alpha1.SchedulingPolicy{Gang: v1alpha1.GangSchedulerPlugins, MaxScheduleAttempts: ptr.To[int32](3)})); !sp.SchedulerHolds || !sp.BindsTogether || sp.MaxAttempts != 1 {
		t.Errorf("scheduler-plugins: %+v, want the scheduler holding and binding together, 1 attempt", sp)
	}
	if k := ParamsFor(testJob(&v1alpha1.SchedulingPolicy{Gang: v1alpha1.GangKueue, Queue: "q", MaxScheduleAttempts: ptr.To[int32](3)})); !k.SchedulerHolds || k.BindsTogether || k.MaxAttempts != 1 {
		t.Errorf("kueue: %+v, want Kueue's gate holding, pods bound one by one, 1 attempt", k)
	}
	if b := ParamsFor(testJob(&v1alpha1.SchedulingPolicy{Gang: v1alpha1.GangBuiltin, MaxScheduleAttempts: ptr.To[int32](3)})); b.SchedulerHolds || b.BindsTogether || b.MaxAttempts != 3 {
		t.Errorf("builtin: %+v, want gates and 3 attempts", b)
	}
}
