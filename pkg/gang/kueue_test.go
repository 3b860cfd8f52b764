package gang

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Kueue's keys, from sigs.k8s.io/kueue v0.17.0: pkg/controller/jobs/pod
// ConditionTypeTerminationTarget, pkg/controller/jobframework
// StopReasonWorkloadEvicted (suffixed "DueTo<reason>" by its reconciler)
// and StopReasonWorkloadDeleted, pkg/controller/jobs/pod/constants
// PodFinalizer.
func TestKueueStopsTellAnEvictionAndAWorkloadGoing(t *testing.T) {
	stopped := func(reason string, status corev1.ConditionStatus) *corev1.Pod {
		return &corev1.Pod{Status: corev1.PodStatus{Conditions: []corev1.PodCondition{
			{Type: "TerminationTarget", Status: status, Reason: reason},
		}}}
	}
	cases := []struct {
		name                 string
		pod                  *corev1.Pod
		evicted, freeStopped bool
	}{
		{"evicted", stopped("WorkloadEvicted", corev1.ConditionTrue), true, true},
		// What Kueue v0.17.0 sets on a preempted group's pods (seen on the test cluster).
		{"evicted, preempted", stopped("WorkloadEvictedDueToPreempted", corev1.ConditionTrue), true, true},
		{"the Workload was deleted", stopped("WorkloadDeleted", corev1.ConditionTrue), false, true},
		// A group whose pods match no Workload is stopped until they do:
		// not taken as free, so that a mismatch cannot restart a job forever.
		{"no matching Workload", stopped("NoMatchingWorkload", corev1.ConditionTrue), false, false},
		{"not True", stopped("WorkloadEvicted", corev1.ConditionFalse), false, false},
		{"no condition", &corev1.Pod{}, false, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := KueueEvicted(tc.pod); got != tc.evicted {
				t.Errorf("KueueEvicted = %v, want %v", got, tc.evicted)
			}
			if got := KueueStopped(tc.pod); got != tc.freeStopped {
				t.Errorf("KueueStopped = %v, want %v", got, tc.freeStopped)
			}
		})
	}
}

func TestKueueHoldsDeletedOnlyPodsThatHoldNothing(t *testing.T) {
	now := metav1.Now()
	pod := func(deleting bool, finalizers []string, phase corev1.PodPhase, node string) *corev1.Pod {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Finalizers: finalizers},
			Spec:       corev1.PodSpec{NodeName: node},
			Status:     corev1.PodStatus{Phase: phase},
		}
		if deleting {
			p.DeletionTimestamp = &now
		}
		return p
	}
	kueue := []string{"kueue.x-k8s.io/managed"}
	cases := []struct {
		name string
		pod  *corev1.Pod
		want bool
	}{
		{"deleted, failed on its node", pod(true, kueue, corev1.PodFailed, "n"), true},
		{"deleted, succeeded", pod(true, kueue, corev1.PodSucceeded, "n"), true},
		{"deleted, never bound (gated)", pod(true, kueue, corev1.PodPending, ""), true},
		{"deleted, still running on its node", pod(true, kueue, corev1.PodRunning, "n"), false},
		{"not deleted", pod(false, kueue, corev1.PodFailed, "n"), false},
		{"another finalizer only", pod(true, []string{"example.com/keep"}, corev1.PodFailed, "n"), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := KueueHoldsDeleted(tc.pod); got != tc.want {
				t.Errorf("KueueHoldsDeleted = %v, want %v", got, tc.want)
			}
		})
	}
	if diff := cmp.Diff([]string{"example.com/keep"}, WithoutKueueFinalizer([]string{"kueue.x-k8s.io/managed", "example.com/keep"})); diff != "" {
		t.Errorf("WithoutKueueFinalizer (-want +got):\n%s", diff)
	}
	if got := WithoutKueueFinalizer([]string{"kueue.x-k8s.io/managed"}); got == nil || len(got) != 0 {
		t.Errorf("WithoutKueueFinalizer of Kueue's alone = %#v, want an empty list", got)
	}
}

