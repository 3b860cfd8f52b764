package gang

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/frameworks"
)

// MinResources is what a PodGroup asks to be free before any of its pods
// start: schedulingPolicy.minResources when set, else the requests of the
// first MinMember replicas (replica types in frameworks.SortedReplicaTypes
// order, so the replicas a job cannot run without come first). An MPI
// launcher created only once the workers are Ready is no member the group
// starts with: the workers' requests are summed instead.
func MinResources(job *v1alpha1.TrainJob) corev1.ResourceList {
	if sp := job.Spec.RunPolicy.SchedulingPolicy; sp != nil && sp.MinResources != nil {
		return sp.MinResources.DeepCopy()
	}
	total := corev1.ResourceList{}
	left := MinMember(job)
	held, _, holds := frameworks.HeldUntilReady(job)
	for _, t := range frameworks.SortedReplicaTypes(job) {
		spec := job.Spec.ReplicaSpecs[t]
		if spec == nil || holds && t == held {
			continue
		}
		n := min(spec.ReplicaCount(), left)
		left -= n
		perPod := PodRequests(&spec.Template.Spec)
		for name, q := range perPod {
			sum := total[name]
			for i := int32(0); i < n; i++ {
				sum.Add(q)
			}
			total[name] = sum
		}
	}
	return total
}

// PodRequests is what the scheduler reserves for one pod: per resource the
// larger of the containers' summed requests and the largest init container
// request, plus the pod overhead. A container without a request for a
// resource it limits requests its limit, as the API server defaults it.
func PodRequests(spec *corev1.PodSpec) corev1.ResourceList {
	out := corev1.ResourceList{}
	for i := range spec.Containers {
		for name, q := range ContainerRequests(&spec.Containers[i]) {
			sum := out[name]
			sum.Add(q)
			out[name] = sum
		}
	}
	for i := range spec.InitContainers {
		for name, q := range ContainerRequests(&spec.InitContainers[i]) {
			if cur, ok := out[name]; !ok || q.Cmp(cur) > 0 {
				out[name] = q.DeepCopy()
			}
		}
	}
	for name, q := range spec.Overhead {
		sum := out[name]
		sum.Add(q)
		out[name] = sum
	}
	return out
}

// ContainerRequests is a container's request per resource, a limit alone
// standing for the request, as the API server defaults it.
func ContainerRequests(c *corev1.Container) corev1.ResourceList {
	out := c.Resources.Requests.DeepCopy()
	if out == nil {
		out = corev1.ResourceList{}
	}
	for name, q := range c.Resources.Limits {
		if _, ok := out[name]; !ok {
			out[name] = q.DeepCopy()
		}
	}
	return out
}
