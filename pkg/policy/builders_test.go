package policy

import (
	"time"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func ptr[T any](v T) *T { return &v }

// jobWith builds a defaulted-looking job with the given replica counts and restart policy.
func jobWith(fw v1alpha1.Framework, policy v1alpha1.RestartPolicy, counts map[v1alpha1.ReplicaType]int32) *v1alpha1.TrainJob {
	job := &v1alpha1.TrainJob{Spec: v1alpha1.TrainJobSpec{Framework: fw, ReplicaSpecs: map[v1alpha1.ReplicaType]*v1alpha1.ReplicaSpec{}}}
	for t, n := range counts {
		job.Spec.ReplicaSpecs[t] = &v1alpha1.ReplicaSpec{Replicas: ptr(n), RestartPolicy: policy}
	}
	return job
}

// viewOf returns a view where every desired replica is Running, then applies edits.
func viewOf(job *v1alpha1.TrainJob, edits ...func(*View)) *View {
	v := &View{Job: job, StartTime: t0, Now: t0.Add(time.Minute)}
	for _, id := range Desired(job) {
		v.Replicas = append(v.Replicas, Replica{ReplicaID: id, Phase: PhaseRunning})
	}
	for _, e := range edits {
		e(v)
	}
	return v
}

func set(t v1alpha1.ReplicaType, i int, f func(*Replica)) func(*View) {
	return func(v *View) { f(v.Replica(ReplicaID{Type: t, Index: i})) }
}

func exited(code int32) func(*Replica) {
	return func(r *Replica) {
		r.ExitCode = ptr(code)
		if code == 0 {
			r.Phase = PhaseSucceeded
		} else {
			r.Phase = PhaseFailed
		}
	}
}
