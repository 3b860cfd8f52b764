// Package xgboost is trainstep's XGBoost framework, as the Kubeflow
// Training Operator v1.9 runs an XGBoostJob: a Master running the Rabit
// tracker and Workers, the same variables on every container, and
// Kubeflow's XGBoostJob read as it is.
package xgboost

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/frameworks/framework"
	"github.com/trainstep/trainstep/pkg/kubeflow"
)

// Name is the framework's spec.framework value.
const Name = v1alpha1.FrameworkXGBoost

// Training Operator v1.9's XGBoostJob conventions (xgboost_types.go).
const (
	ContainerName = "xgboost"
	PortName      = "xgboostjob-port"
	Port          = 9999
)

// XGBoost environment, as the Training Operator v1.9 sets it
// (xgboost/xgboost.go): the Rabit tracker runs on Master 0; WORKER_* serve
// LightGBM jobs run as XGBoostJobs.
const (
	EnvMasterAddr  = "MASTER_ADDR"
	EnvMasterPort  = "MASTER_PORT"
	EnvWorldSize   = "WORLD_SIZE"
	EnvRank        = "RANK"
	EnvWorkerPort  = "WORKER_PORT"
	EnvWorkerAddrs = "WORKER_ADDRS"
)

var conventions = &framework.Conventions{
	ReplicaTypes: []framework.ReplicaType{
		{Type: v1alpha1.ReplicaTypeMaster, RestartPolicy: v1alpha1.RestartPolicyNever},
		{Type: v1alpha1.ReplicaTypeWorker, RestartPolicy: v1alpha1.RestartPolicyNever},
	},
	Container: ContainerName,
	PortName:  PortName,
	Port:      Port,
}

// Framework is XGBoost.
type Framework struct {
	framework.NothingMounted
}

// Name implements framework.Framework.
func (Framework) Name() v1alpha1.Framework { return Name }

// Conventions implements framework.Framework.
func (Framework) Conventions() *framework.Conventions { return conventions }

// Default implements framework.Framework: XGBoost has no defaults of its own.
func (Framework) Default(*v1alpha1.TrainJob) {}

// Validate implements framework.Framework: one Master runs the tracker.
func (Framework) Validate(job *v1alpha1.TrainJob) field.ErrorList {
	errs := framework.Required(job, v1alpha1.ReplicaTypeMaster, "xgboost needs a Master")
	return append(errs, framework.ExactlyOne(job, v1alpha1.ReplicaTypeMaster, "xgboost needs a Master")...)
}

// OwnFields implements framework.Framework: XGBoost has no fields of its own.
func (Framework) OwnFields(*v1alpha1.TrainJobSpec) []framework.OwnField { return nil }

// FailureRestart implements framework.Framework: Rabit's workers carry on
// while one is restarted.
func (Framework) FailureRestart(*v1alpha1.TrainJob) v1alpha1.FailureRestart {
	return v1alpha1.FailureRestartReplica
}

