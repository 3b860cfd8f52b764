package policy

import (
	"testing"
	"time"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/result"
)

func elasticWith(replicas, lo, hi int32) *v1alpha1.TrainJob {
	job := jobWith(v1alpha1.FrameworkPyTorch, v1alpha1.RestartPolicyExitCode, map[v1alpha1.ReplicaType]int32{v1alpha1.ReplicaTypeWorker: replicas})
	job.Spec.ElasticPolicy = &v1alpha1.ElasticPolicy{MinReplicas: ptr(lo), MaxReplicas: ptr(hi), GrowIntoCapacity: ptr(true)}
	return job
}

func waitingForCapacity(since time.Time) func(*Replica) {
	return func(r *Replica) { r.Phase, r.Unschedulable, r.PendingSince = PhasePending, true, since }
}

func TestElasticJobHasAWorkerForEverySlotUpToMaxReplicas(t *testing.T) {
	if got := len(Desired(elasticWith(2, 2, 8))); got != 8 {
		t.Errorf("desired workers = %d, want maxReplicas 8", got)
	}
}

// Workers waiting for capacity are not stuck while minReplicas run: the
// pending timeout bounds only the time the job runs short of minReplicas,
// counted from when it fell short, not from when the workers were created.
func TestElasticPendingTimeoutBoundsTheTimeShortOfMinReplicas(t *testing.T) {
	pending := 5 * time.Minute
	longAgo := t0.Add(-time.Hour)
	for _, tc := range []struct {
		name       string
		view       *View
		shortSince time.Time
		transient  bool
	}{
		{name: "min running, the rest waiting for an hour",
			view: viewOf(elasticWith(4, 2, 4), set(v1alpha1.ReplicaTypeWorker, 2, waitingForCapacity(longAgo)), set(v1alpha1.ReplicaTypeWorker, 3, waitingForCapacity(longAgo)))},
		{name: "short for less than the timeout",
			view:       viewOf(elasticWith(3, 2, 3), set(v1alpha1.ReplicaTypeWorker, 1, waitingForCapacity(longAgo)), set(v1alpha1.ReplicaTypeWorker, 2, waitingForCapacity(longAgo))),
			shortSince: t0.Add(time.Minute - pending + time.Second)},
		{name: "short for the timeout",
			view:       viewOf(elasticWith(3, 2, 3), set(v1alpha1.ReplicaTypeWorker, 1, waitingForCapacity(longAgo)), set(v1alpha1.ReplicaTypeWorker, 2, waitingForCapacity(longAgo))),
			shortSince: t0.Add(time.Minute - pending), transient: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.view.ElasticShortSince = tc.shortSince
			got := CheckStuck(tc.view, Timeouts{Stuck: time.Hour, Pending: pending})
			if got.Transient != tc.transient {
				t.Fatalf("verdict %+v, want transient %v", got, tc.transient)
			}
			if tc.transient && got.Reason != result.ReasonPendingTimeout {
				t.Errorf("reason %q, want %s", got.Reason, result.ReasonPendingTimeout)
			}
			if !tc.transient && !tc.shortSince.IsZero() && got.RecheckAfter != time.Second {
				t.Errorf("recheck after %s, want 1s: when the job would cross the bound", got.RecheckAfter)
			}
		})
	}
}

func TestElasticShortSinceStartsStaysAndResets(t *testing.T) {
	job := elasticWith(3, 2, 3)
	short := viewOf(job, set(v1alpha1.ReplicaTypeWorker, 1, waitingForCapacity(t0)), set(v1alpha1.ReplicaTypeWorker, 2, waitingForCapacity(t0)))
	since := ElasticShortSince(time.Time{}, short)
	if !since.Equal(short.Now) {
		t.Fatalf("since = %v, want now (%v) when the job just fell short", since, short.Now)
	}
	later := *short
	later.Now = short.Now.Add(time.Minute)
	if got := ElasticShortSince(since, &later); !got.Equal(since) {
		t.Errorf("since = %v, want %v kept while still short", got, since)
	}
	enough := viewOf(job, set(v1alpha1.ReplicaTypeWorker, 2, waitingForCapacity(t0)))
	if got := ElasticShortSince(since, enough); !got.IsZero() {
		t.Errorf("since = %v, want zero once minReplicas run", got)
	}
	// Short but nothing waits for capacity (e.g. images being pulled): the
	// pending timeout is not the bound that applies.
	starting := viewOf(job, set(v1alpha1.ReplicaTypeWorker, 1, func(r *Replica) { r.Phase = PhasePending }), set(v1alpha1.ReplicaTypeWorker, 2, func(r *Replica) { r.Phase = PhasePending }))
	if got := ElasticShortSince(time.Time{}, starting); !got.IsZero() {
		t.Errorf("since = %v, want zero when no worker waits for capacity", got)
	}
}

