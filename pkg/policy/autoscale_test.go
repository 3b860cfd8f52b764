package policy

import (
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// pods builds running, ready workers requesting request milli-units each,
// with the given usages; nil entries in missing have no usage.
func runningPods(request int64, usages ...int64) []PodUsage {
	var out []PodUsage
	for i, u := range usages {
		out = append(out, PodUsage{Name: string(rune('a' + i)), Request: request, Usage: u, HasUsage: u >= 0, Ready: true})
	}
	return out
}

func utilizationTarget(percent int32) autoscalingv2.MetricTarget {
	return autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: &percent}
}

func averageValueTarget(v string) autoscalingv2.MetricTarget {
	q := resource.MustParse(v)
	return autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: &q}
}

// The cases are the HorizontalPodAutoscaler's: the Kubernetes docs'
// examples of desiredReplicas = ceil[currentReplicas × (current / desired)]
// and the upstream replica calculator's test cases for Resource metrics
// (pkg/controller/podautoscaler, TestReplicaCalcResourceScale,
// TestReplicaCalcResourceMissingMetrics), with their numbers. -1 marks a
// pod metrics.k8s.io has no usage for.
func TestResourceProposalFollowsTheHPAFormula(t *testing.T) {
	unready := func(pods []PodUsage, idx ...int) []PodUsage {
		for _, i := range idx {
			pods[i].Ready = false
		}
		return pods
	}
	withState := func(pods []PodUsage, mark func(*PodUsage)) []PodUsage {
		for i := range pods {
			if !pods[i].HasUsage {
				mark(&pods[i])
			}
		}
		return pods
	}
	cases := []struct {
		name     string
		current  int
		resource corev1.ResourceName
		target   autoscalingv2.MetricTarget
		pods     []PodUsage
		want     int
	}{
		// The docs: 200m against 100m doubles, 50m halves, within 10% nothing.
		{"docs: 200m of a 100m average doubles", 4, corev1.ResourceCPU, averageValueTarget("100m"), runningPods(1000, 200, 200, 200, 200), 8},
		{"docs: 50m of a 100m average halves", 4, corev1.ResourceCPU, averageValueTarget("100m"), runningPods(1000, 50, 50, 50, 50), 2},
		{"docs: 109m of 100m is within the tolerance", 4, corev1.ResourceCPU, averageValueTarget("100m"), runningPods(1000, 109, 109, 109, 109), 4},
		{"docs: 111m of 100m is outside it", 4, corev1.ResourceCPU, averageValueTarget("100m"), runningPods(1000, 111, 111, 111, 111), 5},
		{"docs: 91m of 100m is within the tolerance", 4, corev1.ResourceCPU, averageValueTarget("100m"), runningPods(1000, 91, 91, 91, 91), 4},
		// TestReplicaCalcResourceScale
		{"upstream: scale up", 3, corev1.ResourceCPU, utilizationTarget(30), runningPods(1000, 300, 500, 700), 5},
		{"upstream: scale up: unready pod scales less", 3, corev1.ResourceCPU, utilizationTarget(30), unready(runningPods(1000, 300, 500, 700), 0), 4},
		{"upstream: no scale: unready pods ignored", 3, corev1.ResourceCPU, utilizationTarget(30), unready(runningPods(1000, 400, 500, 700), 1, 2), 3},
		{"upstream: scale up: failed pods ignored", 2, corev1.ResourceCPU, utilizationTarget(30),
			withState(runningPods(1000, 500, 700, -1, -1), func(p *PodUsage) { p.Failed = true }), 4},
		{"upstream: scale up: pods being deleted are ignored", 2, corev1.ResourceCPU, utilizationTarget(30),
			withState(runningPods(1000, 500, 700, -1, -1), func(p *PodUsage) { p.Deleting = true }), 4},
		{"upstream: scale down", 5, corev1.ResourceCPU, utilizationTarget(50), runningPods(1000, 100, 300, 500, 250, 250), 3},
		{"upstream: scale down: exclude unready pods", 5, corev1.ResourceCPU, utilizationTarget(50), unready(runningPods(1000, 100, 300, 500, 250, 250), 3, 4), 2},
		{"upstream: scale down: exclude unscheduled pods", 5, corev1.ResourceCPU, utilizationTarget(50),
			withState(runningPods(1000, 100, -1, -1, -1, -1), func(p *PodUsage) { p.Pending = true }), 1},
		{"upstream: scale down: failed pods ignored", 5, corev1.ResourceCPU, utilizationTarget(50),
			withState(runningPods(1000, 100, 300, 500, 250, 250, -1, -1), func(p *PodUsage) { p.Failed = true }), 3},
		// TestReplicaCalcResourceMissingMetrics
		{"upstream: some pods missing metrics scales down", 4, corev1.ResourceCPU, utilizationTarget(100), runningPods(1000, 400, 95, -1, -1), 3},
		{"upstream: no change: metric equal to target", 2, corev1.ResourceCPU, utilizationTarget(100), runningPods(1000, 1000, -1), 2},
		{"upstream: no change: metric above target", 2, corev1.ResourceCPU, utilizationTarget(100), runningPods(1000, 1900, -1), 2},
		{"upstream: no change: metric below target", 2, corev1.ResourceCPU, utilizationTarget(100), runningPods(1000, 600, -1), 2},
		{"upstream: no change: unready pod metric missing", 3, corev1.ResourceCPU, utilizationTarget(50), unready(runningPods(1000, 100, 450, -1), 0), 3},
		// Memory: readiness does not matter.
		{"memory: an unready pod counts", 2, corev1.ResourceMemory, averageValueTarget("1Gi"), unready(runningPods(0, 2<<30*1000, 2<<30*1000), 0), 4},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ResourceProposal(tc.current, tc.resource, tc.target, tc.pods, AutoscaleTolerance)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("ResourceProposal = %d workers, want %d", got, tc.want)
			}
		})
	}
}

