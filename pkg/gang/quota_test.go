package gang

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// A gang a quota refuses in part gives back what it created, backs off and
// tries the same attempt again, under every kind of gang: no part of a
// quota is held by pods that cannot run without the rest.
func TestNextReleasesAGangAQuotaRefusesInPart(t *testing.T) {
	t0 := time.Unix(1000, 0)
	for _, p := range []Params{
		{MinAvailable: 4, Timeout: 10 * time.Second, MaxAttempts: 3, BaseBackoff: 2 * time.Second, MaxBackoff: 10 * time.Second},
		{MinAvailable: 4, Timeout: 10 * time.Second, MaxAttempts: 1, SchedulerHolds: true},
	} {
		cases := []struct {
			name  string
			state Admission
			pods  Pods
			now   time.Time
			want  Step
		}{
			{"some created, the quota refuses the rest: release them", Start(), Pods{Desired: 4, Existing: 3, Gated: 3, QuotaRefuses: true}, t0,
				Step{Action: ActionReleaseAll, QuotaRelease: true, RecheckAfter: time.Second,
					Next:    Admission{Attempt: 1, Stage: StageBackingOff, RetryAt: t0.Add(time.Second), QuotaReleases: 1, ForQuota: true},
					Message: "a ResourceQuota has room for 3 of the gang's 4 pods; released them, trying again in 1s"}},
			{"a later release backs off longer", Admission{Attempt: 2, Stage: StageCreating, QuotaReleases: 2}, Pods{Desired: 4, Existing: 1, QuotaRefuses: true}, t0,
				Step{Action: ActionReleaseAll, QuotaRelease: true, RecheckAfter: 4 * time.Second,
					Next:    Admission{Attempt: 2, Stage: StageBackingOff, RetryAt: t0.Add(4 * time.Second), QuotaReleases: 3, ForQuota: true},
					Message: "a ResourceQuota has room for 1 of the gang's 4 pods; released them, trying again in 4s"}},
			{"none created: nothing held, the creates wait on the quota", Start(), Pods{Desired: 4, QuotaRefuses: true}, t0,
				Step{Next: Start()}},
			{"some created, no refusal: the rest is on its way", Start(), Pods{Desired: 4, Existing: 3}, t0,
				Step{Next: Start()}},
			{"after the backoff, the same attempt again", Admission{Attempt: 1, Stage: StageBackingOff, RetryAt: t0, QuotaReleases: 1, ForQuota: true}, Pods{Desired: 4}, t0,
				Step{Action: ActionRetry, Next: Admission{Attempt: 1, Stage: StageCreating, QuotaReleases: 1}}},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				if diff := cmp.Diff(tc.want, p.Next(tc.state, tc.pods, tc.now, 0.5)); diff != "" {
					t.Errorf("Next (-want +got):\n%s", diff)
				}
			})
		}
	}
}

func TestQuotaBackoffDoublesToTenSecondsSpreadByJitter(t *testing.T) {
	for _, tc := range []struct {
		n      int
		jitter float64
		want   time.Duration
	}{
		{1, 0.5, time.Second}, {2, 0.5, 2 * time.Second}, {4, 0.5, 8 * time.Second}, {5, 0.5, 10 * time.Second},
		{9, 0.5, 10 * time.Second}, {1, 0, 500 * time.Millisecond}, {5, 0.999, 14990 * time.Millisecond},
	} {
		if got := QuotaBackoff(tc.n, tc.jitter).Round(time.Millisecond); got != tc.want {
			t.Errorf("QuotaBackoff(%d, %v) = %s, want %s", tc.n, tc.jitter, got, tc.want)
		}
	}
}