// A slot at or above the metrics' worker target gets no pod: it is not a
// worker on its way, and a failure the job could only survive with it is
// not tolerated (the job would wait for ever for a worker never created).
func TestElasticLossIsNotToleratedOnSlotsAboveTheWorkerTarget(t *testing.T) {
	missing := func(r *Replica) { r.Phase = PhaseMissing }
	for _, tc := range []struct {
		name      string
		target    int
		tolerated bool
	}{
		{name: "no metrics: the missing slots are on their way", target: 0, tolerated: true},
		{name: "target 4: slots 2 and 3 are on their way", target: 4, tolerated: true},
		{name: "target 2: slots 2 and 3 get no pod", target: 2, tolerated: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := viewOf(elasticWith(2, 2, 4), set(v1alpha1.ReplicaTypeWorker, 1, exited(1)),
				set(v1alpha1.ReplicaTypeWorker, 2, missing), set(v1alpha1.ReplicaTypeWorker, 3, missing))
			v.WorkerTarget = tc.target
			failed := *v.Replica(ReplicaID{Type: v1alpha1.ReplicaTypeWorker, Index: 1})
			if got := ToleratesLoss(v, failed); got != tc.tolerated {
				t.Errorf("ToleratesLoss = %v, want %v", got, tc.tolerated)
			}
		})
	}
}

// A scale-down removes workers above the metrics' target only while more
// workers live than the target: a worker below it that failed for good
// leaves its place to a live one above, pending workers go before running
// ones, and a slot that is not alive (failed, being removed) always goes.
func TestSurplusWorkersKeepTheTargetsCountOfLiveWorkers(t *testing.T) {
	worker := func(i int) ReplicaID { return ReplicaID{Type: v1alpha1.ReplicaTypeWorker, Index: i} }
	missing := func(r *Replica) { r.Phase = PhaseMissing }
	for _, tc := range []struct {
		name   string
		view   *View
		target int
		want   []ReplicaID
	}{
		{name: "no metrics: nothing is surplus", view: viewOf(elasticWith(4, 2, 4)), target: 0},
		{name: "all live: the highest slots go", view: viewOf(elasticWith(4, 2, 4)), target: 2, want: []ReplicaID{worker(3), worker(2)}},
		{name: "worker 0 failed for good: worker 2 takes its place",
			view:   viewOf(elasticWith(3, 2, 4), set(v1alpha1.ReplicaTypeWorker, 0, exited(3)), set(v1alpha1.ReplicaTypeWorker, 3, missing)),
			target: 2, want: []ReplicaID{worker(3)}},
		{name: "a failed worker above the target goes, a live one stays",
			view:   viewOf(elasticWith(4, 2, 4), set(v1alpha1.ReplicaTypeWorker, 1, exited(3)), set(v1alpha1.ReplicaTypeWorker, 3, exited(1))),
			target: 2, want: []ReplicaID{worker(3)}},
		{name: "a pending worker goes before a running one in a higher slot",
			view:   viewOf(elasticWith(5, 2, 5), set(v1alpha1.ReplicaTypeWorker, 1, exited(3)), set(v1alpha1.ReplicaTypeWorker, 3, waitingForCapacity(t0))),
			target: 3, want: []ReplicaID{worker(3)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.view.WorkerTarget = tc.target
			got := SurplusWorkers(tc.view)
			if len(got) != len(tc.want) {
				t.Fatalf("surplus %v, want %v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Fatalf("surplus %v, want %v", got, tc.want)
				}
			}
		})
	}
}
