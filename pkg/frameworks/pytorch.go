package frameworks

import (
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
)

// PyTorch environment, as the Training Operator v1.9 sets it (envvar.go,
// master.go, elastic.go of its pytorch controller). PET_* are torchrun's
// options read from the environment.
const (
	EnvPythonUnbuffered = "PYTHONUNBUFFERED"
	EnvMasterAddr       = "MASTER_ADDR"
	EnvMasterPort       = "MASTER_PORT"
	EnvWorldSize        = "WORLD_SIZE"
	EnvRank             = "RANK"
	EnvPETMasterAddr    = "PET_MASTER_ADDR"
	EnvPETMasterPort    = "PET_MASTER_PORT"
	EnvPETNodeRank      = "PET_NODE_RANK"
	EnvPETNprocPerNode  = "PET_NPROC_PER_NODE"
	EnvPETNnodes        = "PET_NNODES"
	EnvPETRDZVEndpoint  = "PET_RDZV_ENDPOINT"
	EnvPETRDZVBackend   = "PET_RDZV_BACKEND"
	EnvPETRDZVID        = "PET_RDZV_ID"
	EnvPETRDZVConf      = "PET_RDZV_CONF"
	EnvPETStandalone    = "PET_STANDALONE"
	EnvPETMaxRestarts   = "PET_MAX_RESTARTS"
)

// pytorch follows the Training Operator v1.9's PyTorchJob: the same
// variables on every container of every replica. The operator's
// "init-pytorch" init container, which polls DNS for the master before a
// worker starts, is not added: it needs an extra image from the operator's
// configuration, and torch.distributed retries the master's address itself.
type pytorch struct {
	noExtraObjects
}

func (p pytorch) ConfigurePod(job *v1alpha1.TrainJob, at Placement, replica ReplicaRef, spec *corev1.PodSpec) error {
	return configureOne(p, job, at, replica, spec)
}

func (pytorch) Prepare(job *v1alpha1.TrainJob, at Placement) (PodConfigurer, error) {
	env, err := pytorchEnv(job, at)
	if err != nil {
		return nil, err
	}
	return pytorchPods{env: env, ranked: Replicas(job, v1alpha1.ReplicaTypeMaster) > 0}, nil
}

// pytorchPods sets the job's PyTorch variables on every container of a pod.
type pytorchPods struct {
	// env is every pod's variables; RANK and PET_NODE_RANK are left empty.
	env []corev1.EnvVar
	// ranked says env holds RANK and PET_NODE_RANK.
	ranked bool
}

func (p pytorchPods) ConfigurePod(replica ReplicaRef, spec *corev1.PodSpec) error {
	env := append([]corev1.EnvVar(nil), p.env...)
	if p.ranked {
		rank := replica.Index
		if replica.Type == v1alpha1.ReplicaTypeWorker {
			rank++
		}
		for i := range env {
			if env[i].Name == EnvRank || env[i].Name == EnvPETNodeRank {
				env[i].Value = itoa(rank)
			}
		}
	}
	appendToEveryContainer(spec, env)
	return nil
}

