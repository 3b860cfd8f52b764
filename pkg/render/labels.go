package render

import (
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/frameworks"
)

// JobLabels are the labels every object of a job carries.
func JobLabels(jobName string) map[string]string {
	return map[string]string{v1alpha1.LabelJobName: jobName}
}

// sharedLabels are the labels of the Services, ConfigMaps and Secrets a job
// has once: the framework's operator's (MPI Operator v2's "app: <job>",
// which it puts on no pod or PodGroup), and JobLabels over them.
func sharedLabels(job *v1alpha1.TrainJob, jobName string) map[string]string {
	out := JobLabels(jobName)
	for k, v := range frameworks.SharedLabels(job, jobName) {
		if _, own := out[k]; !own {
			out[k] = v
		}
	}
	return out
}

// ReplicaLabels are the labels of one replica's pod and Service, and the
// selector of that Service: job name, lower-case replica type and index.
func ReplicaLabels(jobName string, rt v1alpha1.ReplicaType, index int) map[string]string {
	return map[string]string{
		v1alpha1.LabelJobName:      jobName,
		v1alpha1.LabelReplicaType:  strings.ToLower(string(rt)),
		v1alpha1.LabelReplicaIndex: strconv.Itoa(index),
	}
}

// JobSelector selects every object of a job.
func JobSelector(jobName string) labels.Selector {
	return labels.SelectorFromSet(JobLabels(jobName))
}
