package reconcile

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/trainstep/trainstep/internal/testutil"
	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/frameworks"
	"github.com/trainstep/trainstep/pkg/policy"
	"github.com/trainstep/trainstep/pkg/result"
)

// elasticJob is a PyTorch job of workers only, elastic between lo and hi,
// asking for replicas workers.
func elasticJob(replicas, lo, hi int32) *v1alpha1.TrainJob {
	container := corev1.PodSpec{Containers: []corev1.Container{{Name: "pytorch", Image: "train:1"}}}
	job := &v1alpha1.TrainJob{
		ObjectMeta: metav1.ObjectMeta{Name: "el", Namespace: ns},
		Spec: v1alpha1.TrainJobSpec{Framework: v1alpha1.FrameworkPyTorch,
			ElasticPolicy: &v1alpha1.ElasticPolicy{MinReplicas: &lo, MaxReplicas: &hi},
			ReplicaSpecs: map[v1alpha1.ReplicaType]*v1alpha1.ReplicaSpec{
				v1alpha1.ReplicaTypeWorker: {Replicas: &replicas, RestartPolicy: v1alpha1.RestartPolicyExitCode,
					Template: corev1.PodTemplateSpec{Spec: container}},
			}},
	}
	frameworks.SetDefaults(job)
	return job
}

// setUnschedulable plays the scheduler: the pod stays Pending, unplaced.
func (h *harness) setUnschedulable(name string) {
	h.t.Helper()
	pod := h.pod(name).DeepCopy()
	pod.CreationTimestamp = metav1.Now() // the fake API server sets none
	pod.Status.Phase = corev1.PodPending
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable}}
	if _, err := h.client.CoreV1().Pods(ns).UpdateStatus(context.Background(), pod, metav1.UpdateOptions{}); err != nil {
		h.t.Fatal(err)
	}
}

// An elastic job asking for 2 workers between 2 and 4 gets a pod for every
// slot up to 4. With 2 running and 2 unplaceable it runs on past the
// pending timeout, saying so; a third placed raises the world size; the
// first worker to succeed ends the job, and replicas.json's world sizes
// are those the workers last ran in.
func TestElasticJobGrowsIntoCapacityAndWaitsPastThePendingTimeout(t *testing.T) {
	var progress <-chan string
	var syncs atomic.Int32
	h := startWith(t, elasticJob(2, 2, 4), func(_ *harness, o *Options) {
		progress = progressLines(o)
		o.Timeouts.Pending = 200 * time.Millisecond
		o.BeforeSync = func() { syncs.Add(1) }
	})
	h.setStatus("el-worker-0", corev1.PodRunning, 0)
	h.setStatus("el-worker-1", corev1.PodRunning, 0)
	h.setUnschedulable("el-worker-2")
	h.setUnschedulable("el-worker-3")
	waitProgress(t, progress, "worker 2/4 running (elastic 2..4), 2 waiting for capacity")
	// Syncs after the pending timeout decide nothing: two updates past it
	// each bring one, and the second begins only once the first ended (one
	// worker), with no decision.
	timedOut := time.Now().Add(200 * time.Millisecond)
	testutil.Eventually(t, waitTimeout, "the pending timeout to pass", func() bool { return time.Now().After(timedOut) })
	for range 2 {
		n := syncs.Load()
		h.setStatus("el-worker-0", corev1.PodRunning, 0)
		testutil.Eventually(t, waitTimeout, "a sync after the pending timeout", func() bool { return syncs.Load() > n })
	}
	select {
	case d := <-h.done:
		t.Fatalf("decision %+v while 2 of minReplicas 2 ran, want the job to go on", d)
	default:
	}
	h.setStatus("el-worker-2", corev1.PodRunning, 0)
	waitProgress(t, progress, "worker 3/4 running (elastic 2..4), 1 waiting for capacity")
	h.setStatus("el-worker-1", corev1.PodSucceeded, 0)
	if d := h.decision(); d.Outcome != policy.OutcomeSucceeded {
		t.Fatalf("decision %+v, want Succeeded", d)
	}
	view := h.ctrl.View()
	if view.Restarts != 0 {
		t.Errorf("restarts = %d, want 0: waiting for capacity is no restart", view.Restarts)
	}
	sizes := map[int]int{}
	for _, r := range view.Replicas {
		sizes[r.Index] = r.WorldSize
	}
	if sizes[0] != 3 || sizes[2] != 3 || sizes[3] != 0 {
		t.Errorf("world sizes by worker = %v, want 3 for workers 0 and 2 and none for worker 3, which never ran", sizes)
	}
}

