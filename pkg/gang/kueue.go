package gang

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// KueueEvicted reports whether Kueue stopped pod because it evicted the
// pod's group (preemption, quota taken back): a disruption of the job, not
// a failure of its code.
func KueueEvicted(pod *corev1.Pod) bool {
	return strings.HasPrefix(kueueStopReason(pod), KueueEvictedReason)
}

// KueueStopped reports whether Kueue stopped pod for a reason outside the
// job's code: it evicted the group (KueueEvicted), or the group's Workload
// is being deleted. The latter followed a whole-job restart when the
// garbage collector removed the Workload the replaced pods owned after the
// next attempt's pods joined it and ran; each attempt has a group of its
// own now (KueueGroupName), and a Workload deleted by anyone else still
// stops no job for its code.
func KueueStopped(pod *corev1.Pod) bool {
	reason := kueueStopReason(pod)
	return strings.HasPrefix(reason, KueueEvictedReason) || reason == KueueWorkloadDeletedReason
}

// kueueStopReason is the reason of the True KueueStoppedCondition Kueue set
// on pod, or "" when it has none.
func kueueStopReason(pod *corev1.Pod) string {
	for _, c := range pod.Status.Conditions {
		if c.Type == KueueStoppedCondition && c.Status == corev1.ConditionTrue {
			return c.Reason
		}
	}
	return ""
}

// KueueGated reports whether Kueue's admission gate still holds pod: it
// was never bound, its code never ran. Kueue deletes such pods itself when
// it sees more of a group than its total count (the replacements of an
// evicted group while Kueue's cache still counts the evicted pods).
func KueueGated(pod *corev1.Pod) bool {
	if pod.Spec.NodeName != "" {
		return false
	}
	for _, g := range pod.Spec.SchedulingGates {
		if g.Name == KueueAdmissionGate {
			return true
		}
	}
	return false
}

// KueueHoldsDeleted reports whether pod is being deleted and only Kueue's
// finalizer could keep it, though it holds nothing any more: it ended or
// was never bound to a node. Kueue drops its finalizer from such a pod
// only once a replacement exists, and trainstep's replacement takes the
// same name, so trainstep drops it itself.
func KueueHoldsDeleted(pod *corev1.Pod) bool {
	if pod.DeletionTimestamp == nil || !slices.Contains(pod.Finalizers, KueueFinalizer) {
		return false
	}
	ended := pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed
	return ended || pod.Spec.NodeName == ""
}

// WithoutKueueFinalizer returns finalizers without Kueue's (never nil, so
// that a patch sets an empty list rather than leaving the field alone).
func WithoutKueueFinalizer(finalizers []string) []string {
	out := []string{}
	for _, f := range finalizers {
		if f != KueueFinalizer {
			out = append(out, f)
		}
	}
	return out
}

// KueueWorkloadSays is what Kueue says about a Workload it has not admitted:
// the message of its QuotaReserved condition while False (e.g. "couldn't
// assign flavors to pod set main: insufficient quota for nvidia.com/gpu in
// flavor default, request > maximum capacity (3 > 2)"), else of Admitted
// while False, else "".
func KueueWorkloadSays(wl *unstructured.Unstructured) string {
	conditions, _, _ := unstructured.NestedSlice(wl.Object, "status", "conditions")
	says := map[string]string{}
	for _, c := range conditions {
		cond, ok := c.(map[string]any)
		if !ok || cond["status"] != "False" {
			continue
		}
		t, _ := cond["type"].(string)
		message, _ := cond["message"].(string)
		if message == "" {
			message, _ = cond["reason"].(string)
		}
		says[t] = message
	}
	for _, t := range []string{"QuotaReserved", "Admitted"} {
		if says[t] != "" {
			return says[t]
		}
	}
	return ""
}
