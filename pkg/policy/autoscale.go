package policy

import (
	"fmt"
	"math"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
)

// Metric-driven elastic scaling follows the HorizontalPodAutoscaler's
// algorithm for Resource metrics, with trainstep in the HPA controller's
// place (a HorizontalPodAutoscaler object would need a scale subresource):
// each metric proposes ceil(current × usage/target) workers unless the ratio
// is within the tolerance; the largest proposal wins; a scale-up is limited
// to max(2×, +4) per evaluation (the HPA's default behaviour); a scale-down
// takes the largest recommendation of the stabilisation window; the result
// stays within minReplicas..maxReplicas.

// AutoscaleTolerance is the HPA's default tolerance: a usage within 10% of
// the target changes nothing.
const AutoscaleTolerance = 0.1

// ScaleDownStabilization is the HPA's default scale-down stabilisation
// window: the worker count never drops below a recommendation of the last
// five minutes.
const ScaleDownStabilization = 5 * time.Minute

// AutoscalePeriod is how often the metrics are evaluated, the HPA
// controller's default sync period.
const AutoscalePeriod = 15 * time.Second

// PodUsage is one worker pod's part in a Resource metric, in milli-units of
// the resource (millicores, or thousandths of a byte).
type PodUsage struct {
	Name string
	// Request is the pod's request of the resource (its containers' sum).
	Request int64
	// Usage is what metrics.k8s.io reports; HasUsage is false when it
	// reports nothing for the pod.
	Usage    int64
	HasUsage bool
	// Pending, Failed or Deleting pods are left out, as the HPA leaves them out.
	Pending, Failed, Deleting bool
	// Ready is false for a running pod that is not Ready: for cpu its usage
	// is left out (a starting process burns cpu that says nothing of load).
	Ready bool
}

// ResourceProposal is the worker count one Resource metric asks for, given
// the current count and the pods' usage: the HPA replica calculator's
// answer, including its treatment of unready pods and of pods without
// metrics (assumed at the target on scale-down, idle on scale-up, so that
// they damp the change).
func ResourceProposal(current int, resource corev1.ResourceName, target autoscalingv2.MetricTarget, pods []PodUsage, tolerance float64) (int, error) {
	usage := map[string]int64{}
	requests := map[string]int64{}
	var unready, missing []string
	ready := 0
	for _, p := range pods {
		if p.Pending || p.Failed || p.Deleting {
			continue
		}
		if !p.HasUsage {
			missing = append(missing, p.Name)
			requests[p.Name] = p.Request
			continue
		}
		requests[p.Name] = p.Request
		if resource == corev1.ResourceCPU && !p.Ready {
			unready = append(unready, p.Name)
			continue
		}
		usage[p.Name] = p.Usage
		ready++
	}
	if len(usage) == 0 {
		return current, fmt.Errorf("no worker has a %s usage in metrics.k8s.io yet", resource)
	}
	ratio, err := usageRatio(usage, requests, target)
	if err != nil {
		return current, err
	}
	scaleUpWithUnready := len(unready) > 0 && ratio > 1
	if !scaleUpWithUnready && len(missing) == 0 {
		if math.Abs(1-ratio) <= tolerance {
			return current, nil
		}
		return int(math.Ceil(ratio * float64(ready))), nil
	}
	// Pods without a usage damp the change: at the target when scaling
	// down, idle when scaling up (at a ratio of exactly 1, left out).
	for _, name := range missing {
		switch {
		case ratio < 1 && target.Type == autoscalingv2.UtilizationMetricType:
			usage[name] = requests[name] * int64(max(100, utilization(target))) / 100
		case ratio < 1:
			usage[name] = averageValue(target)
		case ratio > 1:
			usage[name] = 0
		}
	}
	if scaleUpWithUnready {
		for _, name := range unready {
			usage[name] = 0
		}
	}
	newRatio, err := usageRatio(usage, requests, target)
	if err != nil {
		return current, err
	}
	if math.Abs(1-newRatio) <= tolerance || (ratio < 1 && newRatio > 1) || (ratio > 1 && newRatio < 1) {
		return current, nil // the pods without usage reversed or cancelled the change
	}
	proposal := int(math.Ceil(newRatio * float64(len(usage))))
	if (newRatio < 1 && proposal > current) || (newRatio > 1 && proposal < current) {
		return current, nil
	}
	return proposal, nil
}

// usageRatio is usage over target: for Utilization the pods' summed usage
// over their summed requests, against the target percentage; for
// AverageValue the mean usage against the target value.
func usageRatio(usage, requests map[string]int64, target autoscalingv2.MetricTarget) (float64, error) {
	var total int64
	for _, u := range usage {
		total += u
	}
	switch target.Type {
	case autoscalingv2.UtilizationMetricType:
		var requested int64
		for name := range usage {
			if requests[name] == 0 {
				return 0, fmt.Errorf("worker pod %s requests none of the resource the metric's averageUtilization is a percentage of", name)
			}
			requested += requests[name]
		}
		current := float64(total*100) / float64(requested)
		return current / float64(utilization(target)), nil
	case autoscalingv2.AverageValueMetricType:
		return float64(total) / float64(len(usage)) / float64(averageValue(target)), nil
	}
	return 0, fmt.Errorf("a Resource metric's target type %q is not Utilization or AverageValue", target.Type)
}

func utilization(t autoscalingv2.MetricTarget) int32 {
	if t.AverageUtilization == nil {
		return 0
	}
	return *t.AverageUtilization
}

func averageValue(t autoscalingv2.MetricTarget) int64 {
	if t.AverageValue == nil {
		return 0
	}
	return t.AverageValue.MilliValue()
}

// ScaleUpLimit is the most workers one evaluation may reach from current:
// the HPA's default scale-up policies (100% or 4 pods per period, the larger).
func ScaleUpLimit(current int) int { return max(2*current, current+4) }

// Recommendations keeps the recent recommendations of the scale-down
// stabilisation window.
type Recommendations struct {
	entries []recommendation
}

type recommendation struct {
	at      time.Time
	workers int
}

// Record notes a worker count as a recommendation: the HPA records the
// current count when it starts, so that it does not scale down before a
// whole window of low usage.
func (r *Recommendations) Record(now time.Time, workers int) {
	r.entries = append(r.entries, recommendation{at: now, workers: workers})
}

// Stabilize records proposal and returns the worker count to act on: the
// proposal when it grows, otherwise the largest recommendation within the
// window (so a dip shorter than the window changes nothing).
func (r *Recommendations) Stabilize(now time.Time, proposal int, window time.Duration) int {
	cutoff := now.Add(-window)
	kept := r.entries[:0]
	stable := proposal
	for _, e := range r.entries {
		if e.at.After(cutoff) {
			kept = append(kept, e)
			stable = max(stable, e.workers)
		}
	}
	r.entries = append(kept, recommendation{at: now, workers: proposal})
	return stable
}

// DesiredWorkers combines the metrics' proposals into the worker count of
// one evaluation: the largest proposal, at most ScaleUpLimit(current),
// stabilised, within lo..hi.
func DesiredWorkers(now time.Time, current int, proposals []int, lo, hi int, recent *Recommendations) int {
	if len(proposals) == 0 {
		return current
	}
	proposal := proposals[0]
	for _, p := range proposals[1:] {
		proposal = max(proposal, p)
	}
	proposal = min(max(proposal, lo), hi)
	stable := recent.Stabilize(now, proposal, ScaleDownStabilization)
	if stable > current {
		stable = min(stable, ScaleUpLimit(current))
	}
	return min(max(stable, lo), hi)
}
