package bench

import (
	"context"
	"math"
	"sort"
	"strconv"
	"time"

	"k8s.io/client-go/rest"
)

// APIServerLoad is how kube-apiserver answered, from its metrics: how long
// its requests took (apiserver_request_duration_seconds, summed over every
// verb but the long-running WATCH and CONNECT, whose durations are those of
// the watch or the stream), and how many it turned away with 429 Too Many
// Requests (apiserver_request_total by code) because its priority and
// fairness had no seat or queue room for them.
type APIServerLoad struct {
	// Buckets counts the requests by the upper bound of their duration, in
	// seconds (+Inf the last), cumulatively, as Prometheus does.
	Buckets   map[float64]float64
	Throttled int
	// ByRequest counts the requests answered, by "VERB resource[/subresource]".
	ByRequest map[string]int
}

// ReadAPIServerLoad reads kube-apiserver's metrics (an admin's client).
func ReadAPIServerLoad(ctx context.Context, client rest.Interface) (APIServerLoad, error) {
	metrics, err := readAPIServerMetrics(ctx, client)
	if err != nil {
		return APIServerLoad{}, err
	}
	return parseAPIServerLoad(metrics)
}

// longRunningVerbs are the verbs whose durations are not the answer's.
var longRunningVerbs = map[string]bool{"WATCH": true, "CONNECT": true, "WATCHLIST": true}

func parseAPIServerLoad(metrics []byte) (APIServerLoad, error) {
	l := APIServerLoad{Buckets: map[float64]float64{}, ByRequest: map[string]int{}}
	var parseErr error
	err := eachSample(metrics, func(name string, labels map[string]string, v float64) {
		switch name {
		case "apiserver_request_duration_seconds_bucket":
			if longRunningVerbs[labels["verb"]] {
				return
			}
			le, err := strconv.ParseFloat(labels["le"], 64)
			if err != nil {
				parseErr = err
				return
			}
			l.Buckets[le] += v
		case "apiserver_request_total":
			if labels["code"] == "429" {
				l.Throttled += int(v)
			}
			key := labels["verb"] + " " + resourceOf(labels)
			if sub := labels["subresource"]; sub != "" {
				key += "/" + sub
			}
			l.ByRequest[key] += int(v)
		}
	}, "apiserver_request_duration_seconds_bucket", "apiserver_request_total")
	if err == nil {
		err = parseErr
	}
	return l, err
}

// Since is what happened after before was read.
func (l APIServerLoad) Since(before APIServerLoad) APIServerLoad {
	out := APIServerLoad{Buckets: map[float64]float64{}, Throttled: l.Throttled - before.Throttled, ByRequest: map[string]int{}}
	for le, n := range l.Buckets {
		out.Buckets[le] = n - before.Buckets[le]
	}
	for k, n := range l.ByRequest {
		if d := n - before.ByRequest[k]; d > 0 {
			out.ByRequest[k] = d
		}
	}
	return out
}

// Requests is how many requests the histogram counts.
func (l APIServerLoad) Requests() int { return int(l.Buckets[math.Inf(1)]) }

// Quantile estimates the q-quantile of the requests' durations as
// Prometheus' histogram_quantile does: linearly within the bucket that
// holds it; the highest finite bound when it falls in the last bucket.
func (l APIServerLoad) Quantile(q float64) time.Duration {
	bounds := make([]float64, 0, len(l.Buckets))
	for le := range l.Buckets {
		bounds = append(bounds, le)
	}
	sort.Float64s(bounds)
	total := l.Buckets[math.Inf(1)]
	if len(bounds) == 0 || total <= 0 {
		return 0
	}
	rank := q * total
	lower, below := 0.0, 0.0
	for _, le := range bounds {
		count := l.Buckets[le]
		if count >= rank {
			if math.IsInf(le, 1) {
				return secondsDuration(lower)
			}
			if count == below {
				return secondsDuration(le)
			}
			return secondsDuration(lower + (le-lower)*(rank-below)/(count-below))
		}
		lower, below = le, count
	}
	return secondsDuration(lower)
}

func secondsDuration(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
