package gang

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
)

// Stage is where a gang (built-in, or one whose scheduler holds the pods)
// stands in one scheduling attempt.
type Stage string

// Stages of an attempt: pods are created gated (Creating), the gates are
// lifted and the scheduler has ScheduleTimeout to bind MinAvailable pods
// (Waiting); then the job runs (Admitted), or its pods are given back and it
// waits a randomised backoff before the next attempt (BackingOff).
const (
	StageCreating   Stage = "Creating"
	StageWaiting    Stage = "Waiting"
	StageAdmitted   Stage = "Admitted"
	StageBackingOff Stage = "BackingOff"
)

// Action is what the caller must do after a step.
type Action string

// Actions.
const (
	// ActionNone: nothing to do now.
	ActionNone Action = ""
	// ActionUngate: lift every pod's gate, together.
	ActionUngate Action = "Ungate"
	// ActionReleaseAll: delete every pod of the job; the attempt failed.
	ActionReleaseAll Action = "ReleaseAll"
	// ActionRetry: create the pods again, gated, for the next attempt.
	ActionRetry Action = "Retry"
	// ActionGiveUp: the last attempt failed; the job ends Unschedulable.
	ActionGiveUp Action = "GiveUp"
)

// Admission is the built-in gang's state between looks at the job.
type Admission struct {
	// Attempt counts scheduling attempts, from 1.
	Attempt int
	Stage   Stage
	// UngatedAt is when the current attempt's gates were lifted.
	UngatedAt time.Time
	// RetryAt is when the next attempt may start (BackingOff).
	RetryAt time.Time
	// QuotaReleases counts the times this attempt's pods were given back
	// because a ResourceQuota refused the rest. ForQuota: the backoff
	// follows such a release, and the same attempt is tried again after it.
	// PartialSince is when the quota was first seen refusing the rest of
	// pods that exist (zero while it is not).
	QuotaReleases int
	ForQuota      bool
	PartialSince  time.Time
}

// Start is the state of a job before its first pod exists.
func Start() Admission { return Admission{Attempt: 1, Stage: StageCreating} }

// Pods counts the job's live pods (not being deleted) at one moment.
type Pods struct {
	// Desired is how many replica pods the job has; Existing how many exist.
	Desired, Existing int
	// Gated carry the gang's gate; Bound have a node.
	Gated, Bound int
	// Created is when each existing pod was created (its
	// creationTimestamp), in any order; empty when not known.
	Created []time.Time
	// QuotaRefuses says a ResourceQuota refused some of the job's creates
	// the last time they were tried.
	QuotaRefuses bool
}

// existedSince is when n of the pods existed: the n-th earliest creation,
// zero when fewer than n creation times are known.
func (pods Pods) existedSince(n int) time.Time {
	if n <= 0 || len(pods.Created) < n {
		return time.Time{}
	}
	times := slices.SortedFunc(slices.Values(pods.Created), func(a, b time.Time) int { return a.Compare(b) })
	return times[n-1]
}

// Params are the built-in gang's bounds, from schedulingPolicy.
type Params struct {
	MinAvailable int
	Timeout      time.Duration
	MaxAttempts  int
	// BaseBackoff is the mean wait before the second attempt, doubled for
	// each later one up to MaxBackoff.
	BaseBackoff, MaxBackoff time.Duration
	// SchedulerHolds says the scheduler itself keeps the pods unbound until
	// MinAvailable fit (Kubernetes' PodGroup, scheduler-plugins'
	// coscheduling, Kueue's admission gate): there are no trainstep gates, the
	// clock starts once MinAvailable pods exist, and there is one attempt,
	// since giving pods back that hold nothing frees nothing.
	SchedulerHolds bool
	// BindsTogether says the scheduler binds no pod of the gang before
	// MinAvailable of them fit at once (Kubernetes' gang, scheduler-plugins'
	// coscheduling): one pod of the attempt bound shows the gang was placed,
	// whatever became of its peers since (a preemption the step did not see
	// land before its first look).
	BindsTogether bool
	// QuotaPatience is how long pods of the gang may hold part of a
	// ResourceQuota that refuses the rest before they are given back.
	QuotaPatience time.Duration
}

// Backoff bounds used when a job's own timeout does not suggest shorter ones.
const (
	DefaultBaseBackoff = 2 * time.Second
	DefaultMaxBackoff  = 2 * time.Minute
)

