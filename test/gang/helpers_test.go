package gang_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/trainstep/trainstep/executor"
	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/replicapolicy"
	"github.com/trainstep/trainstep/pkg/result"
	"github.com/trainstep/trainstep/pkg/spec"
	"github.com/trainstep/trainstep/test/cluster"
)

// KWOK Stage annotations of the test cluster.
const (
	exitAfter = cluster.AnnotationExitAfter
	exitCode  = cluster.AnnotationExitCode
	poolKey   = "trainstep.dev/test-pool"
)

// addPool adds n KWOK nodes with gpus GPUs each, labelled and tainted with
// pool, and removes them when the test ends.
func addPool(t *testing.T, c *cluster.Cluster, pool string, n int, gpus int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("%s-%d", pool, i)
		err := c.AddNode(ctx, name, cluster.NodeCapacity("8", "32Gi", 110, gpus),
			cluster.WithNodeLabels(map[string]string{poolKey: pool}),
			cluster.WithNodeTaints(corev1.Taint{Key: poolKey, Value: pool, Effect: corev1.TaintEffectNoSchedule}))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Client.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{}) })
	}
}

// gpuJob is a TensorFlow job of n Workers, each asking for one GPU on pool's nodes.
func gpuJob(name, pool string, n int32, sp *v1alpha1.SchedulingPolicy) *v1alpha1.TrainJob {
	return &v1alpha1.TrainJob{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.APIVersion, Kind: v1alpha1.Kind},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.TrainJobSpec{
			Framework: v1alpha1.FrameworkTensorFlow,
			ReplicaSpecs: map[v1alpha1.ReplicaType]*v1alpha1.ReplicaSpec{
				v1alpha1.ReplicaTypeWorker: {Replicas: ptr.To(n), Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
					NodeSelector: map[string]string{poolKey: pool},
					Tolerations:  []corev1.Toleration{{Key: poolKey, Operator: corev1.TolerationOpEqual, Value: pool, Effect: corev1.TaintEffectNoSchedule}},
					Containers: []corev1.Container{{
						Name: "tensorflow", Image: "registry.example/train:1",
						Resources: corev1.ResourceRequirements{
							Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), cluster.ResourceGPU: resource.MustParse("1")},
							Limits:   corev1.ResourceList{cluster.ResourceGPU: resource.MustParse("1")},
						},
					}},
				}}},
			},
			RunPolicy: v1alpha1.RunPolicy{SchedulingPolicy: sp, BackoffLimit: ptr.To[int32](10)},
		},
	}
}

func manifest(t testing.TB, job *v1alpha1.TrainJob) []byte {
	t.Helper()
	out, err := yaml.Marshal(job)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// run is one in-process trainstep run.
type run struct {
	done    chan struct{}
	res     result.Result
	err     error
	signals chan os.Signal
	// log holds the run's log entries, beside the test's log.
	log *observer.ObservedLogs
}

// startRun runs the executor in the background.
func startRun(t *testing.T, c *cluster.Cluster, ns string, job *v1alpha1.TrainJob, edits ...func(*executor.Config)) *run {
	t.Helper()
	return startManifest(t, c, ns, job.Name, manifest(t, job), edits...)
}

// startManifest runs the executor on a manifest as written (a Kubeflow
// kind, say) in the background.
func startManifest(t *testing.T, c *cluster.Cluster, ns, name string, manifest []byte, edits ...func(*executor.Config)) *run {
	t.Helper()
	observed, log := observer.New(zapcore.InfoLevel)
	r := &run{done: make(chan struct{}), signals: make(chan os.Signal, 1), log: log}
	tee := zaptest.WrapOptions(zap.WrapCore(func(c zapcore.Core) zapcore.Core { return zapcore.NewTee(c, observed) }))
	cfg := executor.Config{
		Spec: manifest, Kubeconfig: c.Kubeconfig, PodNamespace: ns,
		QPS: 200, Burst: 400, OutputsDir: t.TempDir(),
		APITimeout: 30 * time.Second, TerminationGrace: 30 * time.Second,
		Logger: zaptest.NewLogger(t, tee).Named(name), Signals: r.signals,
		// The tests' own priority classes, as a namespace's settings would allow them.
		SpecOptions: spec.Options{Policy: replicapolicy.Policy{PriorityClasses: []string{"*"}}},
	}
	for _, e := range edits {
		e(&cfg)
	}
	go func() {
		defer close(r.done)
		ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
		defer cancel()
		r.res, r.err = executor.Run(ctx, cfg)
	}()
	return r
}

// wait returns the run's result once it ended.
func (r *run) wait(t *testing.T) result.Result {
	t.Helper()
	select {
	case <-r.done:
		return r.res
	case <-time.After(4 * time.Minute):
		t.Fatal("the run did not end within 4 minutes")
		return result.Result{}
	}
}

func (r *run) terminate() { r.signals <- syscall.SIGTERM }

// slowCreates makes a run create its pods one at a time at 5 per second,
// so that two runs started together interleave their creates.
func slowCreates(cfg *executor.Config) { cfg.QPS, cfg.Burst = 5, 1 }

// jobPods lists the job's pods not being deleted.
func jobPods(t *testing.T, c *cluster.Cluster, ns, job string) []corev1.Pod {
	t.Helper()
	list, err := c.Client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: v1alpha1.LabelJobName + "=" + job})
	if err != nil {
		t.Fatal(err)
	}
	var out []corev1.Pod
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	return out
}

