package pytorch

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/frameworks/framework"
)

// PyTorch environment, as the Training Operator v1.9 sets it (envvar.go,
// master.go, elastic.go of its pytorch controller). PET_* are torchrun's
// options read from the environment.
const (
	EnvMasterAddr      = "MASTER_ADDR"
	EnvMasterPort      = "MASTER_PORT"
	EnvWorldSize       = "WORLD_SIZE"
	EnvRank            = "RANK"
	EnvPETMasterAddr   = "PET_MASTER_ADDR"
	EnvPETMasterPort   = "PET_MASTER_PORT"
	EnvPETNodeRank     = "PET_NODE_RANK"
	EnvPETNprocPerNode = "PET_NPROC_PER_NODE"
	EnvPETNnodes       = "PET_NNODES"
	EnvPETRDZVEndpoint = "PET_RDZV_ENDPOINT"
	EnvPETRDZVBackend  = "PET_RDZV_BACKEND"
	EnvPETRDZVID       = "PET_RDZV_ID"
	EnvPETRDZVConf     = "PET_RDZV_CONF"
	EnvPETStandalone   = "PET_STANDALONE"
	EnvPETMaxRestarts  = "PET_MAX_RESTARTS"
)

// Prepare implements framework.Framework.
func (Framework) Prepare(job *v1alpha1.TrainJob, at framework.Placement) (framework.PodConfigurer, error) {
	env, err := pytorchEnv(job, at)
	if err != nil {
		return nil, err
	}
	return pytorchPods{env: env, ranked: framework.Count(job, v1alpha1.ReplicaTypeMaster) > 0}, nil
}

// pytorchPods sets the job's PyTorch variables on every container of a pod.
type pytorchPods struct {
	// env is every pod's variables; RANK and PET_NODE_RANK are left empty.
	env []corev1.EnvVar
	// ranked says env holds RANK and PET_NODE_RANK.
	ranked bool
}

func (p pytorchPods) ConfigurePod(replica framework.ReplicaRef, spec *corev1.PodSpec) error {
	env := append([]corev1.EnvVar(nil), p.env...)
	if p.ranked {
		rank := replica.Index
		if replica.Type == v1alpha1.ReplicaTypeWorker {
			rank++
		}
		for i := range env {
			if env[i].Name == EnvRank || env[i].Name == EnvPETNodeRank {
				env[i].Value = framework.Itoa(rank)
			}
		}
	}
	framework.AppendToEveryContainer(spec, env)
	return nil
}

// pytorchEnv lists the variables in the Training Operator's order, the
// replica's rank left empty.
func pytorchEnv(job *v1alpha1.TrainJob, at framework.Placement) ([]corev1.EnvVar, error) {
	env := []corev1.EnvVar{framework.EnvVar(framework.EnvPythonUnbuffered, "1")}
	// The replicas the job declares, as the operator counts them
	// (getTotalReplicas): an elastic job's workers that may join later are
	// not in the world size at the start.
	total := framework.Total(job)

	// Only a job with a Master gets a fixed rank and world size; an elastic
	// job of workers is ranked by torchrun's rendezvous.
	if framework.Count(job, v1alpha1.ReplicaTypeMaster) > 0 {
		port := framework.Itoa(int(conventions.PortOf(job, v1alpha1.ReplicaTypeMaster)))
		addr := framework.PeerHost(job, at, v1alpha1.ReplicaTypeMaster, 0)
		env = append(env,
			framework.EnvVar(EnvMasterPort, port),
			framework.EnvVar(EnvPETMasterPort, port),
			framework.EnvVar(EnvMasterAddr, addr),
			framework.EnvVar(EnvPETMasterAddr, addr),
			framework.EnvVar(EnvWorldSize, framework.Itoa(total*numericNprocPerNode(job))),
			framework.EnvVar(EnvRank, ""),
			framework.EnvVar(EnvPETNodeRank, ""),
		)
	}
	if job.Spec.NprocPerNode != nil {
		env = append(env, framework.EnvVar(EnvPETNprocPerNode, *job.Spec.NprocPerNode))
	}
	if job.Spec.ElasticPolicy == nil {
		return append(env, framework.EnvVar(EnvPETNnodes, framework.Itoa(total))), nil
	}
	elastic, err := elasticEnv(job, at)
	if err != nil {
		return nil, err
	}
	return append(env, elastic...), nil
}

// elasticEnv is torchrun's rendezvous configuration of an elastic job.
func elasticEnv(job *v1alpha1.TrainJob, at framework.Placement) ([]corev1.EnvVar, error) {
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
		framework.EnvVar(EnvPETRDZVEndpoint, rendezvousEndpoint(job, at)),
		framework.EnvVar(EnvPETRDZVBackend, backend),
		framework.EnvVar(EnvPETNnodes, nnodes),
	}
	if policy.MaxRestarts != nil {
		env = append(env, framework.EnvVar(EnvPETMaxRestarts, framework.Itoa(int(*policy.MaxRestarts))))
	}
	if policy.NProcPerNode != nil {
		env = append(env, framework.EnvVar(EnvPETNprocPerNode, framework.Itoa(int(*policy.NProcPerNode))))
	}
	if policy.RDZVID != nil {
		env = append(env, framework.EnvVar(EnvPETRDZVID, *policy.RDZVID))
	}
	if len(policy.RDZVConf) > 0 {
		pairs := make([]string, len(policy.RDZVConf))
		for i, c := range policy.RDZVConf {
			pairs[i] = c.Key + "=" + c.Value
		}
		env = append(env, framework.EnvVar(EnvPETRDZVConf, strings.Join(pairs, ",")))
	}
	if policy.Standalone != nil && *policy.Standalone {
		env = append(env, framework.EnvVar(EnvPETStandalone, ""))
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
		return framework.Itoa(framework.Count(job, v1alpha1.ReplicaTypeWorker)), nil
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
func rendezvousEndpoint(job *v1alpha1.TrainJob, at framework.Placement) string {
	policy := job.Spec.ElasticPolicy
	host := framework.PeerHost(job, at, v1alpha1.ReplicaTypeWorker, 0)
	if policy.RDZVHost != nil {
		host = *policy.RDZVHost
	}
	port := conventions.PortOf(job, v1alpha1.ReplicaTypeWorker)
	if policy.RDZVPort != nil {
		port = *policy.RDZVPort
	}
	return fmt.Sprintf("%s:%d", host, port)
}
