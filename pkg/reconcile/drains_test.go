package reconcile

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/trainstep/trainstep/internal/testutil"
	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
)

// ranksDeleted reports whether every rank of the first attempt is being
// deleted or gone (uids: the first attempt's instances).
func (h *harness) ranksDeleted(uids map[string]string) bool {
	for n, uid := range uids {
		p, err := h.client.CoreV1().Pods(ns).Get(context.Background(), n, metav1.GetOptions{})
		if err == nil && string(p.UID) == uid && p.DeletionTimestamp == nil {
			return false
		}
	}
	return true
}

func (h *harness) runningRanks() map[string]string {
	uids := map[string]string{}
	for _, n := range ddpPods {
		h.setStatus(n, corev1.PodRunning, 0)
		uids[n] = string(h.pod(n).UID)
	}
	testutil.Eventually(h.t, waitTimeout, "the controller to see the ranks run", func() bool {
		for _, n := range ddpPods {
			if h.stage(n) != stageObserved {
				return false
			}
		}
		return true
	})
	return uids
}

// The notice is enough: a rank marked DisruptionTarget that still runs
// (its grace period ahead) stops every rank of the job at once, before
// any of them ended, and the job restarts uncounted.
func TestADisruptionNoticeStopsEveryRankAtOnce(t *testing.T) {
	t.Parallel()
	h := start(t, ddpJob(v1alpha1.RestartPolicyExitCode))
	uids := h.runningRanks()
	pod := h.pod("ddp-worker-1").DeepCopy()
	pod.Status.Conditions = append(pod.Status.Conditions, corev1.PodCondition{Type: "DisruptionTarget", Status: corev1.ConditionTrue, Reason: "EvictionByEvictionAPI", LastTransitionTime: metav1.Now()})
	if _, err := h.client.CoreV1().Pods(ns).UpdateStatus(context.Background(), pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(h.t, waitTimeout, "every rank deleted on the notice", func() bool { return h.ranksDeleted(uids) })
	if r := h.stoppedView().Restarts; r != 0 {
		t.Errorf("restarts = %d, want 0: a disruption is not the job's fault", r)
	}
}

// With the rights to watch nodes, a cordon of a rank's node is the notice:
// every rank is stopped before the drain evicts any.
func TestACordonedNodeStopsEveryRankBeforeTheDrain(t *testing.T) {
	t.Parallel()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "gpu-1"}}
	h := startWith(t, ddpJob(v1alpha1.RestartPolicyExitCode), func(h *harness, o *Options) {
		o.WatchNodes = true
		if _, err := h.client.CoreV1().Nodes().Create(context.Background(), node, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	})
	uids := h.runningRanks()
	pod := h.pod("ddp-master-0").DeepCopy()
	pod.Spec.NodeName = "gpu-1"
	if _, err := h.client.CoreV1().Pods(ns).Update(context.Background(), pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(h.t, waitTimeout, "the master seen on gpu-1", func() bool {
		h.ctrl.mu.Lock()
		defer h.ctrl.mu.Unlock()
		st := h.ctrl.byName["ddp-master-0"]
		return st.pod != nil && st.pod.Spec.NodeName == "gpu-1"
	})
	if h.ranksDeleted(uids) {
		t.Fatal("ranks deleted before any notice")
	}
	node.Spec.Unschedulable = true
	if _, err := h.client.CoreV1().Nodes().Update(context.Background(), node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(h.t, waitTimeout, "every rank deleted on the cordon", func() bool { return h.ranksDeleted(uids) })
	if r := h.stoppedView().Restarts; r != 0 {
		t.Errorf("restarts = %d, want 0", r)
	}
}

func TestDrainingReadsCordonsAndDrainTaints(t *testing.T) {
	for _, tc := range []struct {
		node corev1.Node
		want bool
	}{
		{corev1.Node{}, false},
		{corev1.Node{Spec: corev1.NodeSpec{Unschedulable: true}}, true},
		{corev1.Node{Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: "ToBeDeletedByClusterAutoscaler", Effect: corev1.TaintEffectNoSchedule}}}}, true},
		{corev1.Node{Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: "karpenter.sh/disrupted", Effect: corev1.TaintEffectNoSchedule}}}}, true},
		{corev1.Node{Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: "nvidia.com/gpu", Effect: corev1.TaintEffectNoSchedule}}}}, false},
	} {
		if got := draining(&tc.node) != ""; got != tc.want {
			t.Errorf("draining(%+v) = %v, want %v", tc.node.Spec, got, tc.want)
		}
	}
}
