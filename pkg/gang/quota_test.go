package gang

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/utils/ptr"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
)

// A gang a quota refuses in part for QuotaPatience gives back what it
// created, backs off and tries the same attempt again, under every kind of
// gang: no part of a quota is held long by pods that cannot run without the
// rest.
func TestNextReleasesAGangAQuotaRefusesInPart(t *testing.T) {
	t0 := time.Unix(1000, 0)
	held := t0.Add(-QuotaPatience)
	for _, p := range []Params{
		{MinAvailable: 4, Timeout: 10 * time.Second, MaxAttempts: 3, BaseBackoff: 2 * time.Second, MaxBackoff: 10 * time.Second, QuotaPatience: QuotaPatience},
		{MinAvailable: 4, Timeout: 10 * time.Second, MaxAttempts: 1, SchedulerHolds: true, QuotaPatience: QuotaPatience},
	} {
		cases := []struct {
			name  string
			state Admission
			pods  Pods
			now   time.Time
			want  Step
		}{
			{"some created, the quota refuses the rest: hold them a while", Start(), Pods{Desired: 4, Existing: 3, Gated: 3, QuotaRefuses: true}, t0,
				Step{Next: Admission{Attempt: 1, Stage: StageCreating, PartialSince: t0}, RecheckAfter: QuotaPatience}},
			{"still refused, within the patience: look again when it ends", Admission{Attempt: 1, Stage: StageCreating, PartialSince: t0}, Pods{Desired: 4, Existing: 3, QuotaRefuses: true}, t0.Add(4 * time.Second),
				Step{Next: Admission{Attempt: 1, Stage: StageCreating, PartialSince: t0}, RecheckAfter: QuotaPatience - 4*time.Second}},
			{"refused for the patience: release them", Admission{Attempt: 1, Stage: StageCreating, PartialSince: held}, Pods{Desired: 4, Existing: 3, Gated: 3, QuotaRefuses: true}, t0,
				Step{Action: ActionReleaseAll, QuotaRelease: true, RecheckAfter: time.Second,
					Next:    Admission{Attempt: 1, Stage: StageBackingOff, RetryAt: t0.Add(time.Second), QuotaReleases: 1, ForQuota: true},
					Message: "a ResourceQuota had room for only 3 of the gang's 4 pods for 10s; released them, trying again in 1s"}},
			{"a later release backs off longer", Admission{Attempt: 2, Stage: StageCreating, QuotaReleases: 2, PartialSince: held}, Pods{Desired: 4, Existing: 1, QuotaRefuses: true}, t0,
				Step{Action: ActionReleaseAll, QuotaRelease: true, RecheckAfter: 4 * time.Second,
					Next:    Admission{Attempt: 2, Stage: StageBackingOff, RetryAt: t0.Add(4 * time.Second), QuotaReleases: 3, ForQuota: true},
					Message: "a ResourceQuota had room for only 1 of the gang's 4 pods for 10s; released them, trying again in 4s"}},
			{"none created: nothing held, the creates wait on the quota", Start(), Pods{Desired: 4, QuotaRefuses: true}, t0,
				Step{Next: Start()}},
			{"the quota admits the rest: the patience starts over", Admission{Attempt: 1, Stage: StageCreating, PartialSince: held}, Pods{Desired: 4, Existing: 3}, t0,
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

func TestQuotaPatienceIsAtMostTheSchedulingTimeout(t *testing.T) {
	if p := ParamsFor(testJob(&v1alpha1.SchedulingPolicy{Gang: v1alpha1.GangBuiltin})); p.QuotaPatience != QuotaPatience {
		t.Errorf("default: patience %s, want %s", p.QuotaPatience, QuotaPatience)
	}
	if p := ParamsFor(testJob(&v1alpha1.SchedulingPolicy{Gang: v1alpha1.GangKueue, Queue: "q", ScheduleTimeoutSeconds: ptr.To[int32](3)})); p.QuotaPatience != 3*time.Second {
		t.Errorf("a 3 s scheduling timeout: patience %s, want 3s", p.QuotaPatience)
	}
}
