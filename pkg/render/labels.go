package render

import (
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
)

// JobLabels are the labels every object of a job carries.
func JobLabels(jobName string) map[string]string {
	return map[string]string{v1alpha1.LabelJobName: jobName}
}

// sharedLabels are the labels of the Services, ConfigMaps and Secrets a job
// has once: JobLabels, and for MPI the "app: <job>" MPI Operator v2 puts on
// its job Service, hostfile ConfigMap and SSH Secret (and on no pod or
// PodGroup).
func sharedLabels(job *v1alpha1.TrainJob, jobName string) map[string]string {
	out := JobLabels(jobName)
	if job.Spec.Framework == v1alpha1.FrameworkMPI {
		out[v1alpha1.LabelMPIApp] = jobName
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
