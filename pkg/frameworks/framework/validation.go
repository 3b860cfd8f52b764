package framework

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
)

// MaxReplicas is the most replicas a job may run, of every type together.
// 2048 workers, the largest job trainstep is meant to run on one step, are
// well inside. At 4096 a TensorFlow job with the template's job names can
// no longer start: its TF_CONFIG, which lists every replica, is 183 KB in
// namespace "default", over the 128 KiB Linux allows one environment
// variable (rendering checks that limit exactly, for the actual names).
// And 4096 pods and as many Services are beyond what Kubernetes'
// scalability thresholds test in one namespace (3000 pods).
const MaxReplicas = 4096

// The rules below are a framework's on how many replicas of one of its
// types a job has. Each gives at most one error, at the type's replicas
// field (or the type, when it is missing), and none for a count below 0 or
// over MaxReplicas, which pkg/frameworks reports whatever the framework.

// SpecsPath is the field of the job's replica specs.
var SpecsPath = field.NewPath("spec", "replicaSpecs")

// ReplicasPath is the replicas field of type rt.
func ReplicasPath(rt v1alpha1.ReplicaType) *field.Path {
	return SpecsPath.Child(string(rt), "replicas")
}

// Required says the job must have type rt, and why.
func Required(job *v1alpha1.TrainJob, rt v1alpha1.ReplicaType, why string) field.ErrorList {
	if _, ok := job.Spec.ReplicaSpecs[rt]; ok {
		return nil
	}
	return field.ErrorList{field.Required(SpecsPath.Child(string(rt)), why)}
}

// ExactlyOne says a job that has type rt runs exactly one of it, and why.
func ExactlyOne(job *v1alpha1.TrainJob, rt v1alpha1.ReplicaType, why string) field.ErrorList {
	n, ok := count(job, rt)
	if !ok || n == 1 {
		return nil
	}
	return field.ErrorList{field.Invalid(ReplicasPath(rt), n, "must be 1: "+why)}
}

// AtMostOne says a job runs at most one replica of type rt.
func AtMostOne(job *v1alpha1.TrainJob, rt v1alpha1.ReplicaType) field.ErrorList {
	n, ok := count(job, rt)
	if !ok || n <= 1 || n > MaxReplicas {
		return nil
	}
	return field.ErrorList{field.Invalid(ReplicasPath(rt), n, fmt.Sprintf("must be 0 or 1: a job has at most one %s", rt))}
}

// AtLeastOne says a job that has type rt runs at least one of it, and why.
func AtLeastOne(job *v1alpha1.TrainJob, rt v1alpha1.ReplicaType, why string) field.ErrorList {
	n, ok := count(job, rt)
	if !ok || n != 0 {
		return nil
	}
	return field.ErrorList{field.Invalid(ReplicasPath(rt), n, "must be >= 1: "+why)}
}

// count is the replicas of type rt, and false when the job has no such
// type (or an empty spec for it, which pkg/frameworks reports).
func count(job *v1alpha1.TrainJob, rt v1alpha1.ReplicaType) (int32, bool) {
	spec := job.Spec.ReplicaSpecs[rt]
	if spec == nil {
		return 0, false
	}
	return spec.ReplicaCount(), true
}
