package bench

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/trainstep/trainstep/pkg/frameworks"
)

// Targets of the per-job Service layout (one headless Service for the job)
// against the per-replica one (a Service per replica), at TargetReplicas and
// TargetLargeReplicas.
const (
	// TargetLayoutLaunchRatio bounds the per-job layout's time to all
	// created over the per-replica layout's, median of alternating rounds.
	TargetLayoutLaunchRatio = 0.65
	// TargetWritesPerReplica bounds what kube-apiserver writes to etcd per
	// replica during a per-job launch, every component's writes counted.
	TargetWritesPerReplica = 4.5
	// TargetLayoutEndRatio bounds the end of a TargetLargeReplicas job with
	// cleanup (cleanPodPolicy Running, worker-0's end → outputs) under the
	// per-job layout over the per-replica one's.
	TargetLayoutEndRatio = 0.6
)

// MaxLaunchReplicas is the one launch at the documented maximum of a job.
const MaxLaunchReplicas = frameworks.MaxReplicas

// LayoutsCompared says whether the launch rounds at n workers also run
// trainstep under the per-replica layout.
func LayoutsCompared(n int) bool { return n == TargetReplicas || n == TargetLargeReplicas }

// WritesPerReplica spreads, over the runs, the etcd writes per replica.
func WritesPerReplica(runs []StoreWrites, replicas int) Spread {
	return Summarize(writesPerReplica(runs, replicas))
}

func writesPerReplica(runs []StoreWrites, replicas int) []float64 {
	var per []float64
	for _, w := range runs {
		per = append(per, float64(w.Total())/float64(replicas))
	}
	return per
}