// ParamsFor reads a defaulted job's scheduling policy.
func ParamsFor(job *v1alpha1.TrainJob) Params {
	p := Params{MinAvailable: int(MinMember(job)), Timeout: 300 * time.Second, MaxAttempts: 3,
		BaseBackoff: DefaultBaseBackoff, MaxBackoff: DefaultMaxBackoff}
	if sp := job.Spec.RunPolicy.SchedulingPolicy; sp != nil {
		if sp.ScheduleTimeoutSeconds != nil {
			p.Timeout = time.Duration(*sp.ScheduleTimeoutSeconds) * time.Second
		}
		if sp.MaxScheduleAttempts != nil {
			p.MaxAttempts = int(*sp.MaxScheduleAttempts)
		}
	}
	switch Kind(job) {
	case v1alpha1.GangKubernetes, v1alpha1.GangSchedulerPlugins, v1alpha1.GangKueue:
		p.SchedulerHolds, p.MaxAttempts = true, 1
		// Kueue admits the group; the default scheduler binds its pods one by one.
		p.BindsTogether = Kind(job) != v1alpha1.GangKueue
	}
	// Waiting much longer than an attempt itself only delays the job.
	p.MaxBackoff = min(p.MaxBackoff, max(p.Timeout, p.BaseBackoff))
	p.QuotaPatience = min(QuotaPatience, p.Timeout)
	return p
}

// Step is the outcome of one look at the job.
type Step struct {
	Action Action
	Next   Admission
	// RecheckAfter asks for another look after this long even if no pod
	// changes (0: no need).
	RecheckAfter time.Duration
	// Message explains ReleaseAll and GiveUp.
	Message string
	// QuotaRelease: the ReleaseAll gives back a gang a quota refused in part.
	QuotaRelease bool
}

// recheckWhileReleasing is how often to look while released pods are still
// going away (their deletions also trigger a look).
const recheckWhileReleasing = time.Second

// Next decides the built-in gang's step. jitter is a random number in
// [0, 1) drawn by the caller; it spreads the backoff of jobs that failed
// together so that they do not collide again.
func (p Params) Next(a Admission, pods Pods, now time.Time, jitter float64) Step {
	if p.BindsTogether && pods.Bound > 0 && (a.Stage == StageCreating || a.Stage == StageWaiting) {
		a.Stage = StageAdmitted
		return Step{Next: a}
	}
	switch a.Stage {
	case StageCreating:
		need := pods.Desired
		if p.SchedulerHolds {
			need = min(need, p.MinAvailable)
		}
		if pods.Existing < need {
			return p.quotaRelease(a, pods, now, jitter)
		}
		next := a
		next.Stage, next.UngatedAt = StageWaiting, now
		if p.SchedulerHolds && pods.Gated == 0 {
			// The scheduler has held the pods since enough of them existed:
			// a later first look (a step re-attached to the job) does not
			// start the wait over.
			if since := pods.existedSince(need); !since.IsZero() && since.Before(now) {
				next.UngatedAt = since
			}
			return p.Next(next, pods, now, jitter)
		}
		step := Step{Next: next, RecheckAfter: p.Timeout}
		if pods.Gated > 0 {
			step.Action = ActionUngate
		}
		return step
	case StageWaiting:
		if pods.Bound >= p.MinAvailable {
			next := a
			next.Stage = StageAdmitted
			return Step{Next: next}
		}
		waited := now.Sub(a.UngatedAt)
		if waited < p.Timeout {
			return Step{Next: a, RecheckAfter: p.Timeout - waited}
		}
		msg := fmt.Sprintf("%d of %d pods bound within %s, %d needed", pods.Bound, pods.Desired, p.Timeout, p.MinAvailable)
		if p.MaxAttempts > 1 {
			msg = fmt.Sprintf("attempt %d of %d: %s", a.Attempt, p.MaxAttempts, msg)
		}
		if a.Attempt >= p.MaxAttempts {
			return Step{Action: ActionGiveUp, Next: a, Message: msg}
		}
		wait := p.Backoff(a.Attempt, jitter)
		next := Admission{Attempt: a.Attempt, Stage: StageBackingOff, RetryAt: now.Add(wait)}
		return Step{Action: ActionReleaseAll, Next: next, RecheckAfter: wait,
			Message: fmt.Sprintf("%s; released every pod, next attempt in %s", msg, wait.Round(time.Millisecond))}
	case StageBackingOff:
		if left := a.RetryAt.Sub(now); left > 0 {
			return Step{Next: a, RecheckAfter: left}
		}
		if pods.Existing > 0 {
			return Step{Next: a, RecheckAfter: recheckWhileReleasing}
		}
		if a.ForQuota {
			return Step{Action: ActionRetry, Next: Admission{Attempt: a.Attempt, Stage: StageCreating, QuotaReleases: a.QuotaReleases}}
		}
		return Step{Action: ActionRetry, Next: Admission{Attempt: a.Attempt + 1, Stage: StageCreating}}
	}
	return Step{Next: a}
}

// Backoff is the wait after failed attempt n (from 1): BaseBackoff·2^(n-1),
// capped at MaxBackoff, scaled by a factor in [0.5, 1.5) from jitter.
func (p Params) Backoff(attempt int, jitter float64) time.Duration {
	mean := float64(p.BaseBackoff) * math.Pow(2, float64(max(attempt-1, 0)))
	mean = min(mean, float64(p.MaxBackoff))
	jitter = min(max(jitter, 0), 1)
	return time.Duration(mean * (0.5 + jitter))
}
