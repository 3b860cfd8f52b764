package cluster_test

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/trainstep/trainstep/internal/testutil"
	"github.com/trainstep/trainstep/test/cluster"
)

func TestPodRunsThenExits(t *testing.T) {
	c := cluster.Get(t)
	tests := []struct {
		name        string
		annotations map[string]string
		wantPhase   corev1.PodPhase
		wantCode    int32
		wantReason  string
		wantMessage string
	}{
		{
			name:        "exit code defaults to 0 and the pod succeeds",
			annotations: map[string]string{cluster.AnnotationExitAfter: "2s"},
			wantPhase:   corev1.PodSucceeded,
			wantCode:    0,
			wantReason:  "Completed",
		},
		{
			name: "a non-zero exit code fails the pod with the termination message",
			annotations: map[string]string{
				cluster.AnnotationExitAfter:          "2s",
				cluster.AnnotationExitCode:           "137",
				cluster.AnnotationTerminationMessage: "killed: out of memory",
			},
			wantPhase:   corev1.PodFailed,
			wantCode:    137,
			wantReason:  "Error",
			wantMessage: "killed: out of memory",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ns := c.Namespace(t)
			pod := createPod(t, c, ns, newPod("trainer", corev1.RestartPolicyNever, tc.annotations))
			seen := watchPod(t, c, pod, finished)

			if diff := cmp.Diff([]corev1.PodPhase{corev1.PodPending, corev1.PodRunning, tc.wantPhase}, phases(seen)); diff != "" {
				t.Errorf("phases (-want +got):\n%s", diff)
			}
			runningIndex := slices.IndexFunc(seen, running)
			if runningIndex < 0 {
				t.Fatalf("never saw the pod Running with an IP and ready containers: %s", describe(seen))
			}
			node, err := c.Client.CoreV1().Nodes().Get(context.Background(), seen[runningIndex].Spec.NodeName, metav1.GetOptions{})
			if err != nil || node.Labels["type"] != "kwok" {
				t.Errorf("pod ran on node %q, want a KWOK node (err %v)", seen[runningIndex].Spec.NodeName, err)
			}
			last := seen[len(seen)-1]
			terminated := last.Status.ContainerStatuses[0].State.Terminated
			if terminated == nil {
				t.Fatalf("container state = %+v, want terminated", last.Status.ContainerStatuses[0].State)
			}
			got := []any{terminated.ExitCode, terminated.Reason, terminated.Message}
			want := []any{tc.wantCode, tc.wantReason, tc.wantMessage}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("terminated (exit code, reason, message) (-want +got):\n%s", diff)
			}
			started := seen[runningIndex].Status.ContainerStatuses[0].State.Running.StartedAt
			if terminated.FinishedAt.Before(&started) {
				t.Errorf("finished at %s, before the container started at %s", terminated.FinishedAt, started)
			}
		})
	}
}

func TestPatchedPodExitsAlone(t *testing.T) {
	c := cluster.Get(t)
	ns := c.Namespace(t)
	var workers []*corev1.Pod
	for _, name := range []string{"worker-0", "worker-1"} {
		workers = append(workers, createPod(t, c, ns, newPod(name, corev1.RestartPolicyNever, nil)))
	}
	for _, w := range workers {
		watchPod(t, c, w, running)
	}

	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{
		cluster.AnnotationExitAfter: "1s",
		cluster.AnnotationExitCode:  "3",
	}}})
	patched, err := c.Client.CoreV1().Pods(ns).Patch(context.Background(), "worker-1", types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil {
		t.Fatalf("patching worker-1: %v", err)
	}
	seen := watchPod(t, c, patched, finished)
	if code := seen[len(seen)-1].Status.ContainerStatuses[0].State.Terminated.ExitCode; code != 3 {
		t.Errorf("worker-1 exit code = %d, want 3", code)
	}
	if other := getPod(t, c, ns, "worker-0"); !running(other) || restartCount(other) != 0 {
		t.Errorf("worker-0 = %s, want still Running and never restarted", describe([]*corev1.Pod{other}))
	}
}

