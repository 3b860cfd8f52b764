package bench

import (
	"fmt"
	"time"
)

// StoreWrites is what kube-apiserver wrote to etcd (creates, updates and
// deletes, from etcd_request_duration_seconds), by resource, with the time
// those writes took; and how long it took to answer pod creates
// (apiserver_request_duration_seconds), of which the pod's write to etcd is
// a part. Every component's writes are counted: the launching side's
// creates and, in the same window, the scheduler's bindings, KWOK's status
// updates, the controllers' EndpointSlices and the Events. They share one
// etcd, so a launch that overlaps more of them has its creates answered later.
type StoreWrites struct {
	Writes map[string]int
	// WriteSeconds is the time the writes took in etcd, summed.
	WriteSeconds float64
	PodCreates   int
	// PodCreateSeconds is the time from a pod create's arrival to its
	// answer, summed; PodCreateEtcdSeconds the part spent writing the pod
	// to etcd.
	PodCreateSeconds, PodCreateEtcdSeconds float64
}

// writesListed is how many resources String names.
const writesListed = 5

// etcdWrites are the operations of etcd_request_duration_seconds that write.
var etcdWrites = map[string]bool{"create": true, "update": true, "delete": true}

func parseStoreWrites(metrics []byte) (StoreWrites, error) {
	w := StoreWrites{Writes: map[string]int{}}
	err := eachSample(metrics, func(name string, labels map[string]string, v float64) {
		resource := resourceOf(labels)
		write := etcdWrites[labels["operation"]]
		podCreate := labels["verb"] == "POST" && resource == "pods" && labels["subresource"] == ""
		switch {
		case name == "etcd_request_duration_seconds_count" && write:
			w.Writes[resource] += int(v)
		case name == "etcd_request_duration_seconds_sum" && write:
			w.WriteSeconds += v
			if labels["operation"] == "create" && resource == "pods" {
				w.PodCreateEtcdSeconds += v
			}
		case name == "apiserver_request_duration_seconds_count" && podCreate:
			w.PodCreates += int(v)
		case name == "apiserver_request_duration_seconds_sum" && podCreate:
			w.PodCreateSeconds += v
		}
	}, "etcd_request_duration_seconds_count", "etcd_request_duration_seconds_sum",
		"apiserver_request_duration_seconds_count", "apiserver_request_duration_seconds_sum")
	return w, err
}

// Since is what was written after before was read.
func (w StoreWrites) Since(before StoreWrites) StoreWrites {
	out := StoreWrites{Writes: map[string]int{},
		WriteSeconds: w.WriteSeconds - before.WriteSeconds, PodCreates: w.PodCreates - before.PodCreates,
		PodCreateSeconds:     w.PodCreateSeconds - before.PodCreateSeconds,
		PodCreateEtcdSeconds: w.PodCreateEtcdSeconds - before.PodCreateEtcdSeconds}
	for r, n := range w.Writes {
		if d := n - before.Writes[r]; d > 0 {
			out.Writes[r] = d
		}
	}
	return out
}

// Total is the number of writes.
func (w StoreWrites) Total() int {
	total := 0
	for _, n := range w.Writes {
		total += n
	}
	return total
}

// String says how many writes there were and what they cost: "etcd writes
// 2650, 68ms each on average (pods 916, events 307, …, 4 more); pod creates
// answered in 159ms on average, 77ms of it writing to etcd".
func (w StoreWrites) String() string {
	total := w.Total()
	if total == 0 {
		return "etcd writes none"
	}
	s := fmt.Sprintf("etcd writes %d, %s each on average (%s)", total, meanOf(w.WriteSeconds, total), mostFirst(w.Writes, writesListed))
	if w.PodCreates > 0 {
		s += fmt.Sprintf("; pod creates answered in %s on average, %s of it writing to etcd",
			meanOf(w.PodCreateSeconds, w.PodCreates), meanOf(w.PodCreateEtcdSeconds, w.PodCreates))
	}
	return s
}

func meanOf(seconds float64, n int) time.Duration {
	return time.Duration(seconds / float64(n) * float64(time.Second)).Round(100 * time.Microsecond)
}
