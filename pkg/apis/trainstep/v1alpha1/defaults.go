package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
)

// SetDefaults fills every unset field of job with trainstep's defaults,
// which follow the Kubeflow Training Operator v1.9 and the MPI Operator v2
// where they define one. It never overwrites a value the job declares, so
// running it twice changes nothing. Validate checks the result.
func SetDefaults(job *TrainJob) {
	normaliseReplicaTypes(job.Spec.ReplicaSpecs)
	for rt, spec := range job.Spec.ReplicaSpecs {
		if spec != nil {
			setReplicaDefaults(job.Spec.Framework, rt, spec)
		}
	}
	setRunPolicyDefaults(&job.Spec.RunPolicy)
	if job.Spec.SuccessPolicy == "" {
		job.Spec.SuccessPolicy = SuccessPolicyDefault
	}
	if job.Spec.ServiceLayout == "" {
		job.Spec.ServiceLayout = ServiceLayoutPerJob
	}
	switch job.Spec.Framework {
	case FrameworkMPI:
		setMPIDefaults(&job.Spec)
	case FrameworkPyTorch:
		setPyTorchDefaults(&job.Spec)
	}
	setFailurePolicyDefaults(&job.Spec)
}

// setFailurePolicyDefaults fills in what a failure restarts (by framework)
// and, when no rules are given, the rule that preemption, eviction and
// node loss cost nothing.
func setFailurePolicyDefaults(s *TrainJobSpec) {
	if s.RunPolicy.FailurePolicy == nil {
		s.RunPolicy.FailurePolicy = &FailurePolicy{}
	}
	fp := s.RunPolicy.FailurePolicy
	if fp.Restart == "" {
		fp.Restart = DefaultFailureRestart(s)
	}
	if fp.Rules == nil {
		fp.Rules = DefaultFailureRules()
	}
	for i := range fp.Rules {
		for j := range fp.Rules[i].OnPodConditions {
			if c := &fp.Rules[i].OnPodConditions[j]; c.Status == "" {
				c.Status = corev1.ConditionTrue
			}
		}
	}
}

// DefaultFailureRestart is what a failure restarts when the job does not
// say: the whole job for collective training (pytorch without
// elasticPolicy, mpi, jax, tensorflow without PS, i.e. MultiWorkerMirrored),
// the replica alone where the others carry on (tensorflow with PS, xgboost,
// elastic pytorch).
func DefaultFailureRestart(s *TrainJobSpec) FailureRestart {
	switch s.Framework {
	case FrameworkPyTorch:
		if s.ElasticPolicy != nil {
			return FailureRestartReplica
		}
	case FrameworkTensorFlow:
		if _, hasPS := s.ReplicaSpecs[ReplicaTypePS]; hasPS {
			return FailureRestartReplica
		}
	case FrameworkXGBoost:
		return FailureRestartReplica
	}
	return FailureRestartJob
}

// DefaultFailureRules are the rules of a job that gives none: a pod
// Kubernetes removed (DisruptionTarget: preemption, eviction, a taint, a
// lost node) is restarted without counting against backoffLimit.
func DefaultFailureRules() []FailurePolicyRule {
	return []FailurePolicyRule{{
		Action:          FailureActionIgnore,
		OnPodConditions: []PodConditionPattern{{Type: PodConditionDisruptionTarget, Status: corev1.ConditionTrue}},
	}}
}

// normaliseReplicaTypes renames keys such as "worker" or "ps" to Kubeflow's
// spelling, as the Training Operator does. A key whose canonical spelling is
// also present is left alone, so validation reports it instead of one spec
// silently replacing the other.
func normaliseReplicaTypes(specs map[ReplicaType]*ReplicaSpec) {
	for rt, spec := range specs {
		canonical, known := CanonicalReplicaType(string(rt))
		if !known || canonical == rt {
			continue
		}
		if _, taken := specs[canonical]; taken {
			continue
		}
		delete(specs, rt)
		specs[canonical] = spec
	}
}