// Prepare implements framework.Framework.
func (Framework) Prepare(job *v1alpha1.TrainJob, at framework.Placement) (framework.PodConfigurer, error) {
	total := framework.Total(job)
	p := xgboostPods{
		masterPort: framework.Itoa(int(conventions.PortOf(job, v1alpha1.ReplicaTypeMaster))),
		masterAddr: framework.PeerHost(job, at, v1alpha1.ReplicaTypeMaster, 0),
		worldSize:  framework.Itoa(total),
		masters:    framework.Count(job, v1alpha1.ReplicaTypeMaster),
	}
	if total > 1 {
		// The Training Operator lists total-1 workers: every replica but the
		// one master. The list is the same for every pod: built once.
		addrs := make([]string, total-1)
		for i := range addrs {
			addrs[i] = framework.PeerHost(job, at, v1alpha1.ReplicaTypeWorker, i)
		}
		p.workerPort = framework.Itoa(int(conventions.PortOf(job, v1alpha1.ReplicaTypeWorker)))
		p.workerAddrs = strings.Join(addrs, ",")
		names := fmt.Sprintf("the job name %q", at.JobName)
		if job.Spec.ServiceLayoutOrDefault() == v1alpha1.ServiceLayoutPerJob {
			names += " (every worker's address names it twice, <pod>.<job>; spec.serviceLayout PerReplica names it once)"
		}
		if err := framework.CheckEnvVarSize(total, EnvWorkerAddrs, len(p.workerAddrs), names); err != nil {
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

func (p xgboostPods) ConfigurePod(replica framework.ReplicaRef, spec *corev1.PodSpec) error {
	// Ranks count the masters first, then the workers.
	rank := replica.Index
	if replica.Type == v1alpha1.ReplicaTypeWorker {
		rank += p.masters
	}
	env := []corev1.EnvVar{
		framework.EnvVar(EnvMasterPort, p.masterPort),
		framework.EnvVar(EnvMasterAddr, p.masterAddr),
		framework.EnvVar(EnvWorldSize, p.worldSize),
		framework.EnvVar(EnvRank, framework.Itoa(rank)),
		framework.EnvVar(framework.EnvPythonUnbuffered, "1"),
	}
	if p.workerAddrs != "" {
		env = append(env, framework.EnvVar(EnvWorkerPort, p.workerPort), framework.EnvVar(EnvWorkerAddrs, p.workerAddrs))
	}
	framework.AppendToEveryContainer(spec, env)
	return nil
}

// SuccessRule follows the XGBoostJob controller's UpdateJobStatus: the job
// succeeds when the Master does.
func (Framework) SuccessRule(job *v1alpha1.TrainJob) framework.SuccessRule {
	if rule, ok := framework.LeaderIfPresent(job, v1alpha1.ReplicaTypeMaster); ok {
		return rule
	}
	return framework.AllOfEveryType(job)
}

// localPorts pairs each variable that holds a port with the variable that
// holds its host(s): locally the port is that replica's own.
var localPorts = map[string]string{
	EnvMasterPort: EnvMasterAddr,
	EnvWorkerPort: EnvWorkerAddrs,
}

// LocalValue implements framework.Local: the ports become the local port
// of the host they go with (the first worker's, for WORKER_PORT).
func (Framework) LocalValue(name, _ string, _ framework.ReplicaRef, lookup func(string) (string, bool), peers framework.Peers) (string, bool, string) {
	return framework.LocalPorts(localPorts, name, lookup, peers)
}

// XGBoostJob is kubeflow.org/v1 XGBoostJob.
type XGBoostJob struct {
	kubeflow.Header `json:",inline"`
	Spec            XGBoostJobSpec `json:"spec"`
}

// XGBoostJobSpec is XGBoostJob's spec.
type XGBoostJobSpec struct {
	RunPolicy       kubeflow.RunPolicy               `json:"runPolicy"`
	XGBReplicaSpecs map[string]*kubeflow.ReplicaSpec `json:"xgbReplicaSpecs"`
	// ServiceLayout is trainstep's own (spec.serviceLayout): PerReplica,
	// the operator's layout and this kind's default, or PerJob.
	ServiceLayout string `json:"serviceLayout,omitempty"`
}

// Kubeflow implements framework.Framework.
func (Framework) Kubeflow() []kubeflow.Kind {
	return []kubeflow.Kind{{
		APIVersion: kubeflow.APIVersionV1, Kind: "XGBoostJob", ReplicaSpecsField: "xgbReplicaSpecs",
		New: func() kubeflow.Object { return &XGBoostJob{} },
	}}
}

// ToTrainJob converts an XGBoostJob.
func (j *XGBoostJob) ToTrainJob() (*v1alpha1.TrainJob, []string, error) {
	c := &kubeflow.Converter{}
	job := c.Job(&j.Header, Name, kubeflow.Replicas{Specs: j.Spec.XGBReplicaSpecs, Field: "spec.xgbReplicaSpecs", Container: ContainerName},
		j.Spec.RunPolicy, j.Spec.ServiceLayout)
	return job, c.Warnings(), nil
}
