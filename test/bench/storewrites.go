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
	err := eachSample(metrics, "etcd_request_duration_seconds_count", func(labels map[string]string, n float64) {
		if etcdWrites[labels["operation"]] {
			w.Writes[resourceOf(labels)] += int(n)
		}
	})
	if err != nil {
		return w, err
	}
	err = eachSample(metrics, "etcd_request_duration_seconds_sum", func(labels map[string]string, s float64) {
		if !etcdWrites[labels["operation"]] {
			return
		}
		w.WriteSeconds += s
		if labels["operation"] == "create" && resourceOf(labels) == "pods" {
			w.PodCreateEtcdSeconds += s
		}
	})
	if err != nil {
		return w, err
	}
	podCreate := func(labels map[string]string) bool {
		return labels["verb"] == "POST" && resourceOf(labels) == "pods" && labels["subresource"] == ""
	}
	err = eachSample(metrics, "apiserver_request_duration_seconds_count", func(labels map[string]string, n float64) {
		if podCreate(labels) {
			w.PodCreates += int(n)
		}
	})
	if err != nil {
		return w, err
	}
	err = eachSample(metrics, "apiserver_request_duration_seconds_sum", func(labels map[string]string, s float64) {
		if podCreate(labels) {
			w.PodCreateSeconds += s
		}
	})
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
