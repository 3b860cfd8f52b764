package policy

import (
	"fmt"
	"time"

	"github.com/trainstep/trainstep/pkg/frameworks"
	"github.com/trainstep/trainstep/pkg/result"
)

// Outcome is the job's state after a decision.
type Outcome string

// Outcomes. Running means the job goes on.
const (
	OutcomeRunning   Outcome = "Running"
	OutcomeSucceeded Outcome = "Succeeded"
	OutcomeFailed    Outcome = "Failed"
	OutcomeTransient Outcome = "Transient"
)

// Decision is what the job should do next.
type Decision struct {
	Outcome Outcome
	Reason  string
	Message string
	// Recreate lists replicas to replace (only while Running), each one
	// restart; RecreateUncounted those replaced for free (a rule's Ignore).
	Recreate, RecreateUncounted []ReplicaID
	// RestartJob, when set, stops every replica and starts the job's next
	// attempt (only while Running).
	RestartJob *JobRestart
	// RecheckAfter asks the caller to decide again after this long even if
	// nothing changes (a deadline or a stuck bound is coming); 0 for never.
	RecheckAfter time.Duration
	// Settling > 0: a failure of a job that restarts as a whole waits at
	// most this long for a peer's earlier exit to be seen (the cause).
	Settling time.Duration
}

// Decide reads the job's replicas and returns what happens next, checking in
// order: success, deadline, failures (the job's failure policy) and
// restarts against backoffLimit, then replicas stuck past their bounds.
func Decide(v *View, rule frameworks.SuccessRule, t Timeouts) Decision {
	if Succeeded(v, rule) {
		return Decision{Outcome: OutcomeSucceeded, Reason: result.ReasonSucceeded, Message: "the job succeeded"}
	}
	if d, ok := DeadlineExceeded(v); ok {
		return d
	}
	left, hasDeadline := DeadlineLeft(v)
	failures := CheckFailures(v, t)
	if failures.Permanent != nil {
		return Decision{Outcome: OutcomeFailed, Reason: result.ReasonReplicaFailed, Message: failureMessage(failures.Permanent)}
	}
	limit := v.Job.Spec.RunPolicy.BackoffLimit
	if needed := v.Restarts + failures.Counted(); BackoffExceeded(limit, needed) {
		return Decision{Outcome: OutcomeFailed, Reason: result.ReasonBackoffLimitExceeded, Message: backoffMessage(v.Restarts, needed, *limit)}
	}
	stuck := CheckStuck(v, t)
	switch {
	case stuck.Failed:
		return Decision{Outcome: OutcomeFailed, Reason: stuck.Reason, Message: stuck.Message}
	case stuck.Transient:
		return Decision{Outcome: OutcomeTransient, Reason: stuck.Reason, Message: stuck.Message}
	}
	d := Decision{Outcome: OutcomeRunning, Recreate: failures.Recreate, RecreateUncounted: failures.RecreateUncounted,
		RestartJob: failures.RestartJob, RecheckAfter: stuck.RecheckAfter}
	if failures.Wait > 0 && (d.RecheckAfter == 0 || failures.Wait < d.RecheckAfter) {
		d.RecheckAfter = failures.Wait
	}
	d.Settling = failures.Wait
	if hasDeadline && (d.RecheckAfter == 0 || left < d.RecheckAfter) {
		d.RecheckAfter = left
	}
	return d
}

// backoffMessage says why backoffLimit ended the job, counting the restarts
// that happened, as the restarts output does: in-place restarts may already
// have gone past the limit, else the failures seen need more restarts than
// are left (one more than none, or several at once, as a step that was away
// finds them, more than the few left).
func backoffMessage(restarts, needed, limit int32) string {
	switch {
	case restarts > limit:
		return fmt.Sprintf("the job restarted %d times, more than backoffLimit=%d", restarts, limit)
	case restarts < limit:
		return fmt.Sprintf("%d replicas failed at once after %d restarts, and backoffLimit=%d allows %d more", needed-restarts, restarts, limit, limit-restarts)
	}
	return fmt.Sprintf("the job failed again after %d restarts, and backoffLimit=%d allows no more", restarts, limit)
}
