// Package tensorflow is trainstep's TensorFlow framework, as the Kubeflow
// Training Operator v1.9 runs a TFJob: replica types Chief, Master, PS,
// Worker and Evaluator, a TF_CONFIG on the main container of every replica
// of a distributed job, and Kubeflow's TFJob read as it is.
package tensorflow

import (
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/frameworks/framework"
)

// Name is the framework's spec.framework value.
const Name = v1alpha1.FrameworkTensorFlow

// Training Operator v1.9's TFJob conventions (tensorflow_types.go).
const (
	ContainerName = "tensorflow"
	PortName      = "tfjob-port"
	Port          = 2222
)

var conventions = &framework.Conventions{
	ReplicaTypes: []framework.ReplicaType{
		{Type: v1alpha1.ReplicaTypeChief, RestartPolicy: v1alpha1.RestartPolicyNever},
		{Type: v1alpha1.ReplicaTypeMaster, RestartPolicy: v1alpha1.RestartPolicyNever},
		{Type: v1alpha1.ReplicaTypePS, RestartPolicy: v1alpha1.RestartPolicyNever},
		{Type: v1alpha1.ReplicaTypeWorker, RestartPolicy: v1alpha1.RestartPolicyNever},
		// The evaluator only reads checkpoints.
		{Type: v1alpha1.ReplicaTypeEvaluator, RestartPolicy: v1alpha1.RestartPolicyNever, OutsideCollective: true},
	},
	Container: ContainerName,
	PortName:  PortName,
	Port:      Port,
}

// Framework is TensorFlow. The cluster of a distributed job, which lists
// every replica, is kept once in a ConfigMap and expanded into TF_CONFIG by
// the kubelet: written into every pod, it made each pod grow with the job
// (18 KiB at 512 replicas), and the bytes of a job's pods, which the API
// server stores and sends to every watcher, grow with its square.
type Framework struct {
	// The cluster ConfigMap is read by the local backend itself.
	framework.NothingMounted
}

// Name implements framework.Framework.
func (Framework) Name() v1alpha1.Framework { return Name }

// Conventions implements framework.Framework.
func (Framework) Conventions() *framework.Conventions { return conventions }

// Default implements framework.Framework: TensorFlow has no defaults of
// its own.
func (Framework) Default(*v1alpha1.TrainJob) {}

// Validate implements framework.Framework: a Chief or a Master runs at
// most once, never both, and a job needs one of them or Workers to decide
// success.
func (Framework) Validate(job *v1alpha1.TrainJob) field.ErrorList {
	var errs field.ErrorList
	specsPath := field.NewPath("spec", "replicaSpecs")
	specs := job.Spec.ReplicaSpecs
	_, chief := specs[v1alpha1.ReplicaTypeChief]
	_, master := specs[v1alpha1.ReplicaTypeMaster]
	_, worker := specs[v1alpha1.ReplicaTypeWorker]
	if chief && master {
		errs = append(errs, field.Forbidden(specsPath, "must not have both Chief and Master"))
	}
	if !chief && !master && !worker {
		errs = append(errs, field.Required(specsPath.Child(string(v1alpha1.ReplicaTypeWorker)),
			"tensorflow needs a Chief, Master or Worker to decide success"))
	}
	for _, rt := range []v1alpha1.ReplicaType{v1alpha1.ReplicaTypeChief, v1alpha1.ReplicaTypeMaster} {
		errs = append(errs, framework.AtMostOne(job, rt)...)
	}
	return errs
}

// OwnFields implements framework.Framework: AllWorkers is TFJob's.
func (Framework) OwnFields(spec *v1alpha1.TrainJobSpec) []framework.OwnField {
	return []framework.OwnField{{Path: "successPolicy", What: string(v1alpha1.SuccessPolicyAllWorkers), Set: spec.SuccessPolicy == v1alpha1.SuccessPolicyAllWorkers}}
}

// FailureRestart implements framework.Framework: a job with parameter
// servers carries on without a worker (restart the replica); without them
// it is MultiWorkerMirrored, a collective (restart the job).
func (Framework) FailureRestart(job *v1alpha1.TrainJob) v1alpha1.FailureRestart {
	if _, hasPS := job.Spec.ReplicaSpecs[v1alpha1.ReplicaTypePS]; hasPS {
		return v1alpha1.FailureRestartReplica
	}
	return v1alpha1.FailureRestartJob
}

// SuccessRule follows the TFJob controller's UpdateJobStatus: a Chief (or
// Master) decides when the job has one; otherwise Worker 0 decides under
// the Default policy and every worker must succeed under AllWorkers.
func (Framework) SuccessRule(job *v1alpha1.TrainJob) framework.SuccessRule {
	for _, rt := range []v1alpha1.ReplicaType{v1alpha1.ReplicaTypeChief, v1alpha1.ReplicaTypeMaster} {
		if rule, ok := framework.LeaderIfPresent(job, rt); ok {
			return rule
		}
	}
	if framework.Count(job, v1alpha1.ReplicaTypeWorker) == 0 {
		return framework.AllOfEveryType(job)
	}
	if job.Spec.SuccessPolicy == v1alpha1.SuccessPolicyAllWorkers {
		return framework.SuccessRule{AllOf: []v1alpha1.ReplicaType{v1alpha1.ReplicaTypeWorker}}
	}
	rule, _ := framework.LeaderIfPresent(job, v1alpha1.ReplicaTypeWorker)
	return rule
}
