package gang

import (
	"fmt"
	"math"
	"time"
)

// A gang whose pods a ResourceQuota refuses in part holds the quota those it
// created take, pods that cannot run without the rest: gated, or held by the
// scheduler or Kueue. Two such gangs can each wait for room the other holds,
// for ever. So a part held for QuotaPatience is given back, and the gang
// tries again after a randomised backoff, as a whole; the quota's own wait
// (--pending-timeout) bounds the tries. The patience lets a part whose rest
// the quota admits soon (another job ends) run without being made again:
// it is the slowest pace at which refused creates are tried again, or the
// gang's scheduling timeout when shorter. The backoff is the quota's retry
// pace, spread out.
const (
	QuotaPatience    = 10 * time.Second
	quotaBaseBackoff = time.Second
	quotaMaxBackoff  = 10 * time.Second
)

// quotaRelease is the step of a gang not all of whose pods exist: with a
// quota refusing the others and some created for QuotaPatience, release
// them; otherwise wait for the creates.
func (p Params) quotaRelease(a Admission, pods Pods, now time.Time, jitter float64) Step {
	if !pods.QuotaRefuses || pods.Existing == 0 {
		a.PartialSince = time.Time{}
		return Step{Next: a}
	}
	if a.PartialSince.IsZero() {
		a.PartialSince = now
	}
	if held := now.Sub(a.PartialSince); held < p.QuotaPatience {
		return Step{Next: a, RecheckAfter: p.QuotaPatience - held}
	}
	wait := QuotaBackoff(a.QuotaReleases+1, jitter)
	next := Admission{Attempt: a.Attempt, Stage: StageBackingOff, RetryAt: now.Add(wait), QuotaReleases: a.QuotaReleases + 1, ForQuota: true}
	return Step{Action: ActionReleaseAll, Next: next, RecheckAfter: wait, QuotaRelease: true,
		Message: fmt.Sprintf("a ResourceQuota had room for only %d of the gang's %d pods for %s; released them, trying again in %s",
			pods.Existing, pods.Desired, p.QuotaPatience, wait.Round(time.Millisecond))}
}

// QuotaBackoff is the wait after the n-th release for quota (from 1):
// a second doubling up to 10 s, scaled by a factor in [0.5, 1.5) from
// jitter so that gangs refused together do not try together again.
func QuotaBackoff(n int, jitter float64) time.Duration {
	mean := min(float64(quotaBaseBackoff)*math.Pow(2, float64(max(n-1, 0))), float64(quotaMaxBackoff))
	return time.Duration(mean * (0.5 + min(max(jitter, 0), 1)))
}