func setReplicaDefaults(f Framework, rt ReplicaType, spec *ReplicaSpec) {
	if spec.Replicas == nil {
		one := int32(1)
		spec.Replicas = &one
	}
	if spec.RestartPolicy == "" {
		spec.RestartPolicy = DefaultRestartPolicy(f, rt)
	}
	pod := &spec.Template.Spec
	defaultName := DefaultContainerName(f)
	main := MainContainerIndex(pod, defaultName)
	if main < 0 {
		return
	}
	// An unnamed main container takes the framework's name, so the pod is
	// valid and the operator's conventions find it.
	if pod.Containers[main].Name == "" && defaultName != "" {
		pod.Containers[main].Name = defaultName
	}
	if name, port := DefaultPort(f); name != "" && !hasPortNamed(&pod.Containers[main], name) {
		pod.Containers[main].Ports = append(pod.Containers[main].Ports,
			corev1.ContainerPort{Name: name, ContainerPort: port})
	}
}

func hasPortNamed(c *corev1.Container, name string) bool {
	for _, p := range c.Ports {
		if p.Name == name {
			return true
		}
	}
	return false
}

func setRunPolicyDefaults(p *RunPolicy) {
	if p.CleanPodPolicy == nil {
		running := CleanPodPolicyRunning
		p.CleanPodPolicy = &running
	}
	if p.SchedulingPolicy == nil {
		p.SchedulingPolicy = &SchedulingPolicy{}
	}
	sp := p.SchedulingPolicy
	if sp.Gang == "" {
		sp.Gang = GangNone
	}
	if sp.ScheduleTimeoutSeconds == nil {
		timeout := DefaultScheduleTimeoutSeconds
		sp.ScheduleTimeoutSeconds = &timeout
	}
	if sp.MaxScheduleAttempts == nil {
		attempts := DefaultMaxScheduleAttempts
		sp.MaxScheduleAttempts = &attempts
	}
}

// setMPIDefaults follows mpi-operator v2beta1 default.go, and bounds the
// restarts as the launcher's batch Job would.
func setMPIDefaults(s *TrainJobSpec) {
	if s.SlotsPerWorker == nil {
		slots := DefaultSlotsPerWorker
		s.SlotsPerWorker = &slots
	}
	if s.MPIImplementation == "" {
		s.MPIImplementation = MPIImplementationOpenMPI
	}
	if s.SSHAuthMountPath == "" {
		s.SSHAuthMountPath = DefaultSSHAuthMountPath
	}
	if s.LauncherCreationPolicy == "" {
		s.LauncherCreationPolicy = LauncherCreationAtStartup
	}
	if s.RunPolicy.BackoffLimit == nil {
		limit := DefaultMPIBackoffLimit
		s.RunPolicy.BackoffLimit = &limit
	}
}

// setPyTorchDefaults follows training-operator v1.9 pytorch_defaults.go:
// an elastic policy with one bound gets the other, with none gets the
// worker count for both; nprocPerNode is "auto" unless the deprecated
// elasticPolicy.nProcPerNode is set.
func setPyTorchDefaults(s *TrainJobSpec) {
	if ep := s.ElasticPolicy; ep != nil {
		switch {
		case ep.MinReplicas != nil && ep.MaxReplicas != nil:
		case ep.MaxReplicas != nil:
			ep.MinReplicas = copyInt32(ep.MaxReplicas)
		case ep.MinReplicas != nil:
			ep.MaxReplicas = copyInt32(ep.MinReplicas)
		default:
			if worker := s.ReplicaSpecs[ReplicaTypeWorker]; worker != nil {
				ep.MinReplicas = copyInt32(worker.Replicas)
				ep.MaxReplicas = copyInt32(worker.Replicas)
			}
		}
	}
	if s.NprocPerNode == nil && (s.ElasticPolicy == nil || s.ElasticPolicy.NProcPerNode == nil) {
		auto := DefaultNprocPerNode
		s.NprocPerNode = &auto
	}
}

func copyInt32(p *int32) *int32 {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}
