package bench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"k8s.io/client-go/rest"
)

// readAPIServerMetrics reads kube-apiserver's /metrics (an admin's client).
func readAPIServerMetrics(ctx context.Context, client rest.Interface) ([]byte, error) {
	body, err := client.Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading kube-apiserver's metrics: %w", err)
	}
	return body, nil
}

var sampleLine = regexp.MustCompile(`^(\w+)\{([^}]*)\} ([0-9.e+-]+)$`)
var metricLabel = regexp.MustCompile(`(\w+)="([^"]*)"`)

// eachSample calls fn for every sample of the named series in a Prometheus
// text exposition, with its series name and labels, in one pass.
func eachSample(metrics []byte, fn func(name string, labels map[string]string, value float64), names ...string) error {
	scanner := bufio.NewScanner(bytes.NewReader(metrics))
	scanner.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for scanner.Scan() {
		line := scanner.Text()
		name, _, ok := strings.Cut(line, "{")
		if !ok || !slices.Contains(names, name) {
			continue
		}
		m := sampleLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		value, err := strconv.ParseFloat(m[3], 64)
		if err != nil {
			return fmt.Errorf("reading %q: %w", line, err)
		}
		labels := map[string]string{}
		for _, l := range metricLabel.FindAllStringSubmatch(m[2], -1) {
			labels[l[1]] = l[2]
		}
		fn(name, labels, value)
	}
	return scanner.Err()
}

// resourceOf names a sample's resource as "pods" or "endpointslices.discovery.k8s.io".
func resourceOf(labels map[string]string) string {
	if g := labels["group"]; g != "" {
		return labels["resource"] + "." + g
	}
	return labels["resource"]
}
