package policy

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/trainstep/trainstep/pkg/result"
)

var (
	succeeded     = Decision{Outcome: OutcomeSucceeded, Reason: result.ReasonSucceeded, Message: "the job succeeded"}
	failed        = Decision{Outcome: OutcomeFailed, Reason: result.ReasonReplicaFailed, Message: "worker-1 exited 1"}
	transient     = Decision{Outcome: OutcomeTransient, Reason: "Unschedulable", Message: "the gang did not fit"}
	running       = Decision{Outcome: OutcomeRunning}
	errored       = Decision{} // the controller ended with an error
	apiAway       = &RunError{Phase: result.PhaseTransient, Reason: result.ReasonAPIUnreachable, Message: "API errors for 2m0s: 503"}
	quotaFull     = &RunError{Phase: result.PhaseTransient, Reason: result.ReasonQuotaExceeded, Message: "exceeded quota: q"}
	panicked      = &RunError{Phase: result.PhaseFailed, Reason: result.ReasonInternalError, Message: "internal error in a parallel write: panic: x"}
	unnamedError  = &RunError{Phase: result.PhaseFailed, Message: "watching pods: boom"}
	cleanTeardown = &TeardownReport{}
)

// TestEnd lists each ending with its exact result.
func TestEnd(t *testing.T) {
	cases := []struct {
		name  string
		facts EndingFacts
		want  Ending
	}{
		{"waiting for another run's lease, stopped: its objects are left to it",
			EndingFacts{Lease: LeaseNeverHeld, Stopped: true, Decision: running, Err: &RunError{Phase: result.PhaseFailed, Message: "context canceled"}},
			Ending{Action: LeaveObjects, Phase: result.PhaseTerminated, Reason: result.ReasonTerminated, Message: messageNeverHeld}},
		{"the lease never held: the error is the result",
			EndingFacts{Lease: LeaseNeverHeld, Decision: running, Err: apiAway},
			Ending{Action: EndWithError}},
		{"an error before anything started: the lease is given up, nothing deleted",
			EndingFacts{Lease: LeaseHeld, Decision: errored, Err: apiAway},
			Ending{Action: EndWithError, Settle: true, ReleaseLease: true}},
		{"a failure before anything started (a panic in Start): torn down, no retry comes",
			EndingFacts{Lease: LeaseHeld, Decision: errored, Err: panicked},
			Ending{Action: TearDown, Settle: true, ListReplicas: true, DeleteAll: true, Phase: result.PhaseFailed, Reason: result.ReasonInternalError, Message: panicked.Message}},
		{"API server away once started: left for the retry",
			EndingFacts{Lease: LeaseLost, Started: true, Decision: errored, Err: apiAway},
			Ending{Action: LeaveObjects, Settle: true, ListReplicas: true, ReleaseLease: true, Phase: result.PhaseTransient, Reason: result.ReasonAPIUnreachable, Message: apiAway.Message}},
		{"quota full: left for the retry",
			EndingFacts{Lease: LeaseHeld, Started: true, Decision: errored, Err: quotaFull},
			Ending{Action: LeaveObjects, Settle: true, ListReplicas: true, ReleaseLease: true, Phase: result.PhaseTransient, Reason: result.ReasonQuotaExceeded, Message: quotaFull.Message}},
		{"API server away but stopped: the lease is taken back to delete",
			EndingFacts{Lease: LeaseLost, Stopped: true, Started: true, Decision: errored, Err: apiAway},
			Ending{Action: RetakeLease, Settle: true}},
		{"lost lease, job succeeded: taken back first",
			EndingFacts{Lease: LeaseLost, Started: true, Decision: succeeded},
			Ending{Action: RetakeLease, Settle: true}},
		{"lease not taken back: nothing deleted, Transient",
			EndingFacts{Lease: LeaseNotRetaken, Started: true, Decision: succeeded, RetakeFailure: "within 10s (refused)"},
			Ending{Action: LeaveObjects, Settle: true, Phase: result.PhaseTransient, Reason: result.ReasonAPIUnreachable,
				Message: "this run could not hold the job's lease again within 10s (refused), so it deleted nothing: the objects go with their owner, or a retry of the step re-attaches to them"}},
		{"lease not taken back, stopped: nothing deleted, Terminated",
			EndingFacts{Lease: LeaseNotRetaken, Stopped: true, Started: true, Decision: running, RetakeFailure: "within 10s (refused)"},
			Ending{Action: LeaveObjects, Phase: result.PhaseTerminated, Reason: result.ReasonTerminated,
				Message: "the step was stopped; this run could not hold the job's lease again within 10s (refused), so it deleted nothing: the objects go with their owner, or a retry of the step re-attaches to them"}},
		{"superseded: nothing deleted, LeaseLost",
			EndingFacts{Lease: LeaseSuperseded, Started: true, Decision: running},
			Ending{Action: LeaveObjects, Phase: result.PhaseTransient, Reason: result.ReasonLeaseLost, Message: MessageLeaseLost}},
		{"superseded and stopped: nothing deleted, Terminated",
			EndingFacts{Lease: LeaseSuperseded, Stopped: true, Started: true, Decision: running},
			Ending{Action: LeaveObjects, Phase: result.PhaseTerminated, Reason: result.ReasonTerminated, Message: messageStoppedSuperseded}},
		{"superseded before starting: still nothing deleted",
			EndingFacts{Lease: LeaseSuperseded, Decision: running},
			Ending{Action: LeaveObjects, Phase: result.PhaseTransient, Reason: result.ReasonLeaseLost, Message: MessageLeaseLost}},
		{"succeeded: torn down per cleanPodPolicy",
			EndingFacts{Lease: LeaseHeld, Started: true, Decision: succeeded},
			Ending{Action: TearDown, Settle: true, ListReplicas: true, Phase: result.PhaseSucceeded, Reason: result.ReasonSucceeded, Message: "the job succeeded"}},
		{"succeeded, then stopped: still per cleanPodPolicy's phase but everything goes",
			EndingFacts{Lease: LeaseHeld, Stopped: true, Started: true, Decision: succeeded},
			Ending{Action: TearDown, Settle: true, ListReplicas: true, DeleteAll: true, Phase: result.PhaseSucceeded, Reason: result.ReasonSucceeded, Message: "the job succeeded"}},
		{"transient outcome: torn down",
			EndingFacts{Lease: LeaseHeld, Started: true, Decision: transient},
			Ending{Action: TearDown, Settle: true, ListReplicas: true, Phase: result.PhaseTransient, Reason: "Unschedulable", Message: "the gang did not fit"}},
		{"stopped while running: everything deleted, Terminated",
			EndingFacts{Lease: LeaseHeld, Stopped: true, Started: true, Decision: running},
			Ending{Action: TearDown, ListReplicas: true, DeleteAll: true, Phase: result.PhaseTerminated, Reason: result.ReasonTerminated, Message: "the step was stopped"}},
		{"stopped before the controller started: everything deleted",
			EndingFacts{Lease: LeaseHeld, Stopped: true, Decision: running, Err: &RunError{Phase: result.PhaseFailed, Message: "context canceled"}},
			Ending{Action: TearDown, ListReplicas: true, DeleteAll: true, Phase: result.PhaseTerminated, Reason: result.ReasonTerminated, Message: "the step was stopped"}},
		{"a panic: everything deleted, Failed InternalError",
			EndingFacts{Lease: LeaseHeld, Started: true, Decision: errored, Err: panicked},
			Ending{Action: TearDown, Settle: true, ListReplicas: true, DeleteAll: true, Phase: result.PhaseFailed, Reason: result.ReasonInternalError, Message: panicked.Message}},
		{"a panic while stopped: the error, not Terminated",
			EndingFacts{Lease: LeaseHeld, Stopped: true, Started: true, Decision: errored, Err: panicked},
			Ending{Action: TearDown, Settle: true, ListReplicas: true, DeleteAll: true, Phase: result.PhaseFailed, Reason: result.ReasonInternalError, Message: panicked.Message}},
		{"an error that names no reason keeps the decision's",
			EndingFacts{Lease: LeaseHeld, Started: true, Decision: errored, Err: unnamedError},
			Ending{Action: TearDown, Settle: true, ListReplicas: true, DeleteAll: true, Phase: result.PhaseFailed, Message: unnamedError.Message}},
		{"failed, torn down",
			EndingFacts{Lease: LeaseHeld, Started: true, Decision: failed, Teardown: cleanTeardown},
			Ending{Action: Ended, Settle: true, ListReplicas: true, ReleaseLease: true, Phase: result.PhaseFailed, Reason: result.ReasonReplicaFailed, Message: "worker-1 exited 1"}},
		{"stopped, every object deleted",
			EndingFacts{Lease: LeaseHeld, Stopped: true, Started: true, Decision: running, Teardown: cleanTeardown},
			Ending{Action: Ended, ListReplicas: true, DeleteAll: true, ReleaseLease: true, Phase: result.PhaseTerminated, Reason: result.ReasonTerminated,
				Message: "the step was stopped; every object of the job was deleted"}},
		{"stopped, the lease lost during the teardown",
			EndingFacts{Lease: LeaseHeld, Stopped: true, Started: true, Decision: running, Teardown: &TeardownReport{LostLease: true, Left: []string{"pod/a"}}},
			Ending{Action: Ended, ListReplicas: true, DeleteAll: true, ReleaseLease: true, Phase: result.PhaseTerminated, Reason: result.ReasonTerminated,
				Message: "the step was stopped; this run lost the job's lease during the teardown and stopped deleting; 1 objects were still there when the teardown ended: pod/a"}},
		{"stopped, objects left",
			EndingFacts{Lease: LeaseHeld, Stopped: true, Started: true, Decision: running, Teardown: &TeardownReport{Left: []string{"pod/a", "service/b"}}},
			Ending{Action: Ended, ListReplicas: true, DeleteAll: true, ReleaseLease: true, Phase: result.PhaseTerminated, Reason: result.ReasonTerminated,
				Message: "the step was stopped; its objects were deleted; 2 objects were still there when the teardown ended: pod/a, service/b"}},
		{"succeeded, the teardown could not confirm",
			EndingFacts{Lease: LeaseHeld, Started: true, Decision: succeeded, Teardown: &TeardownReport{Err: "listing pods: 503"}},
			Ending{Action: Ended, Settle: true, ListReplicas: true, ReleaseLease: true, Phase: result.PhaseSucceeded, Reason: result.ReasonSucceeded,
				Message: "the job succeeded; the teardown could not confirm that the job's objects are gone: listing pods: 503"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, End(tc.facts)); diff != "" {
				t.Errorf("End(%+v) (-want +got):\n%s", tc.facts, diff)
			}
		})
	}
}