func countPods(pods []corev1.Pod, f func(*corev1.Pod) bool) int {
	n := 0
	for i := range pods {
		if f(&pods[i]) {
			n++
		}
	}
	return n
}

func bound(p *corev1.Pod) bool   { return p.Spec.NodeName != "" }
func running(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning }

// unschedulable is a pod the scheduler tried and found no node for.
func unschedulable(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled {
			return c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable
		}
	}
	return false
}

// exitAll makes every live pod of job exit 0 shortly after it runs.
func exitAll(t *testing.T, c *cluster.Cluster, ns, job string) {
	t.Helper()
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:"500ms",%q:"0"}}}`, exitAfter, exitCode)
	for _, p := range jobPods(t, c, ns, job) {
		if _, err := c.Client.CoreV1().Pods(ns).Patch(context.Background(), p.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatalf("patching %s: %v", p.Name, err)
		}
	}
}

// holdTracker measures, per job, the longest stretch during which the job
// held some but not all of its pods bound.
type holdTracker struct {
	mu      sync.Mutex
	since   map[string]time.Time
	longest map[string]time.Duration
}

func (h *holdTracker) observe(job string, boundPods, want int, now time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	partial := boundPods > 0 && boundPods < want
	start, holding := h.since[job]
	switch {
	case partial && !holding:
		h.since[job] = now
	case !partial && holding:
		delete(h.since, job)
	case partial:
		h.longest[job] = max(h.longest[job], now.Sub(start))
	}
}

func names(pods []corev1.Pod) string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Name+"@"+p.Spec.NodeName)
	}
	return strings.Join(out, " ")
}

// preemptions counts the Preempted Events of a job's pods: how many pods
// (by UID) the scheduler preempted, and how many times it preempted one of
// them again. kube-scheduler (and the schedulers built on its framework)
// deletes a victim by name: a second preemption of a pod it already
// preempted, from a cache not yet showing it gone, removes the replacement
// of that name without marking it, a removal the policy must count. Only
// those may cost the job a restart.
func preemptions(t *testing.T, c *cluster.Cluster, ns, job string) (pods, again int) {
	t.Helper()
	events, err := c.Client.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{FieldSelector: "reason=Preempted"})
	if err != nil {
		t.Fatal(err)
	}
	byUID := map[string]int{}
	for _, e := range events.Items {
		if strings.HasPrefix(e.InvolvedObject.Name, job+"-") {
			byUID[string(e.InvolvedObject.UID)] += int(max(e.Count, 1))
		}
	}
	for _, n := range byUID {
		again += n - 1
	}
	return len(byUID), again
}
