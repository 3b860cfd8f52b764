package frameworks

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
)

// XGBoost environment, as the Training Operator v1.9 sets it
// (xgboost/xgboost.go): the Rabit tracker runs on Master 0; WORKER_* serve
// LightGBM jobs run as XGBoostJobs.
const (
	EnvWorkerPort  = "WORKER_PORT"
	EnvWorkerAddrs = "WORKER_ADDRS"
)

// xgboost follows the Training Operator v1.9's XGBoostJob.
type xgboost struct {
	noExtraObjects
}

func (x xgboost) ConfigurePod(job *v1alpha1.TrainJob, at Placement, replica ReplicaRef, spec *corev1.PodSpec) error {
	return configureOne(x, job, at, replica, spec)
}

func (xgboost) Prepare(job *v1alpha1.TrainJob, at Placement) (PodConfigurer, error) {
	total := TotalReplicas(job)
	p := xgboostPods{
		masterPort: itoa(int(Port(job, v1alpha1.ReplicaTypeMaster))),
		masterAddr: PeerHost(job, at, v1alpha1.ReplicaTypeMaster, 0),
		worldSize:  itoa(total),
		masters:    Replicas(job, v1alpha1.ReplicaTypeMaster),
	}
	if total > 1 {
		// The Training Operator lists total-1 workers: every replica but the
		// one master. The list is the same for every pod: built once.
		addrs := make([]string, total-1)
		for i := range addrs {
			addrs[i] = PeerHost(job, at, v1alpha1.ReplicaTypeWorker, i)
		}
		p.workerPort = itoa(int(Port(job, v1alpha1.ReplicaTypeWorker)))
		p.workerAddrs = strings.Join(addrs, ",")
		names := fmt.Sprintf("the job name %q", at.JobName)
		if job.Spec.ServiceLayoutOrDefault() == v1alpha1.ServiceLayoutPerJob {
			names += " (every worker's address names it twice, <pod>.<job>; spec.serviceLayout PerReplica names it once)"
		}
		if err := checkEnvVarSize(job, EnvWorkerAddrs, len(p.workerAddrs), names); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// xgboostPods sets the XGBoost variables on every container of a pod.
type xgboostPods struct {
	masterPort, masterAddr, worldSize string
	masters                           int
	// workerPort and workerAddrs are empty for a job of one replica.
	workerPort, workerAddrs string
}

func (p xgboostPods) ConfigurePod(replica ReplicaRef, spec *corev1.PodSpec) error {
	// Ranks count the masters first, then the workers.
	rank := replica.Index
	if replica.Type == v1alpha1.ReplicaTypeWorker {
		rank += p.masters
	}
	env := []corev1.EnvVar{
		envVar(EnvMasterPort, p.masterPort),
		envVar(EnvMasterAddr, p.masterAddr),
		envVar(EnvWorldSize, p.worldSize),
		envVar(EnvRank, itoa(rank)),
		envVar(EnvPythonUnbuffered, "1"),
	}
	if p.workerAddrs != "" {
		env = append(env, envVar(EnvWorkerPort, p.workerPort), envVar(EnvWorkerAddrs, p.workerAddrs))
	}
	appendToEveryContainer(spec, env)
	return nil
}

// SuccessRule follows the XGBoostJob controller's UpdateJobStatus: the job
// succeeds when the Master does.
func (xgboost) SuccessRule(job *v1alpha1.TrainJob) SuccessRule {
	if rule, ok := leaderIfPresent(job, v1alpha1.ReplicaTypeMaster); ok {
		return rule
	}
	return allOfEveryType(job)
}