func TestResourceProposalNeedsUsageAndRequests(t *testing.T) {
	if _, err := ResourceProposal(2, corev1.ResourceCPU, utilizationTarget(50), runningPods(1000, -1, -1), AutoscaleTolerance); err == nil {
		t.Error("no error without any usage")
	}
	if _, err := ResourceProposal(2, corev1.ResourceCPU, utilizationTarget(50), runningPods(0, 100, 100), AutoscaleTolerance); err == nil {
		t.Error("no error for a utilization target of pods that request nothing")
	}
}

// A scale-down waits out the stabilisation window: the count is the largest
// recommendation of the last five minutes; a scale-up acts at once, at most
// doubling (or +4) per evaluation; the bounds always hold.
func TestDesiredWorkersStabilisesScaleDownWithinTheBounds(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var recent Recommendations
	steps := []struct {
		after     time.Duration
		current   int
		proposals []int
		want      int
	}{
		{0, 2, []int{6}, 6},                               // up at once
		{15 * time.Second, 6, []int{3, 2}, 6},             // the largest metric wins; down waits
		{4 * time.Minute, 6, []int{3}, 6},                 // still within 5 min of the 6
		{5*time.Minute + time.Second, 6, []int{3}, 3},     // the 6 left the window
		{5*time.Minute + 16*time.Second, 3, []int{40}, 7}, // up, at most max(2×3, 3+4) = 7
		{5*time.Minute + 31*time.Second, 7, []int{40}, 8}, // maxReplicas
		{5*time.Minute + 46*time.Second, 8, []int{0}, 8},  // down: the window holds 8
		{11 * time.Minute, 8, []int{0}, 2},                // minReplicas
	}
	for i, s := range steps {
		if got := DesiredWorkers(start.Add(s.after), s.current, s.proposals, 2, 8, &recent); got != s.want {
			t.Errorf("step %d (+%s, %d workers, proposals %v): %d workers, want %d", i, s.after, s.current, s.proposals, got, s.want)
		}
	}
}

// Like the HPA, which records the current count when it starts, a job
// that starts below the target usage keeps its workers for a whole window.
func TestDesiredWorkersHoldsTheStartingCountForAWindow(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var recent Recommendations
	recent.Record(start, 3)
	if got := DesiredWorkers(start.Add(15*time.Second), 3, []int{1}, 1, 3, &recent); got != 3 {
		t.Errorf("%d workers 15s after the start, want the starting 3", got)
	}
	if got := DesiredWorkers(start.Add(5*time.Minute+time.Second), 3, []int{1}, 1, 3, &recent); got != 1 {
		t.Errorf("%d workers after a window of low usage, want 1", got)
	}
}