func TestRestartInPlace(t *testing.T) {
	c := cluster.Get(t)
	tests := []struct {
		name      string
		policy    corev1.RestartPolicy
		exitCode  int32
		exitTimes int32
	}{
		{name: "OnFailure with a failing code", policy: corev1.RestartPolicyOnFailure, exitCode: 1, exitTimes: 2},
		{name: "Always restarts even on success", policy: corev1.RestartPolicyAlways, exitCode: 0, exitTimes: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ns := c.Namespace(t)
			created := createPod(t, c, ns, newPod("trainer", tc.policy, map[string]string{
				cluster.AnnotationExitAfter: "2s",
				cluster.AnnotationExitCode:  strconv.Itoa(int(tc.exitCode)),
				cluster.AnnotationExitTimes: strconv.Itoa(int(tc.exitTimes)),
			}))
			seen := watchPod(t, c, created, func(p *corev1.Pod) bool { return restartCount(p) == tc.exitTimes && running(p) })

			var counts []int32
			for _, p := range seen {
				if p.UID != created.UID {
					t.Fatalf("pod was replaced (uid %s, want %s): restarts must happen in place", p.UID, created.UID)
				}
				if finished(p) {
					t.Fatalf("pod reached phase %s; a restartable container must not end the pod", p.Status.Phase)
				}
				if n := restartCount(p); len(counts) == 0 || counts[len(counts)-1] != n {
					counts = append(counts, n)
				}
			}
			var want []int32
			for i := int32(0); i <= tc.exitTimes; i++ {
				want = append(want, i)
			}
			if diff := cmp.Diff(want, counts); diff != "" {
				t.Errorf("restart counts in order (-want +got):\n%s", diff)
			}
			last := seen[len(seen)-1].Status.ContainerStatuses[0]
			if last.LastTerminationState.Terminated == nil || last.LastTerminationState.Terminated.ExitCode != tc.exitCode {
				t.Errorf("lastState = %+v, want terminated with exit code %d", last.LastTerminationState, tc.exitCode)
			}

			// exit-times is spent: several more exit-after periods pass without an exit.
			time.Sleep(3 * 2 * time.Second)
			if after := getPod(t, c, ns, "trainer"); !running(after) || restartCount(after) != tc.exitTimes {
				t.Errorf("after exit-times was spent: %s, want Running with %d restarts", describe([]*corev1.Pod{after}), tc.exitTimes)
			}
		})
	}
}

func TestWaitingReasonKeepsContainerWaiting(t *testing.T) {
	c := cluster.Get(t)
	ns := c.Namespace(t)
	stuck := createPod(t, c, ns, newPod("stuck", corev1.RestartPolicyNever, map[string]string{
		cluster.AnnotationWaitingReason: "ImagePullBackOff",
		cluster.AnnotationExitAfter:     "1s",
	}))
	waiting := func(p *corev1.Pod) bool {
		return len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].State.Waiting != nil &&
			p.Status.ContainerStatuses[0].State.Waiting.Reason == "ImagePullBackOff"
	}
	watchPod(t, c, stuck, waiting)

	// It stays that way: no exit, no start, while the annotation is there.
	time.Sleep(4 * time.Second)
	if pod := getPod(t, c, ns, "stuck"); !waiting(pod) || pod.Status.Phase != corev1.PodPending {
		t.Fatalf("stuck pod = %s %+v, want Pending and Waiting(ImagePullBackOff)", pod.Status.Phase, pod.Status.ContainerStatuses)
	}

	// Lifting the annotation lets the container start, as a successful pull would.
	patch := []byte(`{"metadata":{"annotations":{"` + cluster.AnnotationWaitingReason + `":null}}}`)
	unstuck, err := c.Client.CoreV1().Pods(ns).Patch(context.Background(), "stuck", types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil {
		t.Fatalf("removing the waiting-reason annotation: %v", err)
	}
	watchPod(t, c, unstuck, running)
}

func TestPodDeletionCompletes(t *testing.T) {
	c := cluster.Get(t)
	ns := c.Namespace(t)
	pod := createPod(t, c, ns, newPod("trainer", corev1.RestartPolicyNever, nil))
	watchPod(t, c, pod, running)
	// Default grace period (30s): KWOK must not make the deletion wait for it.
	if err := c.Client.CoreV1().Pods(ns).Delete(context.Background(), "trainer", metav1.DeleteOptions{}); err != nil {
		t.Fatalf("deleting pod: %v", err)
	}
	testutil.Eventually(t, podTimeout, "the pod to be gone", func() (bool, error) {
		_, err := c.Client.CoreV1().Pods(ns).Get(context.Background(), "trainer", metav1.GetOptions{})
		return apierrors.IsNotFound(err), err
	})
}
