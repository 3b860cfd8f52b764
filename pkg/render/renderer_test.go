package render_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/render"
)

// Rendering replica by replica with a Renderer gives, byte for byte, the
// objects Render returns, and the package function Pod agrees with both.
func TestRendererMatchesRender(t *testing.T) {
	jobs := []*v1alpha1.TrainJob{
		newJob(v1alpha1.FrameworkTensorFlow, "tf", replicas{chief: 1, ps: 2, worker: 40, evaluator: 1}),
		newJob(v1alpha1.FrameworkPyTorch, "pt", replicas{master: 1, worker: 40}),
		newJob(v1alpha1.FrameworkJAX, "jx", replicas{worker: 40}),
		newJob(v1alpha1.FrameworkXGBoost, "xg", replicas{master: 1, worker: 40}),
		newJob(v1alpha1.FrameworkMPI, "mp", replicas{launcher: 1, worker: 40}),
	}
	for _, job := range jobs {
		t.Run(string(job.Spec.Framework), func(t *testing.T) {
			id := identity("team-a", job.Name)
			want, err := render.Render(job, id, testKeys)
			if err != nil {
				t.Fatalf("Render: %v", err)
			}
			r, err := render.NewRenderer(job, id)
			if err != nil {
				t.Fatalf("NewRenderer: %v", err)
			}
			got, err := r.SharedObjects(testKeys)
			if err != nil {
				t.Fatalf("SharedObjects: %v", err)
			}
			if len(got.Pods) != 0 {
				t.Errorf("SharedObjects returned %d pods, want none", len(got.Pods))
			}
			for _, ref := range r.Replicas() {
				pod, err := r.Pod(ref.Type, ref.Index, 0)
				if err != nil {
					t.Fatalf("Renderer.Pod(%s): %v", ref, err)
				}
				got.Pods = append(got.Pods, pod)
				svc, err := r.Service(ref.Type, ref.Index)
				if err != nil {
					t.Fatalf("Renderer.Service(%s): %v", ref, err)
				}
				if svc != nil {
					got.Services = append(got.Services, svc)
				}
				single, err := render.Pod(job, id, ref.Type, ref.Index, 0)
				if err != nil {
					t.Fatalf("Pod(%s): %v", ref, err)
				}
				if diff := cmp.Diff(encode(t, single), encode(t, pod)); diff != "" {
					t.Fatalf("%s: Renderer.Pod differs from Pod (-Pod +Renderer.Pod):\n%s", ref, diff)
				}
			}
			if diff := cmp.Diff(encodeAll(t, want.List()), encodeAll(t, got.List())); diff != "" {
				t.Errorf("objects (-Render +Renderer):\n%s", diff)
			}
		})
	}
}

// A recreated replica's pod differs only in its attempt label.
func TestRendererPodAttempt(t *testing.T) {
	job := newJob(v1alpha1.FrameworkTensorFlow, "tf", replicas{ps: 1, worker: 3})
	r, err := render.NewRenderer(job, identity("ns", "tf"))
	if err != nil {
		t.Fatalf("NewRenderer: %v", err)
	}
	first, err := r.Pod(worker, 2, 0)
	if err != nil {
		t.Fatal(err)
	}
	again, err := r.Pod(worker, 2, 3)
	if err != nil {
		t.Fatal(err)
	}
	if got := again.Labels[v1alpha1.LabelAttempt]; got != "3" {
		t.Errorf("attempt label = %q, want 3", got)
	}
	again.Labels[v1alpha1.LabelAttempt] = "0"
	if diff := cmp.Diff(first, again); diff != "" {
		t.Errorf("recreated pod differs beyond its attempt (-first +again):\n%s", diff)
	}
}

