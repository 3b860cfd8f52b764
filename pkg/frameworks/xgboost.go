package frameworks

import (
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
	servicePerReplica
	noExtraObjects
}

func (xgboost) ConfigurePod(job *v1alpha1.TrainJob, at Placement, replica ReplicaRef, spec *corev1.PodSpec) error {
	// Ranks count the masters first, then the workers.
	rank := replica.Index
	if replica.Type == v1alpha1.ReplicaTypeWorker {
		rank += Replicas(job, v1alpha1.ReplicaTypeMaster)
	}
	total := TotalReplicas(job)
	env := []corev1.EnvVar{
		envVar(EnvMasterPort, itoa(int(Port(job, v1alpha1.ReplicaTypeMaster)))),
		envVar(EnvMasterAddr, v1alpha1.ReplicaName(at.JobName, v1alpha1.ReplicaTypeMaster, 0)),
		envVar(EnvWorldSize, itoa(total)),
		envVar(EnvRank, itoa(rank)),
		envVar(EnvPythonUnbuffered, "1"),
	}
	if total > 1 {
		// The Training Operator lists total-1 workers: every replica but the
		// one master.
		addrs := make([]string, total-1)
		for i := range addrs {
			addrs[i] = v1alpha1.ReplicaName(at.JobName, v1alpha1.ReplicaTypeWorker, i)
		}
		env = append(env,
			envVar(EnvWorkerPort, itoa(int(Port(job, v1alpha1.ReplicaTypeWorker)))),
			envVar(EnvWorkerAddrs, strings.Join(addrs, ",")),
		)
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
