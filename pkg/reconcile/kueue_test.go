package reconcile

import (
	"context"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/trainstep/trainstep/internal/testutil"
	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/gang"
	"github.com/trainstep/trainstep/pkg/policy"
)

// Kueue evicts a job's group: it marks each pod TerminationTarget
// (WorkloadEvictedDueToPreempted) and deletes it, and its finalizer keeps the ended pod
// until a replacement exists. trainstep drops that finalizer from its own
// ended pod, so the name is free, and replaces the replica without counting
// a restart: the eviction is a disruption. So is Kueue's stop of a group
// whose Workload is being deleted (reason WorkloadDeleted).
func TestKueueEvictedReplicaIsReleasedAndReplacedForFree(t *testing.T) {
	for _, tc := range []struct {
		name, reason string
		fault        bool
	}{
		{"patch lands", "WorkloadEvictedDueToPreempted", false},
		{"first patch answered 503", "WorkloadEvictedDueToPreempted", true},
		{"the Workload deleted", "WorkloadDeleted", false},
	} {
		t.Run(tc.name, func(t *testing.T) { kueueEvictionReleased(t, tc.reason, tc.fault) })
	}
}

// kueueEvictionReleased runs one stop by Kueue with reason; with fault, the
// API server answers the first patch of the deleted pod 503 (the release is
// retried).
func kueueEvictionReleased(t *testing.T, reason string, fault bool) {
	job := tfJob(v1alpha1.RestartPolicyExitCode)
	job.Spec.RunPolicy.SchedulingPolicy = &v1alpha1.SchedulingPolicy{Gang: v1alpha1.GangKueue, Queue: "training"}
	h := startWith(t, job, func(h *harness, _ *Options) {
		// The API server finishes a deletion once the last finalizer is gone.
		h.client.PrependReactor("patch", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
			p := a.(k8stesting.PatchAction)
			stored, err := h.client.Tracker().Get(corev1.SchemeGroupVersion.WithResource("pods"), ns, p.GetName())
			if err != nil || stored.(*corev1.Pod).DeletionTimestamp == nil {
				return false, nil, nil
			}
			h.mu.Lock()
			if fault && !h.kueueFaulted {
				h.kueueFaulted = true
				h.mu.Unlock()
				return true, nil, apierrors.NewServiceUnavailable("injected")
			}
			h.kueuePatches = append(h.kueuePatches, string(p.GetPatch()))
			h.mu.Unlock()
			return true, nil, h.client.Tracker().Delete(corev1.SchemeGroupVersion.WithResource("pods"), ns, p.GetName())
		})
	})
	first := h.pod("mnist-worker-1")
	h.setStatus("mnist-worker-1", corev1.PodRunning, 0)
	testutil.Eventually(h.t, waitTimeout, "the controller to see worker-1", func() bool { return h.stage("mnist-worker-1") == stageObserved })

	evicted := h.pod("mnist-worker-1").DeepCopy()
	now := metav1.Now()
	evicted.DeletionTimestamp, evicted.Finalizers = &now, []string{gang.KueueFinalizer}
	evicted.Status.Phase = corev1.PodFailed
	evicted.Status.Conditions = []corev1.PodCondition{{Type: gang.KueueStoppedCondition, Status: corev1.ConditionTrue, Reason: reason}}
	evicted.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "tensorflow",
		State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 143, FinishedAt: now}}}}
	if _, err := h.client.CoreV1().Pods(ns).Update(context.Background(), evicted, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(h.t, waitTimeout, "worker-1 replaced", func() bool {
		p, err := h.client.CoreV1().Pods(ns).Get(context.Background(), "mnist-worker-1", metav1.GetOptions{})
		return err == nil && p.UID != first.UID && p.DeletionTimestamp == nil
	})
	h.mu.Lock()
	defer h.mu.Unlock()
	if fault && !h.kueueFaulted {
		t.Fatal("the injected 503 never happened: the test did not do what it claims")
	}
	if !slices.ContainsFunc(h.kueuePatches, func(p string) bool {
		return p == `[{"op":"test","path":"/metadata/uid","value":"`+string(first.UID)+`"},{"op":"test","path":"/metadata/finalizers","value":["kueue.x-k8s.io/managed"]},{"op":"replace","path":"/metadata/finalizers","value":[]}]`
	}) {
		t.Errorf("patches of the deleted pod %v, want one dropping Kueue's finalizer from that instance", h.kueuePatches)
	}
	h.setStatus("mnist-worker-0", corev1.PodSucceeded, 0)
	if d := h.decision(); d.Outcome != policy.OutcomeSucceeded {
		t.Fatalf("decision %+v, want Succeeded", d)
	}
	if r := h.ctrl.View().Restarts; r != 0 {
		t.Errorf("restarts = %d, want 0: Kueue's stop (%s) is a disruption", r, reason)
	}
}

// Under Kueue each whole-job attempt is a pod group, and so a Workload, of
// its own: the next attempt's pods never join the evicted attempt's
// Workload, which the garbage collector removes once its pods are gone.
func TestKueueGroupIsPerJobAttempt(t *testing.T) {
	t.Parallel()
	job := ddpJob(v1alpha1.RestartPolicyExitCode)
	job.Spec.RunPolicy.SchedulingPolicy = &v1alpha1.SchedulingPolicy{Gang: v1alpha1.GangKueue, Queue: "training"}
	h := start(t, job)
	for _, n := range ddpPods {
		if g := h.pod(n).Labels[gang.KueuePodGroupLabel]; g != "ddp" {
			t.Errorf("%s: pod group %q at the first attempt, want the job's name", n, g)
		}
		h.setStatus(n, corev1.PodRunning, 0)
	}
	h.setStatus("ddp-worker-1", corev1.PodFailed, 137)
	testutil.Eventually(h.t, waitTimeout, "every replica recreated at job attempt 1", func() bool {
		got := h.jobAttemptsOf(ddpPods...)
		return got["ddp-master-0"] == "1" && got["ddp-worker-0"] == "1" && got["ddp-worker-1"] == "1"
	})
	for _, n := range ddpPods {
		if g := h.pod(n).Labels[gang.KueuePodGroupLabel]; g != "ddp.1" {
			t.Errorf("%s: pod group %q at job attempt 1, want ddp.1", n, g)
		}
	}
}
