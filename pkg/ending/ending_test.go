package ending

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/trainstep/trainstep/pkg/policy"
	"github.com/trainstep/trainstep/pkg/result"
)

// fakeStep records what CarryOut asked of it.
type fakeStep struct {
	stopped    bool
	handOver   bool
	disruption string
	lease      policy.LeaseState
	retake     policy.LeaseState
	calls      []string
}

func (f *fakeStep) Stopped() bool            { return f.stopped }
func (f *fakeStep) HandOver() (bool, string) { return f.handOver, f.disruption }
func (f *fakeStep) Lease() policy.LeaseState { return f.lease }
func (f *fakeStep) Settle()                  { f.calls = append(f.calls, "settle") }
func (f *fakeStep) Begin()                   { f.calls = append(f.calls, "begin") }
func (f *fakeStep) RetakeLease() (policy.LeaseState, string) {
	f.calls = append(f.calls, "retake")
	return f.retake, "within 10s (refused)"
}
func (f *fakeStep) TearDown(deleteAll bool) *policy.TeardownReport {
	f.calls = append(f.calls, fmt.Sprintf("teardown all=%v", deleteAll))
	return &policy.TeardownReport{}
}
func (f *fakeStep) View() policy.View { return policy.View{Restarts: 2} }

func TestCarryOut(t *testing.T) {
	apiAway := result.Transient(result.ReasonAPIUnreachable, errors.New("API errors for 2m0s"))
	succeeded := policy.Decision{Outcome: policy.OutcomeSucceeded, Reason: result.ReasonSucceeded, Message: "done"}
	running := policy.Decision{Outcome: policy.OutcomeRunning}
	cases := []struct {
		name          string
		step          fakeStep
		run           Run
		action        policy.EndingAction
		phase         result.Phase
		reason        string
		calls         []string
		listsReplicas bool
	}{
		{"an error before the controller started: the error is the result", fakeStep{lease: policy.LeaseHeld},
			Run{Decision: running, Err: apiAway}, policy.EndWithError, result.PhaseTransient, result.ReasonAPIUnreachable, nil, false},
		{"a plain error before the controller started: Failed, torn down", fakeStep{lease: policy.LeaseHeld},
			Run{Decision: running, Err: errors.New("boom")}, policy.Ended, result.PhaseFailed, "", []string{"begin", "teardown all=true"}, true},
		{"the API server away: left for the retry", fakeStep{lease: policy.LeaseLost},
			Run{Started: true, Decision: running, Err: apiAway}, policy.LeaveObjects, result.PhaseTransient, result.ReasonAPIUnreachable, []string{"begin"}, true},
		{"succeeded with the lease lost: taken back, then torn down", fakeStep{lease: policy.LeaseLost, retake: policy.LeaseHeld},
			Run{Started: true, Decision: succeeded}, policy.Ended, result.PhaseSucceeded, result.ReasonSucceeded, []string{"settle", "begin", "retake", "teardown all=false"}, true},
		{"stopped: everything deleted", fakeStep{lease: policy.LeaseHeld, stopped: true},
			Run{Started: true, Decision: running}, policy.Ended, result.PhaseTerminated, result.ReasonTerminated, []string{"begin", "teardown all=true"}, true},
		{"superseded: nothing deleted", fakeStep{lease: policy.LeaseHeld},
			Run{Started: true, Superseded: true, Decision: running}, policy.LeaveObjects, result.PhaseTransient, result.ReasonLeaseLost, []string{"begin"}, true},
		{"the step's own node drained: handed over, nothing deleted", fakeStep{lease: policy.LeaseHeld, stopped: true, handOver: true, disruption: "its node is drained"},
			Run{Started: true, Decision: running}, policy.LeaveObjects, result.PhaseTransient, result.ReasonStepDisrupted, []string{"begin"}, true},
		{"the step's own node drained after the job succeeded: torn down", fakeStep{lease: policy.LeaseHeld, stopped: true, handOver: true, disruption: "its node is drained"},
			Run{Started: true, Decision: succeeded}, policy.Ended, result.PhaseSucceeded, result.ReasonSucceeded, []string{"settle", "begin", "teardown all=true"}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			step := tc.step
			out := CarryOut(&step, tc.run)
			reason := tc.reason
			e := out.Ending
			if e.Action != tc.action || e.Phase != tc.phase || e.Reason != reason || !slices.Equal(step.calls, tc.calls) {
				t.Errorf("ended %s %s/%s after %v, want %s %s/%s after %v", e.Action, e.Phase, e.Reason, step.calls, tc.action, tc.phase, reason, tc.calls)
			}
			if tc.listsReplicas != (out.View.Restarts == 2) {
				t.Errorf("view %+v; want the controller's view: %v", out.View, tc.listsReplicas)
			}
		})
	}
}
