package bench

import (
	"fmt"
	"sort"
	"strings"
)

// WatchCuts counts, by resource, the watches kube-apiserver closed because
// their client did not take the events as fast as they came
// (apiserver_terminated_watchers_total). While it waits for such a watch,
// the API server holds back that resource's events from every other
// watcher, the scheduler's and KWOK's included; each cut then has the
// client watch again.
type WatchCuts map[string]int

func parseWatchCuts(metrics []byte) (WatchCuts, error) {
	cuts := WatchCuts{}
	err := eachSample(metrics, func(_ string, labels map[string]string, n float64) {
		cuts[resourceOf(labels)] += int(n)
	}, "apiserver_terminated_watchers_total")
	return cuts, err
}

// Since is what was cut after before was read.
func (w WatchCuts) Since(before WatchCuts) WatchCuts {
	out := WatchCuts{}
	for r, n := range w {
		if d := n - before[r]; d > 0 {
			out[r] = d
		}
	}
	return out
}

// String lists the cuts, most first: "pods 5, services 1", or "none".
func (w WatchCuts) String() string {
	if len(w) == 0 {
		return "none"
	}
	return mostFirst(w, len(w))
}

// mostFirst lists the top counts by key, the largest first: "pods 5,
// services 1", and how many more keys there are.
func mostFirst(counts map[string]int, top int) string {
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if counts[keys[i]] != counts[keys[j]] {
			return counts[keys[i]] > counts[keys[j]]
		}
		return keys[i] < keys[j]
	})
	parts := make([]string, 0, top+1)
	for _, k := range keys[:min(top, len(keys))] {
		parts = append(parts, fmt.Sprintf("%s %d", k, counts[k]))
	}
	if more := len(keys) - top; more > 0 {
		parts = append(parts, fmt.Sprintf("%d more", more))
	}
	return strings.Join(parts, ", ")
}