// Below minReplicas with workers waiting for capacity, the job ends
// Transient once the pending timeout passed since it fell short.
func TestElasticJobShortOfMinReplicasIsTransientAtThePendingTimeout(t *testing.T) {
	h := startWith(t, elasticJob(3, 2, 3), func(_ *harness, o *Options) {
		o.Timeouts.Pending = 300 * time.Millisecond
	})
	h.setStatus("el-worker-0", corev1.PodRunning, 0)
	h.setUnschedulable("el-worker-1")
	h.setUnschedulable("el-worker-2")
	d := h.decision()
	if d.Outcome != policy.OutcomeTransient || d.Reason != result.ReasonPendingTimeout {
		t.Fatalf("decision %+v, want Transient PendingTimeout", d)
	}
	if want := "only 1 of the 2 workers"; !containsAll(d.Message, []string{want}) {
		t.Errorf("message %q, want it to say %q", d.Message, want)
	}
}

// A worker evicted (DisruptionTarget, then deleted) while enough others run
// is recreated for free; the job succeeds with 0 restarts.
func TestElasticWorkerLostToADisruptionIsRecreatedForFree(t *testing.T) {
	h := start(t, elasticJob(3, 2, 3))
	for i := range 3 {
		h.setStatus(fmt.Sprintf("el-worker-%d", i), corev1.PodRunning, 0)
	}
	testutil.Eventually(h.t, waitTimeout, "the controller to see worker-2", func() bool { return h.stage("el-worker-2") == stageObserved })
	pod := h.pod("el-worker-2").DeepCopy()
	pod.Status.Conditions = append(pod.Status.Conditions, corev1.PodCondition{Type: "DisruptionTarget", Status: corev1.ConditionTrue, Reason: "EvictionByEvictionAPI"})
	if _, err := h.client.CoreV1().Pods(ns).UpdateStatus(context.Background(), pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(h.t, waitTimeout, "the condition seen", func() bool {
		h.ctrl.mu.Lock()
		defer h.ctrl.mu.Unlock()
		st := h.ctrl.byName["el-worker-2"]
		return st.pod != nil && len(st.pod.Status.Conditions) > 0
	})
	if err := h.client.CoreV1().Pods(ns).Delete(context.Background(), "el-worker-2", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(h.t, waitTimeout, "worker-2 recreated with attempt 1", func() bool {
		p, err := h.client.CoreV1().Pods(ns).Get(context.Background(), "el-worker-2", metav1.GetOptions{})
		return err == nil && p.Labels[v1alpha1.LabelAttempt] == "1"
	})
	h.setStatus("el-worker-0", corev1.PodSucceeded, 0)
	if d := h.decision(); d.Outcome != policy.OutcomeSucceeded {
		t.Fatalf("decision %+v, want Succeeded", d)
	}
	if r := h.ctrl.View().Restarts; r != 0 {
		t.Errorf("restarts = %d, want 0: an eviction is not the job's fault", r)
	}
}

// A worker the job carried on without (exit 1, minReplicas others
// running) whose ended pod is then removed, as the pod garbage collector
// removes ended pods (no DisruptionTarget on a pod that already ended), is
// judged by its end: not brought back, and no restart counted.
func TestElasticWorkerCarriedOnWithoutStaysSoWhenItsEndedPodIsRemoved(t *testing.T) {
	h := start(t, elasticJob(3, 2, 3))
	for i := range 3 {
		h.setStatus(fmt.Sprintf("el-worker-%d", i), corev1.PodRunning, 0)
	}
	h.endThenRemove("el-worker-2", corev1.PodFailed, 1)
	// A sync after the removal decides on it; then the job ends.
	h.setStatus("el-worker-1", corev1.PodRunning, 0)
	h.setStatus("el-worker-0", corev1.PodSucceeded, 0)
	if d := h.decision(); d.Outcome != policy.OutcomeSucceeded {
		t.Fatalf("decision %+v, want Succeeded", d)
	}
	if _, err := h.client.CoreV1().Pods(ns).Get(context.Background(), "el-worker-2", metav1.GetOptions{}); err == nil {
		t.Error("worker-2 was created again: the removal of its ended pod was taken for a loss")
	}
	if r := h.ctrl.View().Restarts; r != 0 {
		t.Errorf("restarts = %d, want 0: the job carried on without worker-2, and its pod's removal is no failure", r)
	}
}
