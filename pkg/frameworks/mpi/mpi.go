// Package mpi is trainstep's MPI framework, as MPI Operator v2 runs an
// MPIJob: a Launcher that runs mpirun and reaches the Workers over SSH, one
// job-wide headless Service, a hostfile ConfigMap and an SSH auth Secret;
// Kubeflow's MPIJob v2beta1 read as it is, and Training Operator's MPIJob
// v1 rewritten as one by `trainstep convert`.
package mpi

import (
	"fmt"
	"path"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/frameworks/framework"
)

// Name is the framework's spec.framework value.
const Name = v1alpha1.FrameworkMPI

// MPI Operator v2beta1's defaults (default.go), and the backoffLimit its
// launcher's batch Job would have.
const (
	DefaultSlotsPerWorker   int32 = 1
	DefaultSSHAuthMountPath       = "/root/.ssh"
	// DefaultBackoffLimit is an MPI job's backoffLimit when unset: MPI
	// Operator v2 runs the launcher as a batch Job, whose own default
	// backoffLimit (6) ends a launcher that keeps failing.
	DefaultBackoffLimit int32 = 6
)

var conventions = &framework.Conventions{
	ReplicaTypes: []framework.ReplicaType{
		// mpirun failing to reach workers not yet up is retried in place,
		// as the MPI Operator does; a worker's failure restarts it with
		// the job.
		{Type: v1alpha1.ReplicaTypeLauncher, RestartPolicy: v1alpha1.RestartPolicyOnFailure, OutsideCollective: true, Drives: true},
		{Type: v1alpha1.ReplicaTypeWorker, RestartPolicy: v1alpha1.RestartPolicyNever, ServesPeers: true, Slot: true},
	},
}

// Framework is MPI.
type Framework struct{}

// Name implements framework.Framework.
func (Framework) Name() v1alpha1.Framework { return Name }

// Conventions implements framework.Framework: the main container is the
// first; MPI has no port of its own (ranks talk over SSH).
func (Framework) Conventions() *framework.Conventions { return conventions }

// Default implements framework.Framework, following mpi-operator v2beta1
// default.go, and bounds the restarts as the launcher's batch Job would.
func (Framework) Default(job *v1alpha1.TrainJob) {
	s := &job.Spec
	if s.SlotsPerWorker == nil {
		slots := DefaultSlotsPerWorker
		s.SlotsPerWorker = &slots
	}
	if s.MPIImplementation == "" {
		s.MPIImplementation = v1alpha1.MPIImplementationOpenMPI
	}
	if s.SSHAuthMountPath == "" {
		s.SSHAuthMountPath = DefaultSSHAuthMountPath
	}
	if s.LauncherCreationPolicy == "" {
		s.LauncherCreationPolicy = v1alpha1.LauncherCreationAtStartup
	}
	if s.RunPolicy.BackoffLimit == nil {
		limit := DefaultBackoffLimit
		s.RunPolicy.BackoffLimit = &limit
	}
}

// FailureRestart implements framework.Framework: mpirun's ranks are a
// collective.
func (Framework) FailureRestart(*v1alpha1.TrainJob) v1alpha1.FailureRestart {
	return v1alpha1.FailureRestartJob
}

// SuccessRule implements framework.Framework: the launcher runs mpirun, so
// its success is the job's.
func (Framework) SuccessRule(job *v1alpha1.TrainJob) framework.SuccessRule {
	if rule, ok := framework.LeaderIfPresent(job, v1alpha1.ReplicaTypeLauncher); ok {
		return rule
	}
	return framework.AllOfEveryType(job)
}

// HeldUntilReady implements framework.Staged: under launcherCreationPolicy
// WaitForWorkersReady the launcher is created once every worker is Ready.
func (Framework) HeldUntilReady(job *v1alpha1.TrainJob) (held, awaited v1alpha1.ReplicaType, ok bool) {
	if job.Spec.LauncherCreationPolicy != v1alpha1.LauncherCreationWaitForWorkersReady {
		return "", "", false
	}
	return v1alpha1.ReplicaTypeLauncher, v1alpha1.ReplicaTypeWorker, true
}

// OwnFields implements framework.Framework.
func (Framework) OwnFields(s *v1alpha1.TrainJobSpec) []framework.OwnField {
	return []framework.OwnField{
		{Path: "launcherCreationPolicy", Set: s.LauncherCreationPolicy != ""},
		{Path: "mpiImplementation", Set: s.MPIImplementation != ""},
		{Path: "runLauncherAsWorker", Set: s.RunLauncherAsWorker != nil},
		{Path: "slotsPerWorker", Set: s.SlotsPerWorker != nil},
		{Path: "sshAuthMountPath", Set: s.SSHAuthMountPath != ""},
	}
}

