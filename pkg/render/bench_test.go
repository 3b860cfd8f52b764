package render_test

import (
	"fmt"
	"testing"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/render"
)

// benchWorkers are the job sizes the benchmarks render: the largest job of
// make bench and the largest the project runs on one step.
var benchWorkers = []int32{512, 2048}

// BenchmarkRenderTensorFlow renders every object of a TensorFlow job of one
// PS and N workers, the work `trainstep run` does before it creates anything.
func BenchmarkRenderTensorFlow(b *testing.B) {
	for _, n := range benchWorkers {
		job := newJob(v1alpha1.FrameworkTensorFlow, "ts-0123456789", replicas{ps: 1, worker: n})
		id := identity("team-a", "ts-0123456789")
		b.Run(fmt.Sprintf("workers=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := render.Render(job, id, render.Inputs{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkRendererTensorFlow renders the same job's pods one at a time with
// one Renderer, dropping each, as a controller creating them does.
func BenchmarkRendererTensorFlow(b *testing.B) {
	for _, n := range benchWorkers {
		job := newJob(v1alpha1.FrameworkTensorFlow, "ts-0123456789", replicas{ps: 1, worker: n})
		id := identity("team-a", "ts-0123456789")
		b.Run(fmt.Sprintf("workers=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				r, err := render.NewRenderer(job, id)
				if err != nil {
					b.Fatal(err)
				}
				for _, ref := range r.Replicas() {
					if _, err := r.Pod(ref.Type, ref.Index, 0); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}
