package bench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"k8s.io/client-go/rest"
)

// WatchCuts counts, by resource, the watches kube-apiserver closed because
// their client did not take the events as fast as they came
// (apiserver_terminated_watchers_total). While it waits for such a watch,
// the API server holds back that resource's events from every other
// watcher, the scheduler's and KWOK's included; each cut then has the
// client watch again.
type WatchCuts map[string]int

var terminatedWatchersLine = regexp.MustCompile(`^apiserver_terminated_watchers_total\{([^}]*)\} ([0-9.e+]+)$`)
var metricLabel = regexp.MustCompile(`(\w+)="([^"]*)"`)

// ReadWatchCuts reads kube-apiserver's /metrics (an admin's client).
func ReadWatchCuts(ctx context.Context, client rest.Interface) (WatchCuts, error) {
	body, err := client.Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading kube-apiserver's metrics: %w", err)
	}
	return parseWatchCuts(body)
}

func parseWatchCuts(metrics []byte) (WatchCuts, error) {
	cuts := WatchCuts{}
	scanner := bufio.NewScanner(bytes.NewReader(metrics))
	scanner.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for scanner.Scan() {
		m := terminatedWatchersLine.FindStringSubmatch(scanner.Text())
		if m == nil {
			continue
		}
		labels := map[string]string{}
		for _, l := range metricLabel.FindAllStringSubmatch(m[1], -1) {
			labels[l[1]] = l[2]
		}
		n, err := strconv.ParseFloat(m[2], 64)
		if err != nil {
			return nil, fmt.Errorf("reading %q: %w", scanner.Text(), err)
		}
		resource := labels["resource"]
		if g := labels["group"]; g != "" {
			resource += "." + g
		}
		cuts[resource] += int(n)
	}
	return cuts, scanner.Err()
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
	resources := make([]string, 0, len(w))
	for r := range w {
		resources = append(resources, r)
	}
	sort.Slice(resources, func(i, j int) bool {
		if w[resources[i]] != w[resources[j]] {
			return w[resources[i]] > w[resources[j]]
		}
		return resources[i] < resources[j]
	})
	parts := make([]string, len(resources))
	for i, r := range resources {
		parts[i] = fmt.Sprintf("%s %d", r, w[r])
	}
	return strings.Join(parts, ", ")
}