var (
	implementations          = []v1alpha1.MPIImplementation{v1alpha1.MPIImplementationOpenMPI, v1alpha1.MPIImplementationIntel, v1alpha1.MPIImplementationMPICH}
	launcherCreationPolicies = []v1alpha1.LauncherCreationPolicy{v1alpha1.LauncherCreationAtStartup, v1alpha1.LauncherCreationWaitForWorkersReady}
)

// Validate implements framework.Framework: one Launcher, MPIJob's fields,
// and the job-wide Service only.
func (Framework) Validate(job *v1alpha1.TrainJob) field.ErrorList {
	errs := framework.Required(job, v1alpha1.ReplicaTypeLauncher, "mpi needs a Launcher")
	errs = append(errs, framework.ExactlyOne(job, v1alpha1.ReplicaTypeLauncher, "mpi needs a Launcher")...)
	s := &job.Spec
	spec := field.NewPath("spec")
	if s.SlotsPerWorker != nil && *s.SlotsPerWorker < 1 {
		errs = append(errs, field.Invalid(spec.Child("slotsPerWorker"), *s.SlotsPerWorker, "must be >= 1"))
	}
	if !contains(implementations, s.MPIImplementation) {
		errs = append(errs, field.NotSupported(spec.Child("mpiImplementation"), s.MPIImplementation, implementations))
	}
	if !path.IsAbs(s.SSHAuthMountPath) {
		errs = append(errs, field.Invalid(spec.Child("sshAuthMountPath"), s.SSHAuthMountPath, "must be an absolute path"))
	}
	errs = append(errs, validateLauncherCreation(job, spec)...)
	// The hostfile names every host as "<pod>.<job>.<ns>.svc", which only
	// the job's one Service makes resolve.
	if s.ServiceLayout == v1alpha1.ServiceLayoutPerReplica {
		errs = append(errs, field.Invalid(spec.Child("serviceLayout"), s.ServiceLayout, "mpi runs only under PerJob: its hostfile names every worker as <pod>.<job>.<namespace>.svc, which the job's one Service resolves"))
	}
	return errs
}

// validateLauncherCreation checks launcherCreationPolicy and the gangs it can
// run with. A launcher held back until the workers are Ready must not be a
// member the gang waits for: the builtin and Kueue gangs wait for every
// replica's pod to exist, and a PodGroup needs minAvailable within the
// workers (mpi-operator creates its PodGroup with minMember workers+1 and
// deadlocks, kubeflow/mpi-operator#608).
func validateLauncherCreation(job *v1alpha1.TrainJob, spec *field.Path) field.ErrorList {
	s := &job.Spec
	p := spec.Child("launcherCreationPolicy")
	if !contains(launcherCreationPolicies, s.LauncherCreationPolicy) {
		return field.ErrorList{field.NotSupported(p, s.LauncherCreationPolicy, launcherCreationPolicies)}
	}
	sp := s.RunPolicy.SchedulingPolicy
	if s.LauncherCreationPolicy != v1alpha1.LauncherCreationWaitForWorkersReady || sp == nil {
		return nil
	}
	gangPath := spec.Child("runPolicy", "schedulingPolicy")
	switch sp.Gang {
	case v1alpha1.GangBuiltin, v1alpha1.GangKueue:
		return field.ErrorList{field.Forbidden(p, fmt.Sprintf(
			"WaitForWorkersReady cannot be used with %s: %s: the gang waits for the launcher's pod, which waits for the workers to be Ready",
			gangPath.Child("gang"), sp.Gang))}
	case v1alpha1.GangKubernetes, v1alpha1.GangSchedulerPlugins, v1alpha1.GangVolcano:
		workers := s.ReplicaSpecs[v1alpha1.ReplicaTypeWorker].ReplicaCount()
		if sp.MinAvailable == nil || *sp.MinAvailable > workers {
			return field.ErrorList{field.Forbidden(p, fmt.Sprintf(
				"WaitForWorkersReady with %s: %s needs %s set to at most the worker replicas (%d): the launcher joins the PodGroup only once the workers are Ready",
				gangPath.Child("gang"), sp.Gang, gangPath.Child("minAvailable"), workers))}
		}
	}
	return nil
}

func contains[T comparable](values []T, v T) bool {
	for _, x := range values {
		if x == v {
			return true
		}
	}
	return false
}