// pytorchEnv lists the variables in the Training Operator's order, the
// replica's rank left empty.
func pytorchEnv(job *v1alpha1.TrainJob, at Placement) ([]corev1.EnvVar, error) {
	env := []corev1.EnvVar{envVar(EnvPythonUnbuffered, "1")}
	total := TotalReplicas(job)

	// Only a job with a Master gets a fixed rank and world size; an elastic
	// job of workers is ranked by torchrun's rendezvous.
	if Replicas(job, v1alpha1.ReplicaTypeMaster) > 0 {
		port := itoa(int(Port(job, v1alpha1.ReplicaTypeMaster)))
		addr := PeerHost(job, at, v1alpha1.ReplicaTypeMaster, 0)
		env = append(env,
			envVar(EnvMasterPort, port),
			envVar(EnvPETMasterPort, port),
			envVar(EnvMasterAddr, addr),
			envVar(EnvPETMasterAddr, addr),
			envVar(EnvWorldSize, itoa(total*numericNprocPerNode(job))),
			envVar(EnvRank, ""),
			envVar(EnvPETNodeRank, ""),
		)
	}
	if job.Spec.NprocPerNode != nil {
		env = append(env, envVar(EnvPETNprocPerNode, *job.Spec.NprocPerNode))
	}
	if job.Spec.ElasticPolicy == nil {
		return append(env, envVar(EnvPETNnodes, itoa(total))), nil
	}
	elastic, err := elasticEnv(job, at)
	if err != nil {
		return nil, err
	}
	return append(env, elastic...), nil
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

// elasticEnv is torchrun's rendezvous configuration of an elastic job.
func elasticEnv(job *v1alpha1.TrainJob, at Placement) ([]corev1.EnvVar, error) {
	policy := job.Spec.ElasticPolicy
	nnodes, err := elasticNnodes(job)
	if err != nil {
		return nil, err
	}
	backend := string(v1alpha1.BackendC10D)
	if policy.RDZVBackend != nil {
		backend = string(*policy.RDZVBackend)
	}
	env := []corev1.EnvVar{
		envVar(EnvPETRDZVEndpoint, rendezvousEndpoint(job, at)),
		envVar(EnvPETRDZVBackend, backend),
		envVar(EnvPETNnodes, nnodes),
	}
	if policy.MaxRestarts != nil {
		env = append(env, envVar(EnvPETMaxRestarts, itoa(int(*policy.MaxRestarts))))
	}
	if policy.NProcPerNode != nil {
		env = append(env, envVar(EnvPETNprocPerNode, itoa(int(*policy.NProcPerNode))))
	}
	if policy.RDZVID != nil {
		env = append(env, envVar(EnvPETRDZVID, *policy.RDZVID))
	}
	if len(policy.RDZVConf) > 0 {
		pairs := make([]string, len(policy.RDZVConf))
		for i, c := range policy.RDZVConf {
			pairs[i] = c.Key + "=" + c.Value
		}
		env = append(env, envVar(EnvPETRDZVConf, strings.Join(pairs, ",")))
	}
	if policy.Standalone != nil && *policy.Standalone {
		env = append(env, envVar(EnvPETStandalone, ""))
	}
	return env, nil
}

// elasticNnodes is "min:max", or the worker count when neither is set.
func elasticNnodes(job *v1alpha1.TrainJob) (string, error) {
	policy := job.Spec.ElasticPolicy
	if policy.MinReplicas == nil && policy.MaxReplicas == nil {
		if job.Spec.ReplicaSpecs[v1alpha1.ReplicaTypeWorker] == nil {
			return "", fmt.Errorf("setting %s: an elastic job needs Worker replicas", EnvPETNnodes)
		}
		return itoa(Replicas(job, v1alpha1.ReplicaTypeWorker)), nil
	}
	// Kubeflow's defaulting fills a missing bound with the other one.
	lo, hi := policy.MinReplicas, policy.MaxReplicas
	if lo == nil {
		lo = hi
	}
	if hi == nil {
		hi = lo
	}
	return fmt.Sprintf("%d:%d", *lo, *hi), nil
}

// rendezvousEndpoint is rdzvHost (default Worker 0's PeerHost) and
// rdzvPort (default the workers' port).
func rendezvousEndpoint(job *v1alpha1.TrainJob, at Placement) string {
	policy := job.Spec.ElasticPolicy
	host := PeerHost(job, at, v1alpha1.ReplicaTypeWorker, 0)
	if policy.RDZVHost != nil {
		host = *policy.RDZVHost
	}
	port := Port(job, v1alpha1.ReplicaTypeWorker)
	if policy.RDZVPort != nil {
		port = *policy.RDZVPort
	}
	return fmt.Sprintf("%s:%d", host, port)
}

// SuccessRule follows the PyTorchJob controller's UpdateJobStatus: the
// Master decides when there is one; otherwise one finished worker ends an
// elastic job and every worker must succeed in a static one.
func (pytorch) SuccessRule(job *v1alpha1.TrainJob) SuccessRule {
	if rule, ok := leaderIfPresent(job, v1alpha1.ReplicaTypeMaster); ok {
		return rule
	}
	workers := []v1alpha1.ReplicaType{v1alpha1.ReplicaTypeWorker}
	if job.Spec.ElasticPolicy != nil {
		return SuccessRule{AnyOf: workers}
	}
	return SuccessRule{AllOf: workers}
}