func TestKueueWorkloadSaysWhyItIsNotAdmitted(t *testing.T) {
	workload := func(conds ...map[string]any) *unstructured.Unstructured {
		list := make([]any, len(conds))
		for i, c := range conds {
			list[i] = c
		}
		return &unstructured.Unstructured{Object: map[string]any{"status": map[string]any{"conditions": list}}}
	}
	const pending = "couldn't assign flavors to pod set main: insufficient quota for nvidia.com/gpu in flavor default, request > maximum capacity (3 > 2)"
	cases := []struct {
		name string
		wl   *unstructured.Unstructured
		want string
	}{
		{"pending on quota", workload(
			map[string]any{"type": "QuotaReserved", "status": "False", "reason": "Pending", "message": pending},
			map[string]any{"type": "Admitted", "status": "False", "reason": "NoReservation", "message": "The workload has no reservation"},
		), pending},
		{"reserved, waiting for admission checks", workload(
			map[string]any{"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved", "message": "Quota reserved in ClusterQueue cq"},
			map[string]any{"type": "Admitted", "status": "False", "reason": "", "message": "waiting for checks"},
		), "waiting for checks"},
		{"admitted", workload(
			map[string]any{"type": "QuotaReserved", "status": "True", "message": "Quota reserved"},
			map[string]any{"type": "Admitted", "status": "True", "message": "The workload is admitted"},
		), ""},
		{"no status yet", workload(), ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := KueueWorkloadSays(tc.wl); got != tc.want {
				t.Errorf("KueueWorkloadSays = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestKueueGatedIsAPodKueuesGateStillHolds(t *testing.T) {
	gated := func(gates []string, node string) *corev1.Pod {
		p := &corev1.Pod{Spec: corev1.PodSpec{NodeName: node}}
		for _, g := range gates {
			p.Spec.SchedulingGates = append(p.Spec.SchedulingGates, corev1.PodSchedulingGate{Name: g})
		}
		return p
	}
	cases := []struct {
		name string
		pod  *corev1.Pod
		want bool
	}{
		{"Kueue's gate", gated([]string{"kueue.x-k8s.io/admission"}, ""), true},
		{"Kueue's gate among others", gated([]string{"example.com/wait", "kueue.x-k8s.io/admission"}, ""), true},
		{"admitted (gate lifted)", gated(nil, ""), false},
		{"another gate only", gated([]string{"trainstep.dev/gang"}, ""), false},
		{"bound", gated([]string{"kueue.x-k8s.io/admission"}, "node-1"), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := KueueGated(tc.pod); got != tc.want {
				t.Errorf("KueueGated = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestKueueGroupNameIsAValidWorkloadNamePerAttempt(t *testing.T) {
	long := strings.Repeat("a", 52) + "-b-c" // 56 characters, as a job name may be
	for _, tc := range []struct {
		job     string
		attempt int
		want    string
	}{
		{"mnist", 0, "mnist"},
		{"mnist", 1, "mnist.1"},
		{"mnist", 12, "mnist.12"},
		{long, 3, long + ".3"},
		{long, 123456, long + ".123456"}, // 63 characters, a label value's most
		// Cut to 63, without the hyphen the cut leaves.
		{long, 1234567, strings.Repeat("a", 52) + "-b.1234567"},
		{long, 1234567890, strings.Repeat("a", 52) + ".1234567890"},
	} {
		got := KueueGroupName(tc.job, tc.attempt)
		if got != tc.want {
			t.Errorf("KueueGroupName(%q, %d) = %q, want %q", tc.job, tc.attempt, got, tc.want)
		}
		if errs := validation.IsDNS1123Subdomain(got); len(errs) > 0 || len(got) > validation.LabelValueMaxLength {
			t.Errorf("%q is no Workload name and label value: %v", got, errs)
		}
	}
}