// WritesByResource is the median, over the runs, of each resource's etcd
// writes per replica, the most first: "pods 2.13, events 1.99, …".
func WritesByResource(runs []StoreWrites, replicas int) string {
	perResource := map[string][]float64{}
	for _, w := range runs {
		for r := range w.Writes {
			perResource[r] = nil
		}
	}
	for r := range perResource {
		for _, w := range runs {
			perResource[r] = append(perResource[r], float64(w.Writes[r])/float64(replicas))
		}
	}
	type entry struct {
		resource string
		median   float64
	}
	var entries []entry
	for r, values := range perResource {
		entries = append(entries, entry{r, Summarize(values).Median})
	}
	sort.Slice(entries, func(i, j int) bool {
		if entries[i].median != entries[j].median {
			return entries[i].median > entries[j].median
		}
		return entries[i].resource < entries[j].resource
	})
	var parts []string
	for _, e := range entries {
		if e.median >= 0.005 {
			parts = append(parts, fmt.Sprintf("%s %.2f", e.resource, e.median))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// LayoutRow compares the two layouts at one size, for the report.
type LayoutRow struct {
	Replicas int
	// PerJob and PerReplica are trainstep's launches under each layout, in
	// the same rounds; CreatedRatio is per-job over per-replica, round by round.
	PerJob, PerReplica LaunchTimes
	CreatedRatio       Spread
	// PerJobEnd and PerReplicaEnd: worker-0's end → outputs with cleanPodPolicy Running.
	PerJobEnd, PerReplicaEnd []time.Duration
	// PerJobGone and PerReplicaGone: SIGTERM → no pod or Service left (when measured at this size).
	PerJobGone, PerReplicaGone []time.Duration
	// Writes: etcd writes per replica during each launch.
	PerJobWrites, PerReplicaWrites, BaselineWrites             Spread
	PerJobByResource, PerReplicaByResource, BaselineByResource string
}

// LayoutRows are the sizes measured under both layouts.
func (r Report) LayoutRows() []LayoutRow {
	var rows []LayoutRow
	for _, s := range r.Sizes {
		if len(s.PerReplica.Created) == 0 {
			continue
		}
		row := LayoutRow{
			Replicas: s.Replicas, PerJob: s.Trainstep, PerReplica: s.PerReplica,
			CreatedRatio: Summarize(Ratios(s.Trainstep.Created, s.PerReplica.Created)),
			PerJobEnd:    s.EndToOutputs, PerReplicaEnd: s.PerReplicaEndToOutputs,
			PerJobWrites:     WritesPerReplica(s.TrainstepWrites, s.Replicas),
			PerReplicaWrites: WritesPerReplica(s.PerReplicaWrites, s.Replicas),
			BaselineWrites:   WritesPerReplica(s.BaselineWrites, s.Replicas),
		}
		row.PerJobByResource = WritesByResource(s.TrainstepWrites, s.Replicas)
		row.PerReplicaByResource = WritesByResource(s.PerReplicaWrites, s.Replicas)
		row.BaselineByResource = WritesByResource(s.BaselineWrites, s.Replicas)
		if t, ok := r.Teardown(s.Replicas); ok {
			row.PerJobGone, row.PerReplicaGone = t.Gone, t.PerReplicaGone
		}
		rows = append(rows, row)
	}
	return rows
}

// layoutTargets checks the per-job layout's targets at TargetReplicas and
// TargetLargeReplicas.
func (r Report) layoutTargets() []Target {
	var targets []Target
	for _, n := range []int{TargetReplicas, TargetLargeReplicas} {
		launch := fmt.Sprintf("per-job layout at %d: time to all created over the per-replica layout's", n)
		writes := fmt.Sprintf("per-job layout at %d: etcd writes per replica during the launch", n)
		s, ok := r.Size(n)
		if !ok || len(s.PerReplica.Created) == 0 {
			targets = append(targets, r.notMeasured(launch, fmt.Sprintf("≤ %.2f", TargetLayoutLaunchRatio), n),
				r.notMeasured(writes, fmt.Sprintf("≤ %.1f", TargetWritesPerReplica), n))
			continue
		}
		targets = append(targets,
			medianTarget(launch, Ratios(s.Trainstep.Created, s.PerReplica.Created), TargetLayoutLaunchRatio, "%.2f", "",
				"per replica, the per-replica layout's launch wrote "+WritesPerReplica(s.PerReplicaWrites, n).Format("%.2f")+
					" (the per-job layout's "+WritesPerReplica(s.TrainstepWrites, n).Format("%.2f")+")"),
			medianTarget(writes, writesPerReplica(s.TrainstepWrites, n), TargetWritesPerReplica, "%.2f", "",
				"by resource: "+WritesByResource(s.TrainstepWrites, n)))
	}
	end := fmt.Sprintf("end of a %d-worker job with cleanup: per-job layout over per-replica", TargetLargeReplicas)
	if s, ok := r.Size(TargetLargeReplicas); ok && len(s.PerReplicaEndToOutputs) > 0 {
		targets = append(targets, medianTarget(end, Ratios(s.EndToOutputs, s.PerReplicaEndToOutputs), TargetLayoutEndRatio, "%.2f", "",
			"per-job "+formatSeconds(s.EndToOutputs)+", per-replica "+formatSeconds(s.PerReplicaEndToOutputs)))
	} else {
		targets = append(targets, r.notMeasured(end, fmt.Sprintf("≤ %.1f", TargetLayoutEndRatio), TargetLargeReplicas))
	}
	return targets
}

// MaxLaunchResult is one launch of a MaxLaunchReplicas-worker job under the
// per-job layout, from a quiet cluster.
type MaxLaunchResult struct {
	Replicas         int
	Created, Running time.Duration
	Detection        time.Duration
	Writes           StoreWrites
	PeakRSSBytes     float64
}

// WritesPerReplica is the launch's etcd writes per replica.
func (m MaxLaunchResult) WritesPerReplica() float64 {
	if m.Replicas == 0 {
		return 0
	}
	return float64(m.Writes.Total()) / float64(m.Replicas)
}
