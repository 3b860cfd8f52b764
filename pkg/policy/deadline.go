package policy

import "time"

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
