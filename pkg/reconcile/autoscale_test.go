package reconcile

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stesting "k8s.io/client-go/testing"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/trainstep/trainstep/internal/testutil"
	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/policy"
)

// fakePodMetrics plays metrics.k8s.io: every listed pod uses cpu millicores.
type fakePodMetrics struct {
	mu    sync.Mutex
	usage map[string]int64
}

func (f *fakePodMetrics) set(millicores int64, pods ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, p := range pods {
		f.usage[p] = millicores
	}
}

func (f *fakePodMetrics) List(_ context.Context, namespace string, _ metav1.ListOptions) (*metricsv1beta1.PodMetricsList, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	list := &metricsv1beta1.PodMetricsList{}
	for name, m := range f.usage {
		list.Items = append(list.Items, metricsv1beta1.PodMetrics{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
			Containers: []metricsv1beta1.ContainerMetrics{{Name: "pytorch", Usage: corev1.ResourceList{corev1.ResourceCPU: *resource.NewMilliQuantity(m, resource.DecimalSI)}}}})
	}
	return list, nil
}

// waitCachedReady waits until the controller's cache holds the pods Ready:
// the autoscaler reads readiness from it.
func (h *harness) waitCachedReady(names ...string) {
	h.t.Helper()
	testutil.Eventually(h.t, waitTimeout, "the cache to hold the workers Ready", func() bool {
		for _, name := range names {
			p, err := h.ctrl.pods.Pods(ns).Get(name)
			if err != nil || !podReady(p) {
				return false
			}
		}
		return true
	})
}

// waitCachedGone waits until the controller's cache no longer holds the pods.
func (h *harness) waitCachedGone(names ...string) {
	h.t.Helper()
	testutil.Eventually(h.t, waitTimeout, "the cache to drop the removed workers", func() bool {
		for _, name := range names {
			if _, err := h.ctrl.pods.Pods(ns).Get(name); err == nil {
				return false
			}
		}
		return true
	})
}

