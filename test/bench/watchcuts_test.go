package bench

import "testing"

func TestParseWatchCutsReadsTheCounterByResource(t *testing.T) {
	metrics := []byte(`# HELP apiserver_terminated_watchers_total [STABLE] Counter of watchers closed due to unresponsiveness broken by resource type.
# TYPE apiserver_terminated_watchers_total counter
apiserver_terminated_watchers_total{group="",resource="pods"} 93
apiserver_terminated_watchers_total{group="",resource="services"} 7
apiserver_terminated_watchers_total{group="discovery.k8s.io",resource="endpointslices"} 2
apiserver_watch_cache_events_dispatched_total{group="",resource="pods"} 125734
`)
	cuts, err := parseWatchCuts(metrics)
	if err != nil {
		t.Fatal(err)
	}
	want := WatchCuts{"pods": 93, "services": 7, "endpointslices.discovery.k8s.io": 2}
	if len(cuts) != len(want) {
		t.Fatalf("cuts = %v, want %v", cuts, want)
	}
	for r, n := range want {
		if cuts[r] != n {
			t.Errorf("cuts[%s] = %d, want %d", r, cuts[r], n)
		}
	}
}

func TestWatchCutsSinceKeepsWhatGrew(t *testing.T) {
	before := WatchCuts{"pods": 90, "services": 7}
	after := WatchCuts{"pods": 95, "services": 7, "endpointslices.discovery.k8s.io": 1}
	got := after.Since(before)
	if got.String() != "pods 5, endpointslices.discovery.k8s.io 1" {
		t.Errorf("Since = %q, want %q", got, "pods 5, endpointslices.discovery.k8s.io 1")
	}
	if s := before.Since(before).String(); s != "none" {
		t.Errorf("nothing cut = %q, want none", s)
	}
}
