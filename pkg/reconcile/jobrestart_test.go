package reconcile

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/trainstep/trainstep/internal/testutil"
	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/frameworks"
	"github.com/trainstep/trainstep/pkg/policy"
)

// ddpJob is a PyTorch DDP job: a master and two workers, restarted as a
// whole by default.
func ddpJob(restartPolicy v1alpha1.RestartPolicy) *v1alpha1.TrainJob {
	two, one, limit := int32(2), int32(1), int32(1)
	container := corev1.PodSpec{Containers: []corev1.Container{{Name: "pytorch", Image: "train:1"}}}
	job := &v1alpha1.TrainJob{
		ObjectMeta: metav1.ObjectMeta{Name: "ddp", Namespace: ns},
		Spec: v1alpha1.TrainJobSpec{Framework: v1alpha1.FrameworkPyTorch, ReplicaSpecs: map[v1alpha1.ReplicaType]*v1alpha1.ReplicaSpec{
			v1alpha1.ReplicaTypeMaster: {Replicas: &one, RestartPolicy: restartPolicy, Template: corev1.PodTemplateSpec{Spec: container}},
			v1alpha1.ReplicaTypeWorker: {Replicas: &two, RestartPolicy: restartPolicy, Template: corev1.PodTemplateSpec{Spec: container}},
		}, RunPolicy: v1alpha1.RunPolicy{BackoffLimit: &limit}},
	}
	frameworks.SetDefaults(job)
	return job
}

func (h *harness) jobAttemptsOf(names ...string) map[string]string {
	out := map[string]string{}
	for _, n := range names {
		if p, err := h.client.CoreV1().Pods(ns).Get(context.Background(), n, metav1.GetOptions{}); err == nil {
			out[n] = p.Labels[v1alpha1.LabelJobAttempt]
		}
	}
	return out
}

var ddpPods = []string{"ddp-master-0", "ddp-worker-0", "ddp-worker-1"}

// One rank killed: every replica is stopped and created again at job
// attempt 1, with one restart counted; the peers that failed after it
// cost nothing.
func TestOneRankKilledRestartsTheWholeJobOnce(t *testing.T) {
	t.Parallel()
	h := start(t, ddpJob(v1alpha1.RestartPolicyExitCode))
	first := map[string]string{}
	for _, n := range ddpPods {
		h.setStatus(n, corev1.PodRunning, 0)
		first[n] = string(h.pod(n).UID)
		if p := h.pod(n); p.Spec.RestartPolicy != corev1.RestartPolicyNever {
			t.Errorf("%s restartPolicy %s, want Never: the job restarts as a whole", n, p.Spec.RestartPolicy)
		}
	}
	master := h.pod("ddp-master-0")
	h.setStatus("ddp-worker-1", corev1.PodFailed, 137)
	// Its collective call broke: the master fails too, unless the job's
	// restart was quicker and already stopped it.
	if err := h.setStatusOf(master, corev1.PodFailed, 1); err != nil && !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	testutil.Eventually(h.t, waitTimeout, "every replica recreated at job attempt 1", func() bool {
		got := h.jobAttemptsOf(ddpPods...)
		for _, n := range ddpPods {
			p, err := h.client.CoreV1().Pods(ns).Get(context.Background(), n, metav1.GetOptions{})
			if err != nil || string(p.UID) == first[n] || got[n] != "1" {
				return false
			}
		}
		return true
	})
	for _, n := range ddpPods {
		h.setStatus(n, corev1.PodRunning, 0)
	}
	h.setStatus("ddp-master-0", corev1.PodSucceeded, 0)
	if d := h.decision(); d.Outcome != policy.OutcomeSucceeded {
		t.Fatalf("decision %+v, want Succeeded", d)
	}
	if r := h.ctrl.View().Restarts; r != 1 {
		t.Errorf("restarts = %d, want 1 for one job restart", r)
	}
}

// A preempted rank (DisruptionTarget, then deleted) restarts the job for
// free under the default rule.
func TestAPreemptedRankRestartsTheJobForFree(t *testing.T) {
	t.Parallel()
	h := start(t, ddpJob(v1alpha1.RestartPolicyExitCode))
	for _, n := range ddpPods {
		h.setStatus(n, corev1.PodRunning, 0)
	}
	testutil.Eventually(h.t, waitTimeout, "the controller to see worker-0", func() bool { return h.stage("ddp-worker-0") == stageObserved })
	pod := h.pod("ddp-worker-0").DeepCopy()
	pod.Status.Conditions = append(pod.Status.Conditions, corev1.PodCondition{Type: "DisruptionTarget", Status: corev1.ConditionTrue, Reason: "PreemptionByScheduler"})
	if _, err := h.client.CoreV1().Pods(ns).UpdateStatus(context.Background(), pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(h.t, waitTimeout, "the condition seen", func() bool {
		h.ctrl.mu.Lock()
		defer h.ctrl.mu.Unlock()
		st := h.ctrl.byName["ddp-worker-0"]
		return st.pod != nil && len(st.pod.Status.Conditions) > 0
	})
	if err := h.client.CoreV1().Pods(ns).Delete(context.Background(), "ddp-worker-0", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(h.t, waitTimeout, "every replica recreated at job attempt 1", func() bool {
		got := h.jobAttemptsOf(ddpPods...)
		return got["ddp-master-0"] == "1" && got["ddp-worker-0"] == "1" && got["ddp-worker-1"] == "1"
	})
	for _, n := range ddpPods {
		h.setStatus(n, corev1.PodRunning, 0)
	}
	h.setStatus("ddp-master-0", corev1.PodSucceeded, 0)
	if d := h.decision(); d.Outcome != policy.OutcomeSucceeded {
		t.Fatalf("decision %+v, want Succeeded", d)
	}
	if r := h.ctrl.View().Restarts; r != 0 {
		t.Errorf("restarts = %d, want 0: a preemption is not the job's fault", r)
	}
}