// everyEndingFacts is every combination of End's inputs that a run can
// produce: the controller stops with an outcome and no error, or with an
// error and no outcome (Running when it never ran a sync).
func everyEndingFacts() []EndingFacts {
	var all []EndingFacts
	leases := []LeaseState{LeaseHeld, LeaseLost, LeaseSuperseded, LeaseNotRetaken, LeaseNeverHeld}
	decisions := []Decision{running, succeeded, failed, transient, errored}
	errs := []*RunError{nil, apiAway, quotaFull, panicked, unnamedError}
	teardowns := []*TeardownReport{nil, cleanTeardown, {LostLease: true}, {Left: []string{"pod/a"}}, {Err: "503"}}
	for _, lease := range leases {
		for _, signal := range []string{"", "stop", "disruption"} {
			for _, started := range []bool{false, true} {
				for _, d := range decisions {
					for _, err := range errs {
						possible := err == nil && d.Outcome != "" || err != nil && (d.Outcome == "" || d.Outcome == OutcomeRunning)
						if !possible {
							continue
						}
						for _, td := range teardowns {
							f := EndingFacts{Lease: lease, Stopped: signal != "", Started: started, Decision: d, Err: err,
								RetakeFailure: "within 10s (refused)", Teardown: td}
							if signal == "disruption" {
								f.HandOver, f.Disruption = true, "EvictionByEvictionAPI: Eviction API: evicting"
							}
							all = append(all, f)
						}
					}
				}
			}
		}
	}
	return all
}

