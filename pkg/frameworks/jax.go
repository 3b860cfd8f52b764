package frameworks

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
)

// JAX environment, as the Training Operator v1.9 sets it (jax/envvar.go):
// jax.distributed.initialize reads the coordinator and the process layout.
const (
	EnvCoordinatorAddress = "COORDINATOR_ADDRESS"
	EnvCoordinatorPort    = "COORDINATOR_PORT"
	EnvNumProcesses       = "NUM_PROCESSES"
	EnvProcessID          = "PROCESS_ID"
)

// jax follows the Training Operator v1.9's JAXJob: Worker 0 coordinates and
// every container of every replica gets the same variables.
type jax struct {
	noExtraObjects
}

func (j jax) ConfigurePod(job *v1alpha1.TrainJob, at Placement, replica ReplicaRef, spec *corev1.PodSpec) error {
	return configureOne(j, job, at, replica, spec)
}

func (jax) Prepare(job *v1alpha1.TrainJob, at Placement) (PodConfigurer, error) {
	return jaxPods{
		coordinatorPort:    itoa(int(Port(job, v1alpha1.ReplicaTypeWorker))),
		coordinatorAddress: PeerHost(job, at, v1alpha1.ReplicaTypeWorker, 0),
		numProcesses:       itoa(TotalReplicas(job)),
	}, nil
}

// jaxPods sets the JAX variables on every container of a pod.
type jaxPods struct {
	coordinatorPort, coordinatorAddress, numProcesses string
}

func (p jaxPods) ConfigurePod(replica ReplicaRef, spec *corev1.PodSpec) error {
	appendToEveryContainer(spec, []corev1.EnvVar{
		envVar(EnvPythonUnbuffered, "1"),
		envVar(EnvCoordinatorPort, p.coordinatorPort),
		envVar(EnvCoordinatorAddress, p.coordinatorAddress),
		envVar(EnvNumProcesses, p.numProcesses),
		envVar(EnvProcessID, itoa(replica.Index)),
	})
	return nil
}

// SuccessRule follows the JAXJob controller's UpdateJobStatus: the job
// succeeds when every worker has.
func (jax) SuccessRule(job *v1alpha1.TrainJob) SuccessRule {
	if Replicas(job, v1alpha1.ReplicaTypeWorker) == 0 {
		return allOfEveryType(job)
	}
	return SuccessRule{AllOf: []v1alpha1.ReplicaType{v1alpha1.ReplicaTypeWorker}}
}
