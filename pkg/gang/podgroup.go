package gang

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
)

// PodGroup returns the PodGroup of the job's gang kind, named after the job
// (the name its pods point at), with meta's namespace, labels and owner;
// nil for kinds without a PodGroup. Field names follow the projects' own
// types: k8s.io/api scheduling/v1beta1 PodGroupSpec, scheduler-plugins
// apis/scheduling/v1alpha1 PodGroupSpec and volcano.sh/apis
// pkg/apis/scheduling/v1beta1 PodGroupSpec.
func PodGroup(job *v1alpha1.TrainJob, meta metav1.ObjectMeta) *unstructured.Unstructured {
	gvr, ok := PodGroupResource(Kind(job))
	if !ok {
		return nil
	}
	sp := job.Spec.RunPolicy.SchedulingPolicy
	spec := map[string]any{"minMember": int64(MinMember(job))}
	if res := MinResources(job); len(res) > 0 {
		spec["minResources"] = quantities(res)
	}
	switch Kind(job) {
	case v1alpha1.GangKubernetes:
		spec = kubernetesPodGroupSpec(job)
	case v1alpha1.GangSchedulerPlugins:
		if sp.ScheduleTimeoutSeconds != nil {
			spec["scheduleTimeoutSeconds"] = int64(*sp.ScheduleTimeoutSeconds)
		}
	case v1alpha1.GangVolcano:
		if sp.Queue != "" {
			spec["queue"] = sp.Queue
		}
		if sp.PriorityClass != "" {
			spec["priorityClassName"] = sp.PriorityClass
		}
	}
	pg := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	pg.SetAPIVersion(gvr.GroupVersion().String())
	pg.SetKind("PodGroup")
	pg.SetName(meta.Name)
	pg.SetNamespace(meta.Namespace)
	pg.SetLabels(meta.Labels)
	pg.SetOwnerReferences(meta.OwnerReferences)
	return pg
}

// kubernetesPodGroupSpec is the spec of a standalone scheduling.k8s.io
// PodGroup: no Workload, which the API leaves optional (spec.workloadRef)
// and the scheduler does not read. The gang's minCount is minAvailable.
// Disruption is all-or-nothing: a gang job that loses a replica restarts or
// waits below its minimum anyway, so the scheduler preempts the whole group
// rather than one replica. Kubernetes has no schedule timeout of its own.
func kubernetesPodGroupSpec(job *v1alpha1.TrainJob) map[string]any {
	spec := map[string]any{
		"schedulingPolicy": map[string]any{"gang": map[string]any{"minCount": int64(MinMember(job))}},
		"disruptionMode":   map[string]any{"all": map[string]any{}},
	}
	if pc := job.Spec.RunPolicy.SchedulingPolicy.PriorityClass; pc != "" {
		spec["priorityClassName"] = pc
	}
	return spec
}

// quantities renders a resource list the way the API server stores it.
func quantities(res corev1.ResourceList) map[string]any {
	out := make(map[string]any, len(res))
	for name, q := range res {
		out[string(name)] = q.String()
	}
	return out
}

// KubernetesUnschedulable reads a live Kubernetes PodGroup: the message of
// the scheduler's PodGroupInitiallyScheduled condition while it is False
// (e.g. reason Unschedulable: the gang does not fit), prefixed by its
// reason; empty when the group was scheduled or the scheduler has not
// looked at it yet.
func KubernetesUnschedulable(pg *unstructured.Unstructured) string {
	conditions, _, _ := unstructured.NestedSlice(pg.Object, "status", "conditions")
	for _, c := range conditions {
		cond, ok := c.(map[string]any)
		if !ok || cond["type"] != KubernetesScheduledCondition || cond["status"] != "False" {
			continue
		}
		reason, _ := cond["reason"].(string)
		message, _ := cond["message"].(string)
		switch {
		case reason == "":
			return message
		case message == "":
			return reason
		}
		return reason + ": " + message
	}
	return ""
}
