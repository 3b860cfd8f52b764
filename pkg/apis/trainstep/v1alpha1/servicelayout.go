package v1alpha1

import (
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// ServiceLayout says how a job's replicas get their DNS names.
type ServiceLayout string

// Service layouts.
const (
	// ServiceLayoutPerJob gives the job one headless Service named after it
	// and every pod a hostname and subdomain, so a replica is reached as
	// "<pod>.<job>" (JobSet and MPI Operator v2 style): one Service, and
	// its Endpoints and EndpointSlices, for the whole job.
	ServiceLayoutPerJob ServiceLayout = "PerJob"
	// ServiceLayoutPerReplica gives every replica a headless Service named
	// like its pod, reached as "<pod>" (Training Operator v1 style).
	ServiceLayoutPerReplica ServiceLayout = "PerReplica"
)

var serviceLayouts = []ServiceLayout{ServiceLayoutPerJob, ServiceLayoutPerReplica}

// ServiceLayoutOrDefault returns the job's service layout, PerJob when unset.
func (s *TrainJobSpec) ServiceLayoutOrDefault() ServiceLayout {
	if s.ServiceLayout == "" {
		return ServiceLayoutPerJob
	}
	return s.ServiceLayout
}

// validateServiceLayout checks spec.serviceLayout. MPI's hostfile names
// every host as "<pod>.<job>.<ns>.svc", which only the job's Service makes
// resolve, so MPI runs under PerJob only.
func validateServiceLayout(job *TrainJob, spec *field.Path) field.ErrorList {
	layout := job.Spec.ServiceLayout
	p := spec.Child("serviceLayout")
	if layout != "" && !containsValue(serviceLayouts, layout) {
		return field.ErrorList{field.NotSupported(p, layout, serviceLayouts)}
	}
	if job.Spec.Framework == FrameworkMPI && layout == ServiceLayoutPerReplica {
		return field.ErrorList{field.Invalid(p, layout, "mpi runs only under PerJob: its hostfile names every worker as <pod>.<job>.<namespace>.svc, which the job's one Service resolves")}
	}
	return nil
}
