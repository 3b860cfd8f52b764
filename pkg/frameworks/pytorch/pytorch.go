// Package pytorch is trainstep's PyTorch framework, as the Kubeflow
// Training Operator v1.9 runs a PyTorchJob: a Master and Workers (or
// Workers alone), DDP's and torchrun's environment on every container,
// elastic jobs through torchrun's rendezvous, and Kubeflow's PyTorchJob
// read as it is.
package pytorch

import (
	"strconv"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/frameworks/framework"
)

// Name is the framework's spec.framework value.
const Name = v1alpha1.FrameworkPyTorch

// Training Operator v1.9's PyTorchJob conventions (pytorch_types.go,
// pytorch_defaults.go).
const (
	ContainerName = "pytorch"
	PortName      = "pytorchjob-port"
	Port          = 23456
	// DefaultNprocPerNode is nprocPerNode when neither it nor the
	// deprecated elasticPolicy.nProcPerNode is set.
	DefaultNprocPerNode = "auto"
)

var conventions = &framework.Conventions{
	ReplicaTypes: []framework.ReplicaType{
		{Type: v1alpha1.ReplicaTypeMaster, RestartPolicy: v1alpha1.RestartPolicyOnFailure},
		{Type: v1alpha1.ReplicaTypeWorker, RestartPolicy: v1alpha1.RestartPolicyOnFailure},
	},
	Container: ContainerName,
	PortName:  PortName,
	Port:      Port,
}

// Framework is PyTorch. The operator's "init-pytorch" init container,
// which polls DNS for the master before a worker starts, is not added: it
// needs an extra image from the operator's configuration, and
// torch.distributed retries the master's address itself.
type Framework struct {
	framework.NothingMounted
}

// Name implements framework.Framework.
func (Framework) Name() v1alpha1.Framework { return Name }

// Conventions implements framework.Framework.
func (Framework) Conventions() *framework.Conventions { return conventions }

// Default implements framework.Framework, following pytorch_defaults.go:
// an elastic policy with one bound gets the other, with none gets the
// worker count for both; nprocPerNode is "auto" unless the deprecated
// elasticPolicy.nProcPerNode is set. A TrainJob's elastic job without
// metrics grows into free capacity (growIntoCapacity); a PyTorchJob's
// does not (its conversion says so).
func (Framework) Default(job *v1alpha1.TrainJob) {
	s := &job.Spec
	if ep := s.ElasticPolicy; ep != nil {
		switch {
		case ep.MinReplicas != nil && ep.MaxReplicas != nil:
		case ep.MaxReplicas != nil:
			ep.MinReplicas = copyInt32(ep.MaxReplicas)
		case ep.MinReplicas != nil:
			ep.MaxReplicas = copyInt32(ep.MinReplicas)
		default:
			if worker := s.ReplicaSpecs[v1alpha1.ReplicaTypeWorker]; worker != nil {
				ep.MinReplicas = copyInt32(worker.Replicas)
				ep.MaxReplicas = copyInt32(worker.Replicas)
			}
		}
		if ep.GrowIntoCapacity == nil && len(ep.Metrics) == 0 {
			grow := true
			ep.GrowIntoCapacity = &grow
		}
	}
	if s.NprocPerNode == nil && (s.ElasticPolicy == nil || s.ElasticPolicy.NProcPerNode == nil) {
		auto := DefaultNprocPerNode
		s.NprocPerNode = &auto
	}
}

// FailureRestart implements framework.Framework: DDP is a collective, and
// restarts as a whole; an elastic job's agents re-form the world without
// the replica, which is restarted alone.
func (Framework) FailureRestart(job *v1alpha1.TrainJob) v1alpha1.FailureRestart {
	if job.Spec.ElasticPolicy != nil {
		return v1alpha1.FailureRestartReplica
	}
	return v1alpha1.FailureRestartJob
}

// Elastic implements framework.Elastic: an elastic job's worker bounds as
// defaulting filled them.
func (Framework) Elastic(job *v1alpha1.TrainJob) (framework.ElasticBounds, bool) {
	ep := job.Spec.ElasticPolicy
	if ep == nil {
		return framework.ElasticBounds{}, false
	}
	workers := job.Spec.ReplicaSpecs[v1alpha1.ReplicaTypeWorker].ReplicaCount()
	lo, hi := workers, workers
	if ep.MinReplicas != nil {
		lo = *ep.MinReplicas
	}
	if ep.MaxReplicas != nil {
		hi = *ep.MaxReplicas
	}
	if ep.MinReplicas != nil && ep.MaxReplicas == nil {
		hi = lo
	}
	if ep.MaxReplicas != nil && ep.MinReplicas == nil {
		lo = hi
	}
	return framework.ElasticBounds{
		Type: v1alpha1.ReplicaTypeWorker, Min: lo, Max: hi,
		Initial:   min(max(workers, lo), hi),
		Grows:     ep.GrowIntoCapacity != nil && *ep.GrowIntoCapacity,
		OnMetrics: len(ep.Metrics) > 0,
	}, true
}

// SuccessRule follows the PyTorchJob controller's UpdateJobStatus: the
// Master decides when there is one; otherwise one finished worker ends an
// elastic job and every worker must succeed in a static one.
func (Framework) SuccessRule(job *v1alpha1.TrainJob) framework.SuccessRule {
	if rule, ok := framework.LeaderIfPresent(job, v1alpha1.ReplicaTypeMaster); ok {
		return rule
	}
	workers := []v1alpha1.ReplicaType{v1alpha1.ReplicaTypeWorker}
	if job.Spec.ElasticPolicy != nil {
		return framework.SuccessRule{AnyOf: workers}
	}
	return framework.SuccessRule{AllOf: workers}
}

// numericNprocPerNode is nprocPerNode when it is a number, else 1 ("auto",
// "cpu" and "gpu" are resolved by torchrun, which then ignores WORLD_SIZE).
func numericNprocPerNode(job *v1alpha1.TrainJob) int {
	if job.Spec.NprocPerNode == nil {
		return 1
	}
	if n, err := strconv.Atoi(*job.Spec.NprocPerNode); err == nil {
		return n
	}
	return 1
}

func copyInt32(p *int32) *int32 {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}
