// Package jax is trainstep's JAX framework, as the Kubeflow Training
// Operator v1.9 runs a JAXJob: Workers only, Worker 0 coordinating, the
// same variables on every container of every replica, and Kubeflow's JAXJob
// read as it is.
package jax

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/frameworks/framework"
	"github.com/trainstep/trainstep/pkg/kubeflow"
)

// Name is the framework's spec.framework value.
const Name = v1alpha1.FrameworkJAX

// Training Operator v1.9's JAXJob conventions (jax_types.go).
const (
	ContainerName = "jax"
	PortName      = "jaxjob-port"
	Port          = 6666
)

// JAX environment, as the Training Operator v1.9 sets it (jax/envvar.go):
// jax.distributed.initialize reads the coordinator and the process layout.
const (
	EnvCoordinatorAddress = "COORDINATOR_ADDRESS"
	EnvCoordinatorPort    = "COORDINATOR_PORT"
	EnvNumProcesses       = "NUM_PROCESSES"
	EnvProcessID          = "PROCESS_ID"
)

var conventions = &framework.Conventions{
	ReplicaTypes: []framework.ReplicaType{{Type: v1alpha1.ReplicaTypeWorker, RestartPolicy: v1alpha1.RestartPolicyNever}},
	Container:    ContainerName,
	PortName:     PortName,
	Port:         Port,
}

// Framework is JAX.
type Framework struct {
	framework.NothingMounted
}

// Name implements framework.Framework.
func (Framework) Name() v1alpha1.Framework { return Name }

// Conventions implements framework.Framework.
func (Framework) Conventions() *framework.Conventions { return conventions }

// Default implements framework.Framework: JAX has no defaults of its own.
func (Framework) Default(*v1alpha1.TrainJob) {}

// Validate implements framework.Framework: a JAX job runs on its workers.
func (Framework) Validate(job *v1alpha1.TrainJob) field.ErrorList {
	return framework.Required(job, v1alpha1.ReplicaTypeWorker, "jax needs Worker replicas")
}

// OwnFields implements framework.Framework: JAX has no fields of its own.
func (Framework) OwnFields(*v1alpha1.TrainJobSpec) []framework.OwnField { return nil }

// FailureRestart implements framework.Framework: JAX's processes are a
// collective.
func (Framework) FailureRestart(*v1alpha1.TrainJob) v1alpha1.FailureRestart {
	return v1alpha1.FailureRestartJob
}

// Prepare implements framework.Framework.
func (Framework) Prepare(job *v1alpha1.TrainJob, at framework.Placement) (framework.PodConfigurer, error) {
	return jaxPods{
		coordinatorPort:    framework.Itoa(int(conventions.PortOf(job, v1alpha1.ReplicaTypeWorker))),
		coordinatorAddress: framework.PeerHost(job, at, v1alpha1.ReplicaTypeWorker, 0),
		numProcesses:       framework.Itoa(framework.Total(job)),
	}, nil
}

// jaxPods sets the JAX variables on every container of a pod.
type jaxPods struct {
	coordinatorPort, coordinatorAddress, numProcesses string
}

func (p jaxPods) ConfigurePod(replica framework.ReplicaRef, spec *corev1.PodSpec) error {
	framework.AppendToEveryContainer(spec, []corev1.EnvVar{
		framework.EnvVar(framework.EnvPythonUnbuffered, "1"),
		framework.EnvVar(EnvCoordinatorPort, p.coordinatorPort),
		framework.EnvVar(EnvCoordinatorAddress, p.coordinatorAddress),
		framework.EnvVar(EnvNumProcesses, p.numProcesses),
		framework.EnvVar(EnvProcessID, framework.Itoa(replica.Index)),
	})
	return nil
}

// SuccessRule follows the JAXJob controller's UpdateJobStatus: the job
// succeeds when every worker has.
func (Framework) SuccessRule(job *v1alpha1.TrainJob) framework.SuccessRule {
	if framework.Count(job, v1alpha1.ReplicaTypeWorker) == 0 {
		return framework.AllOfEveryType(job)
	}
	return framework.SuccessRule{AllOf: []v1alpha1.ReplicaType{v1alpha1.ReplicaTypeWorker}}
}

// LocalValue implements framework.Local: the coordinator's port becomes
// Worker 0's local port.
func (Framework) LocalValue(name, _ string, _ framework.ReplicaRef, lookup func(string) (string, bool), peers framework.Peers) (string, bool, string) {
	return framework.LocalPorts(map[string]string{EnvCoordinatorPort: EnvCoordinatorAddress}, name, lookup, peers)
}

// JAXJob is kubeflow.org/v1 JAXJob.
type JAXJob struct {
	kubeflow.Header `json:",inline"`
	Spec            JAXJobSpec `json:"spec"`
}

// JAXJobSpec is JAXJob's spec.
type JAXJobSpec struct {
	RunPolicy       kubeflow.RunPolicy               `json:"runPolicy"`
	JAXReplicaSpecs map[string]*kubeflow.ReplicaSpec `json:"jaxReplicaSpecs"`
	// ServiceLayout is trainstep's own (spec.serviceLayout): PerReplica,
	// the operator's layout and this kind's default, or PerJob.
	ServiceLayout string `json:"serviceLayout,omitempty"`
}

// Kubeflow implements framework.Framework.
func (Framework) Kubeflow() []kubeflow.Kind {
	return []kubeflow.Kind{{
		APIVersion: kubeflow.APIVersionV1, Kind: "JAXJob", ReplicaSpecsField: "jaxReplicaSpecs",
		New: func() kubeflow.Object { return &JAXJob{} },
	}}
}

// ToTrainJob converts a JAXJob.
func (j *JAXJob) ToTrainJob() (*v1alpha1.TrainJob, []string, error) {
	c := &kubeflow.Converter{}
	job := c.Job(&j.Header, Name, kubeflow.Replicas{Specs: j.Spec.JAXReplicaSpecs, Field: "spec.jaxReplicaSpecs", Container: ContainerName},
		j.Spec.RunPolicy, j.Spec.ServiceLayout)
	return job, c.Warnings(), nil
}
