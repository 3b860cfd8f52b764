package render_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/trainstep/trainstep/pkg/render"
	"github.com/trainstep/trainstep/pkg/spec"
)

// A PyTorchJob of workers only, without elasticPolicy, gets on every
// container what kubeflow/training-operator v1.9.0 setPodEnv
// (pkg/controller.v1/pytorch/envvar.go) appends when the job has no Master:
// PYTHONUNBUFFERED, PET_NPROC_PER_NODE (nprocPerNode, defaulted to "auto")
// and PET_NNODES (every replica) — no MASTER_ADDR, MASTER_PORT, WORLD_SIZE,
// RANK or PET_NODE_RANK, which it sets only with a Master — and no
// init-pytorch container, which setInitContainer adds only with a Master.
func TestRenderPyTorchJobOfWorkersOnly(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "frameworks", "testdata", "pytorchjob_workers_only.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	job, _, err := spec.Load(data, spec.Options{})
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	objs, err := render.Render(job, identity("kubeflow", job.Name), render.Inputs{})
	if err != nil {
		t.Fatalf("Render: %v", err)
	}
	if diff := cmp.Diff([]string{"pytorch-workers-worker-0", "pytorch-workers-worker-1"}, podNames(objs)); diff != "" {
		t.Fatalf("pods (-want +got):\n%s", diff)
	}
	operator := []corev1.EnvVar{
		{Name: "PYTHONUNBUFFERED", Value: "1"},
		{Name: "PET_NPROC_PER_NODE", Value: "auto"},
		{Name: "PET_NNODES", Value: "2"},
	}
	want := map[string][]corev1.EnvVar{
		"pytorch": append([]corev1.EnvVar{{Name: "LOGLEVEL", Value: "INFO"}}, operator...),
		"metrics": operator,
	}
	for _, pod := range objs.Pods {
		if len(pod.Spec.InitContainers) != 0 {
			t.Errorf("%s has init containers %v, want none", pod.Name, pod.Spec.InitContainers)
		}
		for _, c := range pod.Spec.Containers {
			if diff := cmp.Diff(want[c.Name], withoutTrainstepEnv(c.Env)); diff != "" {
				t.Errorf("%s container %s env (-operator +trainstep):\n%s", pod.Name, c.Name, diff)
			}
		}
	}
}

// withoutTrainstepEnv drops trainstep's own TRAINSTEP_* variables, which
// the operator does not set.
func withoutTrainstepEnv(env []corev1.EnvVar) []corev1.EnvVar {
	var out []corev1.EnvVar
	for _, e := range env {
		if !strings.HasPrefix(e.Name, "TRAINSTEP_") {
			out = append(out, e)
		}
	}
	return out
}
