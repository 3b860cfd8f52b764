package policy

import (
	"fmt"
	"strings"

	"github.com/trainstep/trainstep/pkg/result"
)

// LeaseState is where the run stands with the job's Lease, the fence of
// every write: only the run holding it may delete the job's objects.
type LeaseState string

const (
	// LeaseHeld: this run holds the Lease.
	LeaseHeld LeaseState = "Held"
	// LeaseLost: this run could not renew it; nobody else was seen holding it.
	LeaseLost LeaseState = "Lost"
	// LeaseSuperseded: another run of the job holds it.
	LeaseSuperseded LeaseState = "Superseded"
	// LeaseNotRetaken: this run tried to hold it again before its
	// teardown and could not (the API server was away).
	LeaseNotRetaken LeaseState = "NotRetaken"
	// LeaseNeverHeld: this run never held it (it waited for another run's).
	LeaseNeverHeld LeaseState = "NeverHeld"
)

// RunError is the error a run ended with, as data.
type RunError struct {
	Phase result.Phase
	// Reason is empty for an error that does not name one.
	Reason  string
	Message string
}

// TeardownReport is what the teardown did.
type TeardownReport struct {
	// LostLease: the Lease was lost while it ran, so it stopped deleting.
	LostLease bool
	// Left names the objects still there when it ended.
	Left []string
	// Err is why it could not confirm that the objects are gone ("" when it could).
	Err string
}

// EndingFacts are all that decides how a run ends.
type EndingFacts struct {
	Lease LeaseState
	// Stopped: the step was signalled.
	Stopped bool
	// HandOver: the signal came because the step's own pod is being
	// removed by the infrastructure (Disruption says how): the job is not
	// this step's to end, but its retry's to go on with.
	HandOver   bool
	Disruption string
	// Started: the controller started (it may have created or re-attached objects).
	Started bool
	// Decision is the controller's last decision; its Outcome is Running
	// when the job goes on, empty when the controller ended with Err.
	Decision Decision
	// Err is the error the run ended with (nil when none).
	Err *RunError
	// RetakeFailure says why the Lease could not be held again
	// (LeaseNotRetaken), e.g. "within 10s (connection refused)".
	RetakeFailure string
	// Teardown is what the teardown did, once it ran (nil before).
	Teardown *TeardownReport
}

// EndingAction is what the step does with the job's objects.
type EndingAction string

const (
	// EndWithError: nothing of the job is this run's to touch; the run's
	// error is its result as it stands.
	EndWithError EndingAction = "EndWithError"
	// LeaveObjects: delete nothing; the result is Phase, Reason, Message.
	LeaveObjects EndingAction = "LeaveObjects"
	// RetakeLease: hold the job's Lease again, then decide again with the
	// Lease's new state.
	RetakeLease EndingAction = "RetakeLease"
	// TearDown: delete the job's objects (all of them with DeleteAll,
	// else per cleanPodPolicy), fenced by the Lease, then decide again
	// with the teardown's report.
	TearDown EndingAction = "TearDown"
	// Ended: the teardown ran; the result is Phase, Reason, Message.
	Ended EndingAction = "Ended"
)

// Ending is how a run ends.
type Ending struct {
	Action EndingAction
	// DeleteAll deletes every object of the job whatever cleanPodPolicy
	// says (TearDown): the step was stopped or the run failed.
	DeleteAll bool
	// Settle: the job's outcome is known, so a signal from now on only
	// hurries the teardown (the outputs no longer say Terminated).
	Settle bool
	// ListReplicas: the result lists the replicas, restarts and metrics.
	ListReplicas bool
	// ReleaseLease: give the Lease up (and delete it if nobody holds it).
	ReleaseLease bool
	// Phase, Reason and Message are the run's result (not with
	// EndWithError, RetakeLease or TearDown).
	Phase   result.Phase
	Reason  string
	Message string
}

// Messages of the endings that leave the job's objects to another run.
const (
	// MessageLeaseLost is the result of a run another run took over.
	MessageLeaseLost         = "this run lost the job's lease to another run of the job"
	messageNeverHeld         = "the step was stopped while another run of the job held its lease; the job's objects are left to that run"
	messageStoppedSuperseded = "the step was stopped after another run of the job took it over (its lease); nothing was deleted: " +
		"the job's objects are that run's"
)

