package pytorch

import (
	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/kubeflow"
)

// PyTorchJob is kubeflow.org/v1 PyTorchJob.
type PyTorchJob struct {
	kubeflow.Header `json:",inline"`
	Spec            PyTorchJobSpec `json:"spec"`
}

// PyTorchJobSpec is PyTorchJob's spec. Its elasticPolicy has exactly the
// fields of the TrainJob's.
type PyTorchJobSpec struct {
	RunPolicy           kubeflow.RunPolicy               `json:"runPolicy"`
	ElasticPolicy       *v1alpha1.ElasticPolicy          `json:"elasticPolicy,omitempty"`
	PyTorchReplicaSpecs map[string]*kubeflow.ReplicaSpec `json:"pytorchReplicaSpecs"`
	NprocPerNode        *string                          `json:"nprocPerNode,omitempty"`
	// ServiceLayout is trainstep's own (spec.serviceLayout): PerReplica,
	// the operator's layout and this kind's default, or PerJob.
	ServiceLayout string `json:"serviceLayout,omitempty"`
}

// Kubeflow implements framework.Framework.
func (Framework) Kubeflow() []kubeflow.Kind {
	return []kubeflow.Kind{{
		APIVersion: kubeflow.APIVersionV1, Kind: "PyTorchJob", ReplicaSpecsField: "pytorchReplicaSpecs",
		New: func() kubeflow.Object { return &PyTorchJob{} },
	}}
}

// ToTrainJob converts a PyTorchJob, keeping both the current nprocPerNode
// and the deprecated elasticPolicy.nProcPerNode as written. An elastic job
// without metrics keeps its Worker replicas, as the Training Operator
// does, unless it sets growIntoCapacity.
func (j *PyTorchJob) ToTrainJob() (*v1alpha1.TrainJob, []string, error) {
	c := &kubeflow.Converter{}
	job := c.Job(&j.Header, Name, kubeflow.Replicas{Specs: j.Spec.PyTorchReplicaSpecs, Field: "spec.pytorchReplicaSpecs", Container: ContainerName},
		j.Spec.RunPolicy, j.Spec.ServiceLayout)
	job.Spec.NprocPerNode = kubeflow.Copy(j.Spec.NprocPerNode)
	if ep := j.Spec.ElasticPolicy; ep != nil {
		job.Spec.ElasticPolicy = ep // same type; the decoded manifest is not reused
		if ep.NProcPerNode != nil {
			// The Training Operator v1.9 webhook's deprecation warning.
			c.Warnf("spec.elasticPolicy.nProcPerNode is deprecated, use spec.nprocPerNode instead")
		}
		if ep.GrowIntoCapacity == nil && len(ep.Metrics) == 0 {
			grow := false
			ep.GrowIntoCapacity = &grow
		}
	}
	return job, c.Warnings(), nil
}
