// Package ending carries out how a step's run ends once its controller
// stopped, as policy.End decides it: it asks, does what the answer says
// through a Step (take the Lease back, tear down), and asks again until the
// run has its result. The executor's Step acts on the cluster; the
// controller's simulation has one of its own, so both run this same
// script. It decides nothing itself, and it knows no API client.
package ending

import (
	"errors"

	"github.com/trainstep/trainstep/pkg/policy"
	"github.com/trainstep/trainstep/pkg/result"
)

// Step is what ending a run does to the world.
type Step interface {
	// Stopped reports whether the step was signalled.
	Stopped() bool
	// HandOver reports whether the signal came because the step's own pod
	// is being removed by the infrastructure, and how (the disruption):
	// the job is then its retry's to go on with.
	HandOver() (bool, string)
	// Lease is where this run stands with the job's Lease now: Held, or
	// Lost when it could not renew it.
	Lease() policy.LeaseState
	// Settle says the job's outcome is known: a signal from now on only
	// hurries the teardown.
	Settle()
	// Begin is called once, before the job's objects are dealt with (left,
	// or torn down), when the run does not end with its error.
	Begin()
	// RetakeLease tries to hold the Lease again before a teardown: Held,
	// Superseded, or NotRetaken with why.
	RetakeLease() (policy.LeaseState, string)
	// TearDown deletes the job's objects (all of them with deleteAll),
	// fenced by the Lease, and reports what it did.
	TearDown(deleteAll bool) *policy.TeardownReport
	// View is the controller's view of the job: after a teardown, the one
	// its deletions were planned from.
	View() policy.View
}

// Run is how the controller stopped.
type Run struct {
	// Started: the controller's Start completed.
	Started bool
	// Superseded: another run of the job took its Lease over.
	Superseded bool
	// Decision is the controller's last decision (Outcome Running when it
	// went on, or never decided).
	Decision policy.Decision
	// Err is the error the run ended with, nil when none.
	Err error
}

// Result is how the run ended: Ending is EndWithError, LeaveObjects or
// Ended. With EndWithError, the run's error is its result (Phase, Reason
// and Message say it as ErrorResult does); View is the job as the run left
// it when the ending lists the replicas.
type Result struct {
	Ending policy.Ending
	View   policy.View
}

// CarryOut ends a run: policy.End, then whatever it says, until the run has
// its result.
func CarryOut(step Step, run Run) Result {
	lease := policy.LeaseSuperseded
	if !run.Superseded {
		lease = step.Lease()
	}
	facts := policy.EndingFacts{Lease: lease, Stopped: step.Stopped(), Started: run.Started, Decision: run.Decision, Err: RunError(run.Err)}
	facts.HandOver, facts.Disruption = step.HandOver()
	e := policy.End(facts)
	if e.Settle {
		step.Settle()
	}
	if e.Action == policy.EndWithError {
		e.Phase, e.Reason, e.Message = ErrorResult(run.Err)
		return Result{Ending: e}
	}
	step.Begin()
	if facts.Lease != policy.LeaseSuperseded {
		facts.Lease = step.Lease()
	}
	var view policy.View
	for {
		if facts.Teardown == nil {
			facts.Stopped = step.Stopped()
			facts.HandOver, facts.Disruption = step.HandOver()
		}
		e = policy.End(facts)
		switch e.Action {
		case policy.RetakeLease:
			facts.Lease, facts.RetakeFailure = step.RetakeLease()
			continue
		case policy.TearDown:
			facts.Teardown = step.TearDown(e.DeleteAll)
			view = step.View()
			continue
		case policy.LeaveObjects:
			view = step.View()
		}
		return Result{Ending: e, View: view}
	}
}

// RunError is err as policy.End reads it (nil for none).
func RunError(err error) *policy.RunError {
	if err == nil {
		return nil
	}
	e := &policy.RunError{Phase: result.PhaseOf(err), Message: err.Error()}
	var re *result.Error
	if errors.As(err, &re) {
		e.Reason = re.Reason
	}
	return e
}

// ErrorResult is the phase, reason and message of a run that ended with
// err: a result.Error's own, else Failed; the reason is the phase's name
// when the error names none.
func ErrorResult(err error) (result.Phase, string, string) {
	if err == nil {
		return "", "", ""
	}
	phase, reason := result.PhaseOf(err), ""
	var re *result.Error
	if errors.As(err, &re) {
		reason = re.Reason
	}
	if reason == "" {
		reason = string(phase)
	}
	return phase, reason, err.Error()
}
