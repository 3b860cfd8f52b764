package paddle

import (
	autoscalingv2 "k8s.io/api/autoscaling/v2"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/kubeflow"
)

// PaddleJob is kubeflow.org/v1 PaddleJob.
type PaddleJob struct {
	kubeflow.Header `json:",inline"`
	Spec            PaddleJobSpec `json:"spec"`
}

// PaddleJobSpec is PaddleJob's spec.
type PaddleJobSpec struct {
	RunPolicy          kubeflow.RunPolicy               `json:"runPolicy"`
	ElasticPolicy      *ElasticPolicy                   `json:"elasticPolicy,omitempty"`
	PaddleReplicaSpecs map[string]*kubeflow.ReplicaSpec `json:"paddleReplicaSpecs"`
	// ServiceLayout is trainstep's own (spec.serviceLayout): PerReplica,
	// the operator's layout and this kind's default, or PerJob.
	ServiceLayout string `json:"serviceLayout,omitempty"`
}

// ElasticPolicy is PaddleJob's elasticPolicy (PaddleElasticPolicy).
type ElasticPolicy struct {
	MinReplicas *int32                     `json:"minReplicas,omitempty"`
	MaxReplicas *int32                     `json:"maxReplicas,omitempty"`
	MaxRestarts *int32                     `json:"maxRestarts,omitempty"`
	Metrics     []autoscalingv2.MetricSpec `json:"metrics,omitempty"`
}

// Kubeflow implements framework.Framework.
func (Framework) Kubeflow() []kubeflow.Kind {
	return []kubeflow.Kind{{
		APIVersion: kubeflow.APIVersionV1, Kind: "PaddleJob", ReplicaSpecsField: "paddleReplicaSpecs",
		New: func() kubeflow.Object { return &PaddleJob{} },
	}}
}

// ToTrainJob converts a PaddleJob. Its elasticPolicy is accepted and left
// alone, as the operator's PaddleJob controller leaves it (it only
// defaults its bounds): the replicas run as written.
func (j *PaddleJob) ToTrainJob() (*v1alpha1.TrainJob, []string, error) {
	c := &kubeflow.Converter{}
	job := c.Job(&j.Header, Name, kubeflow.Replicas{Specs: j.Spec.PaddleReplicaSpecs, Field: "spec.paddleReplicaSpecs", Container: ContainerName},
		j.Spec.RunPolicy, j.Spec.ServiceLayout)
	if j.Spec.ElasticPolicy != nil {
		c.Warnf("spec.elasticPolicy is ignored, as Training Operator v1.9's PaddleJob controller ignores it: the replicas run as written")
	}
	return job, c.Warnings(), nil
}
