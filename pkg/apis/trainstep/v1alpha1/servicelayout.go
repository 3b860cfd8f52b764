package v1alpha1

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

// ServiceLayouts lists every service layout.
var ServiceLayouts = []ServiceLayout{ServiceLayoutPerJob, ServiceLayoutPerReplica}

// ServiceLayoutOrDefault returns the job's service layout, PerJob when unset.
func (s *TrainJobSpec) ServiceLayoutOrDefault() ServiceLayout {
	if s.ServiceLayout == "" {
		return ServiceLayoutPerJob
	}
	return s.ServiceLayout
}
