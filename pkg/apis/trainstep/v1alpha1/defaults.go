package v1alpha1

// SetDefaults fills every unset field of job with trainstep's defaults.
// (Being completed: see the foundation issue.)
func SetDefaults(job *TrainJob) {
	for _, spec := range job.Spec.ReplicaSpecs {
		if spec != nil && spec.Replicas == nil {
			one := int32(1)
			spec.Replicas = &one
		}
	}
}