func (h *harness) waitGone(name string) {
	h.t.Helper()
	testutil.Eventually(h.t, waitTimeout, "pod "+name+" to be deleted", func() bool {
		_, err := h.client.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
}

// With elasticPolicy.metrics (cpu at 50% of the request) an elastic 2..4
// job starts with Worker.replicas workers; at twice the target it grows to
// 4 at once; below the target it keeps 4 for the 5-minute stabilisation
// window, then removes workers 3 and 2 — no restart — and creates them
// again when the usage climbs back.
func TestElasticWorkersFollowTheHPAFormulaWithinTheBounds(t *testing.T) {
	job := onCPUUtilization(elasticJob(2, 2, 4), 50)
	job.Spec.ReplicaSpecs["Worker"].Template.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}
	clock := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	var progress <-chan string
	h := startWith(t, job, func(_ *harness, o *Options) {
		o.Clock = clock
		progress = progressLines(o)
	})
	metrics := &fakePodMetrics{usage: map[string]int64{}}
	evaluate := func(after time.Duration) {
		clock.Step(after)
		h.ctrl.evaluateMetrics(context.Background(), metrics)
	}
	h.setReady("el-worker-0", corev1.PodRunning, true)
	h.setReady("el-worker-1", corev1.PodRunning, true)
	if got := h.ctrl.WorkerTarget(); got != 2 {
		t.Fatalf("worker target %d at the start, want Worker.replicas 2", got)
	}
	if _, err := h.client.CoreV1().Pods(ns).Get(context.Background(), "el-worker-2", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("worker 2 exists before the metrics asked for it (%v)", err)
	}

	h.waitCachedReady("el-worker-0", "el-worker-1")
	metrics.set(1000, "el-worker-0", "el-worker-1") // 100% of the request: ratio 2
	evaluate(15 * time.Second)
	if got := h.ctrl.WorkerTarget(); got != 4 {
		t.Fatalf("worker target %d at twice the target usage, want ceil(2 × 2) = 4", got)
	}
	h.setReady("el-worker-2", corev1.PodRunning, true)
	h.setReady("el-worker-3", corev1.PodRunning, true)
	waitProgress(t, progress, "worker 4/4 running (elastic 2..4), metrics' target 4")

	h.waitCachedReady("el-worker-0", "el-worker-1", "el-worker-2", "el-worker-3")
	metrics.set(100, "el-worker-0", "el-worker-1", "el-worker-2", "el-worker-3") // 10%: ratio 0.2
	evaluate(15 * time.Second)
	evaluate(4 * time.Minute)
	if got := h.ctrl.WorkerTarget(); got != 4 {
		t.Fatalf("worker target %d within 5 minutes of the recommendation of 4, want 4", got)
	}
	evaluate(time.Minute)
	if got := h.ctrl.WorkerTarget(); got != 2 {
		t.Fatalf("worker target %d past the stabilisation window, want minReplicas 2 (ceil(0.2 × 4) = 1)", got)
	}
	h.waitGone("el-worker-3")
	h.waitGone("el-worker-2")
	if _, err := h.client.CoreV1().Pods(ns).Get(context.Background(), "el-worker-1", metav1.GetOptions{}); err != nil {
		t.Fatalf("worker 1 is gone: %v", err)
	}

	metrics.set(600, "el-worker-0", "el-worker-1") // 60%: ratio 1.2, ceil(2.4) = 3
	h.waitCachedGone("el-worker-2", "el-worker-3")
	evaluate(15 * time.Second)
	if got := h.ctrl.WorkerTarget(); got != 3 {
		t.Fatalf("worker target %d at 60%% of the request, want 3", got)
	}
	h.setReady("el-worker-2", corev1.PodRunning, true)

	h.setStatus("el-worker-0", corev1.PodSucceeded, 0)
	if d := h.decision(); d.Outcome != policy.OutcomeSucceeded {
		t.Fatalf("decision %+v, want Succeeded", d)
	}
	if r := h.ctrl.View().Restarts; r != 0 {
		t.Errorf("restarts = %d, want 0: a worker removed for the metrics is no restart", r)
	}
	if _, err := h.client.CoreV1().Pods(ns).Get(context.Background(), "el-worker-3", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("worker 3 exists above the target of 3 (%v)", err)
	}
}

// A new worker target is written to the job's Service before it is acted
// on; while that write is refused the target stays, and no worker is
// created for the one that could not be recorded.
func TestTheWorkerTargetIsTakenOnlyOnceRecorded(t *testing.T) {
	job := onCPUUtilization(elasticJob(2, 2, 4), 50)
	job.Spec.ReplicaSpecs["Worker"].Template.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}
	clock := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	var refuse atomic.Bool
	refuse.Store(true)
	h := startWith(t, job, func(h *harness, o *Options) {
		o.Clock = clock
		h.client.PrependReactor("patch", "services", func(action k8stesting.Action) (bool, runtime.Object, error) {
			if !refuse.Load() {
				return false, nil, nil
			}
			return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "services"}, action.(k8stesting.PatchAction).GetName(), errors.New("patch refused"))
		})
	})
	metrics := &fakePodMetrics{usage: map[string]int64{}}
	h.setReady("el-worker-0", corev1.PodRunning, true)
	h.setReady("el-worker-1", corev1.PodRunning, true)
	h.waitCachedReady("el-worker-0", "el-worker-1")
	metrics.set(1000, "el-worker-0", "el-worker-1") // ratio 2: 4 workers

	clock.Step(15 * time.Second)
	h.ctrl.evaluateMetrics(context.Background(), metrics)
	if got := h.ctrl.WorkerTarget(); got != 2 {
		t.Fatalf("worker target %d while its write is refused, want 2 as it was", got)
	}
	if _, err := h.client.CoreV1().Pods(ns).Get(context.Background(), "el-worker-2", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("worker 2 exists for a target that was not recorded (%v)", err)
	}

	refuse.Store(false)
	clock.Step(15 * time.Second)
	h.ctrl.evaluateMetrics(context.Background(), metrics)
	if got := h.ctrl.WorkerTarget(); got != 4 {
		t.Fatalf("worker target %d once its write lands, want 4", got)
	}
	svc, err := h.client.CoreV1().Services(ns).Get(context.Background(), "el", metav1.GetOptions{})
	if err != nil || svc.Annotations[v1alpha1.AnnotationWorkerTarget] != "4" {
		t.Fatalf("the job's Service records worker target %q (%v), want 4", svc.Annotations[v1alpha1.AnnotationWorkerTarget], err)
	}
	testutil.Eventually(t, waitTimeout, "workers 2 and 3 to be created", func() bool {
		_, err2 := h.client.CoreV1().Pods(ns).Get(context.Background(), "el-worker-2", metav1.GetOptions{})
		_, err3 := h.client.CoreV1().Pods(ns).Get(context.Background(), "el-worker-3", metav1.GetOptions{})
		return err2 == nil && err3 == nil
	})
}

func TestPodRequestsSumsTheContainersAsTheHPADoes(t *testing.T) {
	spec := &corev1.PodSpec{
		InitContainers: []corev1.Container{{Name: "init", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8")}}}},
		Containers: []corev1.Container{
			{Name: "pytorch", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("1Gi")}}},
			// A limit alone is the request.
			{Name: "sidecar", Resources: corev1.ResourceRequirements{
				Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}},
		},
	}
	got := podRequests(spec)
	if got[corev1.ResourceCPU] != 1500 || got[corev1.ResourceMemory] != 1024*1024*1024*1000 || len(got) != 2 {
		t.Errorf("podRequests = %v, want cpu 1500m and memory 1Gi in milli-units, the init container left out", got)
	}
}

// onCPUUtilization makes an elastic job scale on its workers' CPU
// utilization, aiming at percent.
func onCPUUtilization(job *v1alpha1.TrainJob, percent int32) *v1alpha1.TrainJob {
	job.Spec.ElasticPolicy.Metrics = []autoscalingv2.MetricSpec{{Type: autoscalingv2.ResourceMetricSourceType,
		Resource: &autoscalingv2.ResourceMetricSource{Name: corev1.ResourceCPU,
			Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: &percent}}}}
	job.Spec.ElasticPolicy.GrowIntoCapacity = nil // the metrics decide
	return job
}
