package bench

import "testing"

func TestParseStoreWritesCountsWritesAndPodCreates(t *testing.T) {
	metrics := []byte(`# TYPE etcd_request_duration_seconds histogram
etcd_request_duration_seconds_bucket{group="",operation="create",resource="pods",le="0.005"} 10
etcd_request_duration_seconds_sum{group="",operation="create",resource="pods"} 2.5
etcd_request_duration_seconds_count{group="",operation="create",resource="pods"} 50
etcd_request_duration_seconds_sum{group="",operation="update",resource="pods"} 1.5
etcd_request_duration_seconds_count{group="",operation="update",resource="pods"} 30
etcd_request_duration_seconds_sum{group="",operation="get",resource="pods"} 9
etcd_request_duration_seconds_count{group="",operation="get",resource="pods"} 900
etcd_request_duration_seconds_sum{group="discovery.k8s.io",operation="create",resource="endpointslices"} 1
etcd_request_duration_seconds_count{group="discovery.k8s.io",operation="create",resource="endpointslices"} 20
apiserver_request_duration_seconds_sum{component="apiserver",dry_run="",group="",resource="pods",scope="resource",subresource="",verb="POST",version="v1"} 5
apiserver_request_duration_seconds_count{component="apiserver",dry_run="",group="",resource="pods",scope="resource",subresource="",verb="POST",version="v1"} 50
apiserver_request_duration_seconds_sum{component="apiserver",dry_run="",group="",resource="pods",scope="resource",subresource="binding",verb="POST",version="v1"} 7
apiserver_request_duration_seconds_count{component="apiserver",dry_run="",group="",resource="pods",scope="resource",subresource="binding",verb="POST",version="v1"} 30
`)
	w, err := parseStoreWrites(metrics)
	if err != nil {
		t.Fatal(err)
	}
	if w.Total() != 100 || w.Writes["pods"] != 80 || w.Writes["endpointslices.discovery.k8s.io"] != 20 {
		t.Errorf("writes = %v (total %d), want pods 80 and endpointslices 20: reads are not writes", w.Writes, w.Total())
	}
	if w.WriteSeconds != 5 || w.PodCreateEtcdSeconds != 2.5 {
		t.Errorf("write seconds %v, pod creates' etcd seconds %v, want 5 and 2.5", w.WriteSeconds, w.PodCreateEtcdSeconds)
	}
	if w.PodCreates != 50 || w.PodCreateSeconds != 5 {
		t.Errorf("pod creates %d in %vs, want 50 in 5s: bindings are not creates", w.PodCreates, w.PodCreateSeconds)
	}
}

func TestStoreWritesSinceSaysWhatTheWindowWrote(t *testing.T) {
	before := StoreWrites{Writes: map[string]int{"pods": 80, "events": 10}, WriteSeconds: 5, PodCreates: 50, PodCreateSeconds: 5, PodCreateEtcdSeconds: 2.5}
	after := StoreWrites{Writes: map[string]int{"pods": 180, "events": 10, "endpointslices.discovery.k8s.io": 20},
		WriteSeconds: 11, PodCreates: 100, PodCreateSeconds: 15, PodCreateEtcdSeconds: 7.5}
	got := after.Since(before).String()
	want := "etcd writes 120, 50ms each on average (pods 100, endpointslices.discovery.k8s.io 20); pod creates answered in 200ms on average, 100ms of it writing to etcd"
	if got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	many := StoreWrites{Writes: map[string]int{"a": 7, "b": 6, "c": 5, "d": 4, "e": 3, "f": 2, "g": 1}, WriteSeconds: 2.8}
	if got, want := many.String(), "etcd writes 28, 100ms each on average (a 7, b 6, c 5, d 4, e 3, 2 more)"; got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	if s := before.Since(before).String(); s != "etcd writes none" {
		t.Errorf("nothing written = %q", s)
	}
}
