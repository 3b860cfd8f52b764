// Package paddle is trainstep's PaddlePaddle framework, as the Kubeflow
// Training Operator v1.9 runs a PaddleJob: in collective mode (Workers
// only) or in parameter-server mode (a Master, the servers, and Workers,
// the trainers), with the small fixed environment of the operator's
// paddlepaddle/envvar.go on every container, and Kubeflow's PaddleJob read
// as it is.
package paddle

import (
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/frameworks/framework"
)

// Name is the framework's spec.framework value.
const Name v1alpha1.Framework = "paddle"

// Training Operator v1.9's PaddleJob conventions (paddlepaddle_types.go):
// the container "paddle", its port "master", restart policy OnFailure.
const (
	ContainerName = "paddle"
	PortName      = "master"
	Port          = 36543
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

// Framework is PaddlePaddle.
type Framework struct {
	framework.NothingMounted
}

// Name implements framework.Framework.
func (Framework) Name() v1alpha1.Framework { return Name }

// Conventions implements framework.Framework.
func (Framework) Conventions() *framework.Conventions { return conventions }

// Default implements framework.Framework: a PaddleJob's defaults are its
// replicas' (restart policy, container, port), set from Conventions.
func (Framework) Default(*v1alpha1.TrainJob) {}

// Validate implements framework.Framework. The operator's webhook asks no
// more than Master and Worker types, which Conventions list; a job needs
// Workers, the trainers of either mode.
func (Framework) Validate(job *v1alpha1.TrainJob) field.ErrorList {
	return framework.Required(job, v1alpha1.ReplicaTypeWorker,
		"paddle needs Workers: alone in collective mode, beside a Master in parameter-server mode")
}

// OwnFields implements framework.Framework: Paddle has no fields of its own.
func (Framework) OwnFields(*v1alpha1.TrainJobSpec) []framework.OwnField { return nil }

// FailureRestart implements framework.Framework: collective mode's workers
// are a collective and restart as a whole; in parameter-server mode the
// others carry on while one replica restarts, as with TensorFlow's.
func (Framework) FailureRestart(job *v1alpha1.TrainJob) v1alpha1.FailureRestart {
	if psMode(job) {
		return v1alpha1.FailureRestartReplica
	}
	return v1alpha1.FailureRestartJob
}

// SuccessRule follows the PaddleJob controller's UpdateJobStatus: with a
// Master the job succeeds when every Master has, otherwise when every
// Worker has.
func (Framework) SuccessRule(job *v1alpha1.TrainJob) framework.SuccessRule {
	for _, rt := range []v1alpha1.ReplicaType{v1alpha1.ReplicaTypeMaster, v1alpha1.ReplicaTypeWorker} {
		if framework.Count(job, rt) > 0 {
			return framework.SuccessRule{AllOf: []v1alpha1.ReplicaType{rt}}
		}
	}
	return framework.AllOfEveryType(job)
}

// psMode reports whether the job runs in parameter-server mode: it has a
// Master (the operator's test is the spec's presence).
func psMode(job *v1alpha1.TrainJob) bool {
	_, ok := job.Spec.ReplicaSpecs[v1alpha1.ReplicaTypeMaster]
	return ok
}