// Objects of one Renderer share nothing a caller may change: changing one
// rendered pod or Service must not change the next.
func TestRendererObjectsAreIndependent(t *testing.T) {
	job := newJob(v1alpha1.FrameworkPyTorch, "pt", replicas{master: 1, worker: 2}, func(j *v1alpha1.TrainJob) {
		j.Spec.RunPolicy.SchedulingPolicy = &v1alpha1.SchedulingPolicy{Gang: v1alpha1.GangBuiltin}
	}, perReplica)
	r, err := render.NewRenderer(job, identity("ns", "pt"))
	if err != nil {
		t.Fatalf("NewRenderer: %v", err)
	}
	before, err := r.Pod(worker, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	svcBefore, err := r.Service(worker, 1)
	if err != nil {
		t.Fatal(err)
	}
	changed, err := r.Pod(worker, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	changed.Labels["x"] = "y"
	changed.OwnerReferences[0].Name = "other"
	*changed.OwnerReferences[0].Controller = false
	changed.Spec.SchedulingGates[0].Name = "other"
	for i := range changed.Spec.Containers[0].Env {
		changed.Spec.Containers[0].Env[i].Value = "changed"
	}
	changedSvc, err := r.Service(worker, 0)
	if err != nil {
		t.Fatal(err)
	}
	changedSvc.Spec.Ports[0].Port = 1
	changedSvc.Spec.Selector["x"] = "y"

	after, err := r.Pod(worker, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	svcAfter, err := r.Service(worker, 1)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(before, after); diff != "" {
		t.Errorf("pod changed through another pod (-before +after):\n%s", diff)
	}
	if diff := cmp.Diff(svcBefore, svcAfter); diff != "" {
		t.Errorf("service changed through another service (-before +after):\n%s", diff)
	}
}

// Rendering one pod of a prepared job allocates as often at 2048 workers as
// at 128: the work per pod does not grow with the job (TF_CONFIG's cluster
// is built once, in NewRenderer). Both render worker 100: strconv formats
// numbers below 100 without allocating.
func TestRendererPodAllocationsDoNotGrowWithJob(t *testing.T) {
	allocsPerPod := func(workers int32) float64 {
		job := newJob(v1alpha1.FrameworkTensorFlow, "tf", replicas{ps: 1, worker: workers})
		r, err := render.NewRenderer(job, identity("ns", "tf"))
		if err != nil {
			t.Fatalf("NewRenderer: %v", err)
		}
		return testing.AllocsPerRun(20, func() {
			if _, err := r.Pod(worker, 100, 0); err != nil {
				t.Fatal(err)
			}
		})
	}
	small, large := allocsPerPod(128), allocsPerPod(2048)
	if large > small {
		t.Errorf("rendering one pod: %.0f allocations at 2048 workers, %.0f at 128; want no more", large, small)
	}
}

func encode(t *testing.T, obj any) string {
	t.Helper()
	data, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func encodeAll(t *testing.T, objs []runtime.Object) []string {
	t.Helper()
	out := make([]string, len(objs))
	for i, obj := range objs {
		out[i] = encode(t, obj)
	}
	return out
}

// MPI's hostfile ConfigMap names every worker in full: with long names a
// large job's no longer fits the API server's 1 MiB, and rendering says so
// instead of failing halfway through creating the job.
func TestRenderRefusesConfigMapOverTheAPILimit(t *testing.T) {
	long := strings.Repeat("a", 40)
	for _, tc := range []struct {
		name, job, namespace string
		wantErr              bool
	}{
		{name: "short names", job: "ts-0123456789", namespace: "default"},                  // 477 KB
		{name: "long names", job: long, namespace: strings.Repeat("n", 63), wantErr: true}, // 1.38 MB
	} {
		t.Run(tc.name, func(t *testing.T) {
			job := newJob(v1alpha1.FrameworkMPI, tc.job, replicas{launcher: 1, worker: 4095})
			_, err := render.Render(job, identity(tc.namespace, tc.job), testKeys)
			if gotErr := err != nil; gotErr != tc.wantErr {
				t.Fatalf("Render error = %v, want error: %v", err, tc.wantErr)
			}
			if err != nil && (!strings.Contains(err.Error(), tc.job+"-config") || !strings.Contains(err.Error(), "1048576")) {
				t.Errorf("error %v does not name the ConfigMap and the limit", err)
			}
		})
	}
}

// A Renderer renders with the identity it was given: the caller changing
// its labels or owner afterwards changes nothing.
func TestRendererKeepsItsIdentity(t *testing.T) {
	job := newJob(v1alpha1.FrameworkJAX, "jx", replicas{worker: 2})
	id := identity("ns", "jx")
	id.Owner = owner.DeepCopy()
	r, err := render.NewRenderer(job, id)
	if err != nil {
		t.Fatalf("NewRenderer: %v", err)
	}
	before, err := r.Pod(worker, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	id.Labels["extra"] = "late"
	id.Owner.Name = "someone-else"
	after, err := r.Pod(worker, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(before, after); diff != "" {
		t.Errorf("pod changed with the caller's identity (-before +after):\n%s", diff)
	}
}
