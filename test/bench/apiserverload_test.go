package bench

import (
	"testing"
	"time"
)

func TestAPIServerLoadQuantilesLeaveWatchesOut(t *testing.T) {
	before := []byte(`apiserver_request_duration_seconds_bucket{verb="POST",resource="pods",le="0.1"} 10
apiserver_request_duration_seconds_bucket{verb="POST",resource="pods",le="1"} 10
apiserver_request_duration_seconds_bucket{verb="POST",resource="pods",le="+Inf"} 10
apiserver_request_total{code="201",verb="POST",resource="pods"} 10
`)
	after := []byte(`apiserver_request_duration_seconds_bucket{verb="POST",resource="pods",le="0.1"} 90
apiserver_request_duration_seconds_bucket{verb="POST",resource="pods",le="1"} 100
apiserver_request_duration_seconds_bucket{verb="POST",resource="pods",le="+Inf"} 110
apiserver_request_duration_seconds_bucket{verb="GET",resource="pods",le="0.1"} 10
apiserver_request_duration_seconds_bucket{verb="GET",resource="pods",le="1"} 10
apiserver_request_duration_seconds_bucket{verb="GET",resource="pods",le="+Inf"} 10
apiserver_request_duration_seconds_bucket{verb="WATCH",resource="pods",le="0.1"} 0
apiserver_request_duration_seconds_bucket{verb="WATCH",resource="pods",le="1"} 0
apiserver_request_duration_seconds_bucket{verb="WATCH",resource="pods",le="+Inf"} 500
apiserver_request_total{code="201",verb="POST",resource="pods"} 100
apiserver_request_total{code="429",verb="POST",resource="pods"} 7
apiserver_request_total{code="429",verb="GET",resource="pods"} 1
`)
	b, err := parseAPIServerLoad(before)
	if err != nil {
		t.Fatal(err)
	}
	a, err := parseAPIServerLoad(after)
	if err != nil {
		t.Fatal(err)
	}
	load := a.Since(b)
	// 110 requests since: 90 within 0.1 s, 10 more within 1 s, 10 slower.
	if load.Requests() != 110 || load.Throttled != 8 {
		t.Fatalf("requests %d, 429s %d; want 110 (watches left out) and 8", load.Requests(), load.Throttled)
	}
	for _, tc := range []struct {
		q    float64
		want time.Duration
	}{
		{0.5, 61111111 * time.Nanosecond}, // 55th of 90 in [0, 0.1]
		{0.9, 910 * time.Millisecond},     // the 99th: 9 of the 10 into (0.1, 1]
		{0.85, 415 * time.Millisecond},    // the 93.5th: 3.5 of the 10
		{0.99, 1 * time.Second},           // in the last bucket: its lower bound
	} {
		if got := load.Quantile(tc.q); (got - tc.want).Abs() > time.Millisecond {
			t.Errorf("Quantile(%v) = %s, want %s", tc.q, got, tc.want)
		}
	}
	if (APIServerLoad{}).Quantile(0.99) != 0 {
		t.Error("the quantile of no requests is not zero")
	}
}
