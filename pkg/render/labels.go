package render

import (
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/frameworks"
)

// JobLabels are the labels every object of a job carries: its name and,
// when the run proved one, its owner identity.
func JobLabels(id Identity) map[string]string {
	out := map[string]string{v1alpha1.LabelJobName: id.JobName}
	if id.OwnerID != "" {
		out[v1alpha1.LabelIdentity] = id.OwnerID
	}
	return out
}

// sharedLabels are the labels of the Services, ConfigMaps and Secrets a job
// has once: the framework's operator's (MPI Operator v2's "app: <job>",
// which it puts on no pod or PodGroup), and JobLabels over them.
func sharedLabels(job *v1alpha1.TrainJob, id Identity) map[string]string {
	out := JobLabels(id)
	for k, v := range frameworks.SharedLabels(job, id.JobName) {
		if _, own := out[k]; !own {
			out[k] = v
		}
	}
	return out
}

// ReplicaLabels are the labels of one replica's pod and Service, and the
// selector of that Service: JobLabels, lower-case replica type and index.
func ReplicaLabels(id Identity, rt v1alpha1.ReplicaType, index int) map[string]string {
	out := JobLabels(id)
	out[v1alpha1.LabelReplicaType] = strings.ToLower(string(rt))
	out[v1alpha1.LabelReplicaIndex] = strconv.Itoa(index)
	return out
}

// JobSelector selects every object of a job of id's identity: an object
// of the same job name and another identity is not the job's.
func JobSelector(id Identity) labels.Selector {
	return labels.SelectorFromSet(JobLabels(id))
}
