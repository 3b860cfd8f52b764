package policy

import (
	"fmt"
	"time"

	"github.com/trainstep/trainstep/pkg/result"
)

// StuckWaitingReasons are container waiting reasons that do not fix
// themselves: a replica held in one past StuckTimeout fails the job.
var StuckWaitingReasons = map[string]bool{
	"ImagePullBackOff":           true,
	"ErrImagePull":               true,
	"CreateContainerConfigError": true,
	"InvalidImageName":           true,
}

// Timeouts bounds how long a replica may be stuck before the job ends.
type Timeouts struct {
	// Stuck bounds a replica waiting in one of StuckWaitingReasons.
	Stuck time.Duration
	// Pending bounds a replica the scheduler cannot place.
	Pending time.Duration
	// NodeLost bounds how long a replica's node may stop answering before
	// the replica counts as lost to a disruption (0: never).
	NodeLost time.Duration
}

// StuckVerdict is the outcome of CheckStuck.
type StuckVerdict struct {
	// Failed: a replica stayed in a stuck waiting reason too long; Reason is that waiting reason.
	Failed bool
	// Transient: a replica stayed unschedulable too long.
	Transient bool
	Reason    string
	Message   string
	// RecheckAfter is when a replica now stuck will cross its bound (0: none stuck).
	RecheckAfter time.Duration
}

// CheckStuck finds a replica stuck past its bound, and otherwise when to look again.
func CheckStuck(v *View, t Timeouts) StuckVerdict {
	var verdict StuckVerdict
	soonest := func(d time.Duration) {
		if d > 0 && (verdict.RecheckAfter == 0 || d < verdict.RecheckAfter) {
			verdict.RecheckAfter = d
		}
	}
	for _, r := range v.Replicas {
		if StuckWaitingReasons[r.WaitingReason] && !r.WaitingSince.IsZero() {
			waited := v.Now.Sub(r.WaitingSince)
			if waited >= t.Stuck {
				return StuckVerdict{Failed: true, Reason: r.WaitingReason,
					Message: fmt.Sprintf("replica %s waited in %s for %s (limit %s)", r.ReplicaID, r.WaitingReason, waited.Round(time.Second), t.Stuck)}
			}
			soonest(t.Stuck - waited)
		}
		if t.NodeLost > 0 && !r.NodeNotReadySince.IsZero() {
			// Look again when the node counts as lost.
			soonest(t.NodeLost - v.Now.Sub(r.NodeNotReadySince))
		}
		if r.Phase == PhasePending && r.Unschedulable && !r.PendingSince.IsZero() && !waitsForCapacity(v, r) {
			waited := v.Now.Sub(r.PendingSince)
			if waited >= t.Pending {
				return StuckVerdict{Transient: true, Reason: result.ReasonPendingTimeout,
					Message: fmt.Sprintf("replica %s could not be scheduled for %s (limit %s)", r.ReplicaID, waited.Round(time.Second), t.Pending)}
			}
			soonest(t.Pending - waited)
		}
	}
	short, after := checkElasticShort(v, t.Pending)
	if short.Transient {
		return short
	}
	soonest(after)
	return verdict
}
