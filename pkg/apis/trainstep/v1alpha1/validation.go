package v1alpha1

import "k8s.io/apimachinery/pkg/util/validation/field"

// Validate checks a defaulted job and returns every problem with its field path.
// (Being completed: see the foundation issue.)
func Validate(job *TrainJob) field.ErrorList {
	var errs field.ErrorList
	if job.Spec.Framework == "" {
		errs = append(errs, field.Required(field.NewPath("spec", "framework"), "one of tensorflow, pytorch, mpi, jax, xgboost"))
	}
	return errs
}
