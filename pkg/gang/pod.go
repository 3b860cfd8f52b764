package gang

import (
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/frameworks"
)

// PodSettings is what a gang kind adds to every replica pod.
type PodSettings struct {
	Labels      map[string]string
	Annotations map[string]string
	// SchedulerName is set on pods whose template names no scheduler.
	SchedulerName string
	// Gates are added to spec.schedulingGates.
	Gates []corev1.PodSchedulingGate
	// SchedulingGroup is the PodGroup the pod joins through
	// spec.schedulingGroup.podGroupName (Kubernetes' own gang). The typed
	// Pod of the k8s.io/api trainstep builds with has no such field:
	// PodObject adds it to the pod's unstructured form.
	SchedulingGroup string
}

// ForPods returns the pod settings of the job's gang kind; jobName names
// the job's PodGroup (Kubernetes, scheduler-plugins, Volcano) or Kueue pod
// group.
func ForPods(job *v1alpha1.TrainJob, jobName string) PodSettings {
	switch Kind(job) {
	case v1alpha1.GangBuiltin:
		return PodSettings{Gates: []corev1.PodSchedulingGate{{Name: GateName}}}
	case v1alpha1.GangKubernetes:
		return PodSettings{SchedulingGroup: jobName}
	case v1alpha1.GangSchedulerPlugins:
		return PodSettings{
			Labels:        map[string]string{SchedulerPluginsLabel: jobName},
			SchedulerName: SchedulerPluginsSchedulerName,
		}
	case v1alpha1.GangVolcano:
		return PodSettings{
			Annotations:   map[string]string{VolcanoGroupAnnotation: jobName},
			SchedulerName: VolcanoSchedulerName,
		}
	case v1alpha1.GangKueue:
		sp := job.Spec.RunPolicy.SchedulingPolicy
		labels := map[string]string{KueueQueueLabel: sp.Queue, KueuePodGroupLabel: jobName}
		if sp.WorkloadPriorityClass != "" {
			// Kueue takes the group's priority from its pods' label.
			labels[KueuePriorityClassLabel] = sp.WorkloadPriorityClass
		}
		return PodSettings{
			Labels: labels,
			// Kueue admits the group once this many pods exist: every pod
			// the job starts with.
			Annotations: map[string]string{KueueTotalCountAnnotation: strconv.Itoa(int(frameworks.GangSize(job)))},
		}
	}
	return PodSettings{}
}

// KueueGroupName is the Kueue pod group of a job's whole-job attempt: the
// job's name at the first attempt, "<job>.<attempt>" after a restart. Each
// attempt gets a group, and so a Workload, of its own: the Workload of an
// evicted group is owned by its pods, and the garbage collector removes it
// once they are gone, even after the next attempt's pods joined it and ran
// (Kueue then stopped them, WorkloadDeleted: one more restart). The dot,
// which a job name cannot hold, keeps it from naming another job's group;
// a name over a label value's 63 characters loses the end of the job's.
func KueueGroupName(jobName string, jobAttempt int) string {
	if jobAttempt == 0 {
		return jobName
	}
	suffix := "." + strconv.Itoa(jobAttempt)
	// Cut, the job's part may end in a hyphen, which no part of a DNS name may.
	return strings.TrimRight(jobName[:min(len(jobName), 63-len(suffix))], "-") + suffix
}

// MinMember is how many pods must be placed together: minAvailable, else
// every replica, except that an elastic job needs only its minReplicas
// workers (with its other replicas, e.g. a Master): the workers above them
// are outside the gang's minimum and join when they are placed.
func MinMember(job *v1alpha1.TrainJob) int32 {
	if sp := job.Spec.RunPolicy.SchedulingPolicy; sp != nil && sp.MinAvailable != nil {
		return *sp.MinAvailable
	}
	total := int32(frameworks.TotalReplicas(job))
	if e, ok := frameworks.Elastic(job); ok {
		return total - int32(frameworks.Replicas(job, e.Type)) + e.Min
	}
	return total
}

// HasGate reports whether pod carries the built-in gang's scheduling gate.
func HasGate(pod *corev1.Pod) bool {
	for _, g := range pod.Spec.SchedulingGates {
		if g.Name == GateName {
			return true
		}
	}
	return false
}

// WithoutGate returns gates minus the built-in gang's gate (nil when none is left).
func WithoutGate(gates []corev1.PodSchedulingGate) []corev1.PodSchedulingGate {
	var out []corev1.PodSchedulingGate
	for _, g := range gates {
		if g.Name != GateName {
			out = append(out, g)
		}
	}
	return out
}

// PodObject is what is sent to create pod: pod itself, or, when it joins a
// scheduling group, its unstructured form with
// spec.schedulingGroup.podGroupName set. trainstep builds with the k8s.io/api
// that Argo Workflows pins, whose Pod lacks the field, so the typed client
// (protobuf) would drop it. The field is immutable, so it must be there at
// creation: trainstep's later writes to pods are merge patches, which leave
// it alone.
func PodObject(pod *corev1.Pod, group string) (runtime.Object, error) {
	if group == "" {
		return pod, nil
	}
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(pod)
	if err != nil {
		return nil, fmt.Errorf("converting pod %s: %w", pod.Name, err)
	}
	obj := &unstructured.Unstructured{Object: content}
	if err := unstructured.SetNestedField(obj.Object, group, "spec", "schedulingGroup", "podGroupName"); err != nil {
		return nil, fmt.Errorf("setting pod %s's scheduling group: %w", pod.Name, err)
	}
	obj.SetAPIVersion("v1")
	obj.SetKind("Pod")
	return obj, nil
}
