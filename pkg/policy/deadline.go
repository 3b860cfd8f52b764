package policy

import (
	"fmt"
	"time"

	"github.com/trainstep/trainstep/pkg/result"
)

// DeadlineLeft returns how long the job may still run under
// activeDeadlineSeconds, and whether a deadline is set at all. A negative
// or zero duration means the deadline has passed.
func DeadlineLeft(v *View) (time.Duration, bool) {
	ads := v.Job.Spec.RunPolicy.ActiveDeadlineSeconds
	if ads == nil || v.StartTime.IsZero() {
		return 0, false
	}
	return v.StartTime.Add(time.Duration(*ads) * time.Second).Sub(v.Now), true
}

// DeadlineExceeded is the decision to fail a job whose activeDeadlineSeconds
// passed; ok is false while it has not (or none is set). It holds whatever
// the job is doing, a whole-job restart under way included.
func DeadlineExceeded(v *View) (d Decision, ok bool) {
	left, has := DeadlineLeft(v)
	if !has || left > 0 {
		return Decision{}, false
	}
	return Decision{Outcome: OutcomeFailed, Reason: result.ReasonDeadlineExceeded,
		Message: fmt.Sprintf("the job ran longer than activeDeadlineSeconds=%d", *v.Job.Spec.RunPolicy.ActiveDeadlineSeconds)}, true
}
