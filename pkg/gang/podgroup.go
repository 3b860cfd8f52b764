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
// types: scheduler-plugins apis/scheduling/v1alpha1 PodGroupSpec and
// volcano.sh/apis pkg/apis/scheduling/v1beta1 PodGroupSpec.
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

// quantities renders a resource list the way the API server stores it.
func quantities(res corev1.ResourceList) map[string]any {
	out := make(map[string]any, len(res))
	for name, q := range res {
		out[string(name)] = q.String()
	}
	return out
}