// End decides how a run ends, from the Lease, the signal, the controller's
// decision or error and, once it ran, the teardown. The executor carries
// the ending out: for RetakeLease and TearDown it does that, fills in
// the new fact and asks again.
func End(f EndingFacts) Ending {
	e := Ending{Settle: f.Decision.Outcome != OutcomeRunning}
	switch {
	case f.Stopped && f.HandOver && f.Decision.Outcome != OutcomeSucceeded && f.Decision.Outcome != OutcomeFailed && f.Teardown == nil:
		// The step's pod goes with its node, not with the job: its retry
		// re-attaches. A job that already ended is torn down as usual.
		e.Action, e.ListReplicas = LeaveObjects, f.Started
		e.ReleaseLease = f.Lease == LeaseHeld || f.Lease == LeaseLost
		e.Phase, e.Reason = result.PhaseTransient, result.ReasonStepDisrupted
		e.Message = "the step's pod is being removed (" + f.Disruption + "); the job's objects are kept for the step's retry, which re-attaches to them"
		if f.Lease == LeaseSuperseded || f.Lease == LeaseNeverHeld {
			e.Message = "the step's pod is being removed (" + f.Disruption + "); another run of the job holds its lease and goes on with it"
		}
	case f.Lease == LeaseNeverHeld && f.Stopped:
		e.Action = LeaveObjects
		e.Phase, e.Reason, e.Message = result.PhaseTerminated, result.ReasonTerminated, messageNeverHeld
	case f.Lease == LeaseNeverHeld:
		e.Action = EndWithError
	case f.Err != nil && (f.Lease == LeaseHeld || f.Lease == LeaseLost) && !f.Started && !f.Stopped && f.Err.Phase != result.PhaseFailed:
		// Nothing was created: a retry of the step re-attaches to whatever
		// exists, so nothing is torn down. (A failure is not retried: what
		// an earlier run left is torn down with it, below.)
		e.Action, e.ReleaseLease = EndWithError, true
	case !f.Stopped && f.Err != nil && leavesObjects(f.Err.Reason) && (f.Lease == LeaseHeld || f.Lease == LeaseLost):
		// The API server is away, or a quota has no room: the step's retry
		// re-attaches to the replicas, and the owner reference removes
		// them if none comes.
		e.Action, e.ListReplicas, e.ReleaseLease = LeaveObjects, true, true
		e.Phase, e.Reason, e.Message = f.Err.Phase, f.Err.Reason, f.Err.Message
	case f.Lease == LeaseLost:
		e.Action = RetakeLease
	case f.Lease == LeaseNotRetaken:
		e.Action = LeaveObjects
		msg := "this run could not hold the job's lease again " + f.RetakeFailure +
			", so it deleted nothing: the objects go with their owner, or a retry of the step re-attaches to them"
		e.Phase, e.Reason, e.Message = result.PhaseTransient, result.ReasonAPIUnreachable, msg
		if f.Stopped {
			e.Phase, e.Reason, e.Message = result.PhaseTerminated, result.ReasonTerminated, "the step was stopped; "+msg
		}
	case f.Lease == LeaseSuperseded && f.Stopped:
		e.Action = LeaveObjects
		e.Phase, e.Reason, e.Message = result.PhaseTerminated, result.ReasonTerminated, messageStoppedSuperseded
	case f.Lease == LeaseSuperseded:
		e.Action = LeaveObjects
		e.Phase, e.Reason, e.Message = result.PhaseTransient, result.ReasonLeaseLost, MessageLeaseLost
	default:
		e = teardownEnding(f, e)
	}
	return e
}

// teardownEnding is the ending of a run that holds the Lease and tears
// the job down: before the teardown (TearDown), then after it (Ended).
func teardownEnding(f EndingFacts, e Ending) Ending {
	e.ListReplicas, e.DeleteAll = true, f.Stopped || f.Err != nil
	e.Phase, e.Reason, e.Message = outcomePhase(f.Decision.Outcome), f.Decision.Reason, f.Decision.Message
	wasStopped := f.Stopped && f.Decision.Outcome == OutcomeRunning
	switch {
	case wasStopped:
		e.Phase, e.Reason, e.Message = result.PhaseTerminated, result.ReasonTerminated, "the step was stopped"
	case f.Err != nil:
		e.Phase, e.Message = f.Err.Phase, f.Err.Message
		if f.Err.Reason != "" {
			e.Reason = f.Err.Reason
		}
	}
	t := f.Teardown
	if t == nil {
		e.Action = TearDown
		return e
	}
	e.Action, e.ReleaseLease = Ended, true
	switch {
	case t.LostLease:
		e.Message += "; this run lost the job's lease during the teardown and stopped deleting"
	case wasStopped && t.Err == "" && len(t.Left) == 0:
		e.Message += "; every object of the job was deleted"
	case wasStopped && t.Err == "":
		e.Message += "; its objects were deleted"
	}
	switch {
	case len(t.Left) > 0:
		e.Message += fmt.Sprintf("; %d objects were still there when the teardown ended: %s", len(t.Left), strings.Join(t.Left, ", "))
	case t.Err != "":
		e.Message += "; the teardown could not confirm that the job's objects are gone: " + t.Err
	}
	return e
}

// outcomePhase is the run's phase for the controller's outcome.
func outcomePhase(o Outcome) result.Phase {
	switch o {
	case OutcomeSucceeded:
		return result.PhaseSucceeded
	case OutcomeTransient:
		return result.PhaseTransient
	}
	return result.PhaseFailed
}

// leavesObjects reports the Transient ends that leave the job's objects in
// place for a retry of the step to re-attach to.
func leavesObjects(reason string) bool {
	return reason == result.ReasonAPIUnreachable || reason == result.ReasonQuotaExceeded
}