// TestEndHoldsItsRulesInEveryCombination checks, over every combination
// of the inputs, the rules docs/failures.md states about a run's end.
func TestEndHoldsItsRulesInEveryCombination(t *testing.T) {
	all := everyEndingFacts()
	// 5 lease states, no signal, a stop or the step pod's disruption,
	// started or not, 12 pairs of a decision and an error, 5 teardown
	// reports.
	if len(all) != 5*3*2*12*5 {
		t.Fatalf("%d combinations, want %d", len(all), 5*3*2*12*5)
	}
	for _, f := range all {
		e := End(f)
		name := fmt.Sprintf("%+v (teardown %+v, err %+v)", f, f.Teardown, f.Err)
		deletes := e.Action == TearDown || e.Action == Ended
		switch {
		case deletes && f.Lease != LeaseHeld:
			t.Errorf("%s: tears down without holding the lease: %+v", name, e)
		case e.Action == RetakeLease && f.Lease != LeaseLost:
			t.Errorf("%s: takes back a lease that is not lost: %+v", name, e)
		case e.Action == Ended && f.Teardown == nil, e.Action == TearDown && f.Teardown != nil:
			t.Errorf("%s: %s does not follow the teardown's report", name, e.Action)
		case e.ReleaseLease && (f.Lease == LeaseSuperseded || f.Lease == LeaseNeverHeld || f.Lease == LeaseNotRetaken):
			t.Errorf("%s: gives up a lease this run does not hold: %+v", name, e)
		case e.DeleteAll && !deletes:
			t.Errorf("%s: DeleteAll without a teardown: %+v", name, e)
		case deletes && (f.Stopped || f.Err != nil) && !e.DeleteAll:
			t.Errorf("%s: a stopped or failed run keeps objects by cleanPodPolicy: %+v", name, e)
		case deletes && !f.Stopped && f.Err == nil && e.DeleteAll:
			t.Errorf("%s: an outcome deletes everything, not per cleanPodPolicy: %+v", name, e)
		case e.Settle != (f.Decision.Outcome != OutcomeRunning):
			t.Errorf("%s: Settle %v for outcome %q", name, e.Settle, f.Decision.Outcome)
		case e.Action == Ended && !e.ReleaseLease:
			t.Errorf("%s: keeps the lease after its teardown", name)
		}
		final := e.Action == LeaveObjects || e.Action == Ended
		// A controller that stops with neither an outcome nor an error, the
		// step not stopped, saw its caller's context end: that run says no
		// more than Failed, as before.
		cancelledByCaller := f.Decision.Outcome == OutcomeRunning && f.Err == nil && !f.Stopped
		if final && (e.Phase == "" || e.Message == "" && !cancelledByCaller) {
			t.Errorf("%s: a final ending without a phase or message: %+v", name, e)
		}
		if final && f.Stopped && !f.HandOver && f.Decision.Outcome == OutcomeRunning && e.Phase != result.PhaseTerminated {
			t.Errorf("%s: stopped while the job ran, but phase %s", name, e.Phase)
		}
		// The step pod's own disruption hands a job that has not ended
		// over to the retry: nothing is deleted, and the phase is one Argo
		// retries.
		jobEnded := f.Decision.Outcome == OutcomeSucceeded || f.Decision.Outcome == OutcomeFailed
		if f.HandOver && !jobEnded && f.Teardown == nil && (deletes || e.Action != LeaveObjects || e.Phase != result.PhaseTransient || e.Reason != result.ReasonStepDisrupted) {
			t.Errorf("%s: the step pod's disruption does not hand the job over: %+v", name, e)
		}
		if f.HandOver && jobEnded && f.Lease == LeaseHeld && f.Teardown == nil && e.Action != TearDown {
			t.Errorf("%s: a job that ended before the disruption is not torn down: %+v", name, e)
		}
		if e.Action == EndWithError && (f.Err == nil && f.Lease != LeaseNeverHeld || e.Phase != "") {
			t.Errorf("%s: ends with an error it does not have: %+v", name, e)
		}
		if !final && (e.Phase != "" && e.Action != TearDown) {
			t.Errorf("%s: %s sets a result: %+v", name, e.Action, e)
		}
	}
}

// TestEndReachesAResultInEveryCombination drives End as the executor
// does — taking the lease back (each way it can go) and tearing down (each
// report) — and checks that every run reaches a result within three steps.
func TestEndReachesAResultInEveryCombination(t *testing.T) {
	retakes := []LeaseState{LeaseHeld, LeaseSuperseded, LeaseNotRetaken}
	reports := []*TeardownReport{cleanTeardown, {LostLease: true}, {Left: []string{"pod/a"}}}
	for i, start := range everyEndingFacts() {
		if start.Teardown != nil || start.Lease == LeaseNotRetaken {
			continue // End sees these only after it asked for them
		}
		for _, retake := range retakes {
			f := start
			report := reports[i%len(reports)]
			var actions []EndingAction
			for step := 0; ; step++ {
				if step == 3 {
					t.Fatalf("%+v: no result after %v", start, actions)
				}
				e := End(f)
				actions = append(actions, e.Action)
				if e.Action == RetakeLease {
					f.Lease = retake
					continue
				}
				if e.Action == TearDown {
					f.Teardown = report
					continue
				}
				break
			}
		}
	}
}
