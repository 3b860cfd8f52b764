package tensorflow

import (
	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/kubeflow"
)

// TFJob is kubeflow.org/v1 TFJob.
type TFJob struct {
	kubeflow.Header `json:",inline"`
	Spec            TFJobSpec `json:"spec"`
}

// TFJobSpec is TFJob's spec.
type TFJobSpec struct {
	RunPolicy           kubeflow.RunPolicy               `json:"runPolicy"`
	SuccessPolicy       *string                          `json:"successPolicy,omitempty"`
	TFReplicaSpecs      map[string]*kubeflow.ReplicaSpec `json:"tfReplicaSpecs"`
	EnableDynamicWorker bool                             `json:"enableDynamicWorker,omitempty"`
	// ServiceLayout is trainstep's own (spec.serviceLayout): PerReplica,
	// the operator's layout and this kind's default, or PerJob.
	ServiceLayout string `json:"serviceLayout,omitempty"`
}

// Kubeflow implements framework.Framework.
func (Framework) Kubeflow() []kubeflow.Kind {
	return []kubeflow.Kind{{
		APIVersion: kubeflow.APIVersionV1, Kind: "TFJob", ReplicaSpecsField: "tfReplicaSpecs",
		New: func() kubeflow.Object { return &TFJob{} },
	}}
}

// ToTrainJob converts a TFJob. Kubeflow's SuccessPolicy "" is Default.
func (j *TFJob) ToTrainJob() (*v1alpha1.TrainJob, []string, error) {
	c := &kubeflow.Converter{}
	job := c.Job(&j.Header, Name, kubeflow.Replicas{Specs: j.Spec.TFReplicaSpecs, Field: "spec.tfReplicaSpecs", Container: ContainerName},
		j.Spec.RunPolicy, j.Spec.ServiceLayout)
	job.Spec.SuccessPolicy = v1alpha1.SuccessPolicyDefault
	if j.Spec.SuccessPolicy != nil && *j.Spec.SuccessPolicy != "" {
		job.Spec.SuccessPolicy = v1alpha1.SuccessPolicy(*j.Spec.SuccessPolicy)
	}
	if j.Spec.EnableDynamicWorker {
		c.Warnf("spec.enableDynamicWorker is ignored: trainstep runs a fixed set of TensorFlow workers")
	}
	return job, c.Warnings(), nil
}
