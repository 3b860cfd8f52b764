package policy

import (
	"fmt"
	"slices"
	"time"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/frameworks"
	"github.com/trainstep/trainstep/pkg/result"
)

// An elastic PyTorch job has a worker for every slot it has
// (frameworks.Replicas: up to maxReplicas when it grows into capacity). It counts as started once minReplicas workers
// run; the others wait for capacity and join torchrun's rendezvous when
// they are placed. A worker waiting for capacity is not stuck: only the job
// running fewer than minReplicas workers for longer than the pending
// timeout ends it (Transient, so a retry of the step tries later).

// ToleratesLoss reports whether an elastic PyTorch job keeps running after
// replica r failed permanently: r is a worker and at least minReplicas
// other workers are alive or on their way (workerAlive).
func ToleratesLoss(v *View, r Replica) bool {
	e, ok := frameworks.Elastic(v.Job)
	if !ok || r.Type != e.Type {
		return false
	}
	alive := int32(0)
	for _, w := range v.OfType(e.Type) {
		if w.ReplicaID != r.ReplicaID && workerAlive(v, w) {
			alive++
		}
	}
	return alive >= e.Min
}

// workerAlive reports whether worker w counts among an elastic job's
// workers: alive (pending, running or succeeded) or on its way (missing:
// being created or replaced, as a worker lost to a node is; or failed in a
// way that is retried, as a preempted one seen before it goes), but not on
// its way in a slot at or above the metrics' worker target, which gets no
// pod.
func workerAlive(v *View, w Replica) bool {
	above := v.WorkerTarget > 0 && w.Index >= v.WorkerTarget
	switch w.Phase {
	case PhasePending, PhaseRunning, PhaseSucceeded:
		return true
	case PhaseMissing:
		return !above
	case PhaseFailed:
		return !above && replacedAfterFailure(v, w)
	}
	return false
}

// SurplusWorkers lists the workers in slots at or above the metrics'
// worker target that a scale-down removes: those not alive, then live
// ones, pending before running and the highest slot first, only while more
// workers live than the target asks for. A worker below the target that
// failed for good leaves its place to a live one above it, so a scale-down
// never takes the job below the target (the HPA's count of live workers),
// nor below minReplicas.
func SurplusWorkers(v *View) []ReplicaID {
	if v.WorkerTarget <= 0 {
		return nil
	}
	workers := v.OfType(v1alpha1.ReplicaTypeWorker)
	alive := 0
	var surplus, pending, running []ReplicaID
	for i := len(workers) - 1; i >= 0; i-- {
		w := workers[i]
		live := workerAlive(v, w)
		if live {
			alive++
		}
		switch {
		case w.Index < v.WorkerTarget:
		case !live:
			surplus = append(surplus, w.ReplicaID)
		case w.Phase == PhasePending:
			pending = append(pending, w.ReplicaID)
		default:
			running = append(running, w.ReplicaID)
		}
	}
	for _, id := range slices.Concat(pending, running) {
		if alive <= v.WorkerTarget {
			break
		}
		surplus = append(surplus, id)
		alive--
	}
	return surplus
}

// Elastic counts an elastic job's workers at one moment.
type Elastic struct {
	// Min and Max are the bounds of elasticPolicy.
	Min, Max int
	// Running counts the workers that run or finished: the nodes of
	// torchrun's rendezvous.
	Running int
	// WaitingForCapacity counts the workers the scheduler cannot place yet.
	WaitingForCapacity int
}

// ElasticOf counts the workers of an elastic job; ok is false for other jobs.
func ElasticOf(v *View) (e Elastic, ok bool) {
	bounds, ok := frameworks.Elastic(v.Job)
	if !ok {
		return Elastic{}, false
	}
	e = Elastic{Min: int(bounds.Min), Max: int(bounds.Max)}
	for _, w := range v.OfType(bounds.Type) {
		switch {
		case w.Phase == PhaseRunning || w.Phase == PhaseSucceeded:
			e.Running++
		case w.Phase == PhasePending && w.Unschedulable:
			e.WaitingForCapacity++
		}
	}
	return e, true
}

// Short reports whether fewer than Min workers run while some wait for
// capacity: the job cannot start, or carry on, until room appears.
func (e Elastic) Short() bool { return e.Running < e.Min && e.WaitingForCapacity > 0 }

// ElasticShortSince carries View.ElasticShortSince from the last view to
// v: since stays while the job is still short, starts now when it just
// became short, and is zero when it is not short.
func ElasticShortSince(since time.Time, v *View) time.Time {
	e, ok := ElasticOf(v)
	switch {
	case !ok || !e.Short():
		return time.Time{}
	case since.IsZero():
		return v.Now
	}
	return since
}

// waitsForCapacity reports whether r is an elastic worker the scheduler
// cannot place: its wait is bounded by the job's elastic minimum, not by the
// pending timeout of a replica.
func waitsForCapacity(v *View, r Replica) bool {
	e, ok := frameworks.Elastic(v.Job)
	return ok && r.Type == e.Type
}

// checkElasticShort ends an elastic job that ran fewer than minReplicas
// workers for longer than the pending timeout, and otherwise says when it
// would (0: it is not short).
func checkElasticShort(v *View, pending time.Duration) (StuckVerdict, time.Duration) {
	if v.ElasticShortSince.IsZero() {
		return StuckVerdict{}, 0
	}
	e, _ := ElasticOf(v)
	waited := v.Now.Sub(v.ElasticShortSince)
	if waited < pending {
		return StuckVerdict{}, pending - waited
	}
	return StuckVerdict{Transient: true, Reason: result.ReasonPendingTimeout,
		Message: fmt.Sprintf("only %d of the %d workers elasticPolicy.minReplicas asks for ran for %s (limit %s); %d wait for capacity",
			e.Running, e.Min, waited.Round(time.Second), pending, e.WaitingForCapacity)}, 0
}

// replacedAfterFailure reports whether failed worker w gets a new instance:
// its pod was disrupted (the default rule ignores that) or its restart
// policy retries its exit.
func replacedAfterFailure(v *View, w Replica) bool {
	if slices.Contains(w.Conditions, string(v1alpha1.PodConditionDisruptionTarget)) {
		return true
	}
	spec := v.Job.Spec.ReplicaSpecs[w.Type]
	return spec != nil && DecideRestart(spec, w) == Recreate
}
