package result

import (
	"errors"
	"fmt"
	"testing"
)

func TestExitCodesFollowTheContract(t *testing.T) {
	cases := map[Phase]int{
		PhaseSucceeded: 0, PhaseFailed: 10, PhaseInvalid: 11, PhaseTransient: 12, PhaseTerminated: 13,
	}
	for phase, want := range cases {
		if got := phase.ExitCode(); got != want {
			t.Errorf("%s.ExitCode() = %d, want %d", phase, got, want)
		}
	}
}

func TestPhaseOfUnwrapsCarriedPhase(t *testing.T) {
	wrapped := fmt.Errorf("creating pods: %w", Transient(ReasonAPIUnreachable, errors.New("dial tcp: refused")))
	if got := PhaseOf(wrapped); got != PhaseTransient {
		t.Errorf("PhaseOf(wrapped transient) = %s, want Transient", got)
	}
	if got := PhaseOf(errors.New("boom")); got != PhaseFailed {
		t.Errorf("PhaseOf(plain error) = %s, want Failed", got)
	}
	if got := PhaseOf(nil); got != PhaseSucceeded {
		t.Errorf("PhaseOf(nil) = %s, want Succeeded", got)
	}
}
