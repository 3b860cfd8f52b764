package mpi

import (
	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/kubeflow"
)

// MPIJob is kubeflow.org/v2beta1 MPIJob (MPI Operator v2).
type MPIJob struct {
	kubeflow.Header `json:",inline"`
	Spec            MPIJobSpec `json:"spec"`
}

// MPIJobSpec is MPIJob v2beta1's spec.
type MPIJobSpec struct {
	SlotsPerWorker         *int32                           `json:"slotsPerWorker,omitempty"`
	RunLauncherAsWorker    *bool                            `json:"runLauncherAsWorker,omitempty"`
	RunPolicy              kubeflow.RunPolicy               `json:"runPolicy,omitempty"`
	MPIReplicaSpecs        map[string]*kubeflow.ReplicaSpec `json:"mpiReplicaSpecs"`
	SSHAuthMountPath       string                           `json:"sshAuthMountPath,omitempty"`
	LauncherCreationPolicy string                           `json:"launcherCreationPolicy,omitempty"`
	MPIImplementation      string                           `json:"mpiImplementation,omitempty"`
	// ServiceLayout is trainstep's own (spec.serviceLayout): PerJob, the
	// MPI Operator's layout and the only one MPI runs under.
	ServiceLayout string `json:"serviceLayout,omitempty"`
}

// Kubeflow implements framework.Framework: MPI Operator v2's MPIJob, and
// Training Operator's, which `trainstep convert` rewrites as the former.
func (Framework) Kubeflow() []kubeflow.Kind {
	return []kubeflow.Kind{
		{
			APIVersion: kubeflow.APIVersionV2beta1, Kind: "MPIJob", ReplicaSpecsField: "mpiReplicaSpecs",
			New: func() kubeflow.Object { return &MPIJob{} },
		},
		{
			APIVersion: kubeflow.APIVersionV1, Kind: "MPIJob", ReplicaSpecsField: "mpiReplicaSpecs",
			New: func() kubeflow.Object { return &MPIJobV1{} },
		},
	}
}

// ToTrainJob converts an MPIJob v2beta1. The MPI Operator defaults an
// unset Worker replicas to 0 (v2beta1 default.go setDefaultsTypeWorker),
// unlike the TrainJob's 1, so the converter sets it explicitly.
func (j *MPIJob) ToTrainJob() (*v1alpha1.TrainJob, []string, error) {
	c := &kubeflow.Converter{}
	job := c.NewTrainJob(&j.Header, Name)
	job.Spec.ReplicaSpecs = c.ReplicaSpecs(j.Spec.MPIReplicaSpecs, "spec.mpiReplicaSpecs", "")
	if worker := job.Spec.ReplicaSpecs[v1alpha1.ReplicaTypeWorker]; worker != nil && worker.Replicas == nil {
		zero := int32(0)
		worker.Replicas = &zero
	}
	job.Spec.RunPolicy = c.RunPolicy(j.Spec.RunPolicy)
	job.Spec.SlotsPerWorker = kubeflow.Copy(j.Spec.SlotsPerWorker)
	job.Spec.RunLauncherAsWorker = kubeflow.Copy(j.Spec.RunLauncherAsWorker)
	job.Spec.SSHAuthMountPath = j.Spec.SSHAuthMountPath
	job.Spec.MPIImplementation = v1alpha1.MPIImplementation(j.Spec.MPIImplementation)
	job.Spec.LauncherCreationPolicy = v1alpha1.LauncherCreationPolicy(j.Spec.LauncherCreationPolicy)
	job.Spec.ServiceLayout = v1alpha1.ServiceLayout(j.Spec.ServiceLayout)
	return job, c.Warnings(), nil
}
