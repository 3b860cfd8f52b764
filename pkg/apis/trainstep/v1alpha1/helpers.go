package v1alpha1

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Framework conventions of the Kubeflow Training Operator v1.9
// (pkg/apis/kubeflow.org/v1/*_types.go) and the MPI Operator v2
// (pkg/apis/kubeflow/v2beta1/constants.go). The main container is the one
// the operator puts its env and port on.
const (
	ContainerNameTensorFlow = "tensorflow"
	ContainerNamePyTorch    = "pytorch"
	ContainerNameJAX        = "jax"
	ContainerNameXGBoost    = "xgboost"

	PortNameTensorFlow = "tfjob-port"
	PortNamePyTorch    = "pytorchjob-port"
	PortNameJAX        = "jaxjob-port"
	PortNameXGBoost    = "xgboostjob-port"

	PortTensorFlow int32 = 2222
	PortPyTorch    int32 = 23456
	PortJAX        int32 = 6666
	PortXGBoost    int32 = 9999
)

// Defaults that are not tied to one framework's replica specs.
const (
	DefaultSlotsPerWorker         int32 = 1
	DefaultSSHAuthMountPath             = "/root/.ssh"
	DefaultScheduleTimeoutSeconds int32 = 300
	DefaultMaxScheduleAttempts    int32 = 3
	// DefaultMPIBackoffLimit is an MPI job's backoffLimit when unset: MPI
	// Operator v2 runs the launcher as a batch Job, whose own default
	// backoffLimit (6) ends a launcher that keeps failing.
	DefaultMPIBackoffLimit int32 = 6
	// DefaultNprocPerNode is PyTorchJob's default nprocPerNode (Kubeflow v1.9
	// pytorch_defaults.go), set when elasticPolicy.nProcPerNode is not.
	DefaultNprocPerNode = "auto"
)

// Suffixes of the MPI job-wide objects (MPI Operator v2 names).
const (
	MPIConfigMapSuffix = "-config"
	MPISSHSecretSuffix = "-ssh"
)

// TFClusterConfigMapSuffix names the ConfigMap that holds a distributed
// TensorFlow job's cluster, which every replica's TF_CONFIG refers to.
const TFClusterConfigMapSuffix = "-tf-cluster"

// allowedReplicaTypes lists, per framework, the replica types Kubeflow
// accepts, in the order documentation lists them.
var allowedReplicaTypes = map[Framework][]ReplicaType{
	FrameworkTensorFlow: {ReplicaTypeChief, ReplicaTypeMaster, ReplicaTypePS, ReplicaTypeWorker, ReplicaTypeEvaluator},
	FrameworkPyTorch:    {ReplicaTypeMaster, ReplicaTypeWorker},
	FrameworkMPI:        {ReplicaTypeLauncher, ReplicaTypeWorker},
	FrameworkJAX:        {ReplicaTypeWorker},
	FrameworkXGBoost:    {ReplicaTypeMaster, ReplicaTypeWorker},
}

// knownReplicaTypes are every replica type trainstep spells, for key normalisation.
var knownReplicaTypes = []ReplicaType{
	ReplicaTypePS, ReplicaTypeWorker, ReplicaTypeChief,
	ReplicaTypeMaster, ReplicaTypeEvaluator, ReplicaTypeLauncher,
}

// IsFramework reports whether f is a supported framework.
func IsFramework(f Framework) bool {
	_, ok := allowedReplicaTypes[f]
	return ok
}

// AllowedReplicaTypes returns the replica types framework f accepts (nil for
// an unknown framework). The caller must not modify the slice.
func AllowedReplicaTypes(f Framework) []ReplicaType {
	return allowedReplicaTypes[f]
}

// CanonicalReplicaType returns Kubeflow's CamelCase spelling of a replica
// type written in any case ("worker" → Worker, "ps" → PS), and whether it is
// a type trainstep knows.
func CanonicalReplicaType(s string) (ReplicaType, bool) {
	for _, t := range knownReplicaTypes {
		if strings.EqualFold(s, string(t)) {
			return t, true
		}
	}
	return ReplicaType(s), false
}

// DefaultContainerName is the name of the container the framework's env and
// port go on; empty for MPI, whose main container is the first one.
func DefaultContainerName(f Framework) string {
	switch f {
	case FrameworkTensorFlow:
		return ContainerNameTensorFlow
	case FrameworkPyTorch:
		return ContainerNamePyTorch
	case FrameworkJAX:
		return ContainerNameJAX
	case FrameworkXGBoost:
		return ContainerNameXGBoost
	}
	return ""
}

// DefaultPort is the framework's named port on the main container; MPI has
// none (ranks talk over SSH) and returns "", 0.
func DefaultPort(f Framework) (name string, port int32) {
	switch f {
	case FrameworkTensorFlow:
		return PortNameTensorFlow, PortTensorFlow
	case FrameworkPyTorch:
		return PortNamePyTorch, PortPyTorch
	case FrameworkJAX:
		return PortNameJAX, PortJAX
	case FrameworkXGBoost:
		return PortNameXGBoost, PortXGBoost
	}
	return "", 0
}

// DefaultRestartPolicy is the restart policy Kubeflow gives a replica type
// that declares none: TFJob, JAXJob and XGBoostJob Never, PyTorchJob
// OnFailure (training-operator v1.9 *_types.go); MPIJob launcher OnFailure,
// workers Never (mpi-operator v2beta1 constants.go).
func DefaultRestartPolicy(f Framework, rt ReplicaType) RestartPolicy {
	switch f {
	case FrameworkPyTorch:
		return RestartPolicyOnFailure
	case FrameworkMPI:
		if rt == ReplicaTypeLauncher {
			return RestartPolicyOnFailure
		}
	}
	return RestartPolicyNever
}

// InPlaceRestartPolicy is the restart policy a replica's pod (or local
// process) is given: its own, except in a job that restarts as a whole,
// where no container is restarted in place — trainstep restarts every
// replica together instead, so one rank's failure costs one restart.
func InPlaceRestartPolicy(job *TrainJob, rt ReplicaType) RestartPolicy {
	spec := job.Spec.ReplicaSpecs[rt]
	if spec == nil {
		return RestartPolicyNever
	}
	if RestartsWithJob(job, rt) {
		return RestartPolicyNever
	}
	return spec.RestartPolicy
}

// RestartsWithJob reports whether a failure of a replica of type rt
// restarts the whole job: failurePolicy restart is Job and the replica
// takes part in the collective. An MPI launcher does not (mpirun failing
// to reach workers not yet up is retried in place, as the MPI Operator
// does; a worker's failure restarts it with the job), nor does a
// TensorFlow evaluator, which only reads checkpoints.
func RestartsWithJob(job *TrainJob, rt ReplicaType) bool {
	fp := job.Spec.RunPolicy.FailurePolicy
	if fp == nil || fp.Restart != FailureRestartJob {
		return false
	}
	switch {
	case job.Spec.Framework == FrameworkMPI && rt == ReplicaTypeLauncher:
		return false
	case rt == ReplicaTypeEvaluator:
		return false
	}
	return true
}

// MainContainerIndex is the index of the main container in a pod spec: the
// one named defaultName, else the first; -1 when there are no containers.
func MainContainerIndex(spec *corev1.PodSpec, defaultName string) int {
	if len(spec.Containers) == 0 {
		return -1
	}
	if defaultName != "" {
		for i := range spec.Containers {
			if spec.Containers[i].Name == defaultName {
				return i
			}
		}
	}
	return 0
}

// MainContainer returns the main container of replica type rt, pointing
// into the job's template (changes to it change the job), or nil when the
// type is absent or has no container.
func MainContainer(job *TrainJob, rt ReplicaType) *corev1.Container {
	spec := job.Spec.ReplicaSpecs[rt]
	if spec == nil {
		return nil
	}
	pod := &spec.Template.Spec
	i := MainContainerIndex(pod, DefaultContainerName(job.Spec.Framework))
	if i < 0 {
		return nil
	}
	return &pod.Containers[i]
}

// ReplicaCount is how many pods of this type run: Replicas, 1 when unset
// (the default), 0 for a nil spec.
func (s *ReplicaSpec) ReplicaCount() int32 {
	if s == nil {
		return 0
	}
	if s.Replicas == nil {
		return 1
	}
	return *s.Replicas
}

// GangSize is how many pods a gang of the job waits for at its start: every
// slot, except that an elastic job that scales on metrics starts with its
// initial worker target, since the slots above it are not created.
func GangSize(job *TrainJob) int32 {
	total := TotalReplicas(job)
	if ScalesOnMetrics(job) {
		total -= ReplicaSlots(job, ReplicaTypeWorker) - InitialWorkerTarget(job)
	}
	return total
}

// InitialWorkerTarget is the worker count an elastic job that scales on
// metrics starts with: Worker.replicas within the elastic bounds.
func InitialWorkerTarget(job *TrainJob) int32 {
	lo, hi, _ := ElasticBounds(job)
	return min(max(job.Spec.ReplicaSpecs[ReplicaTypeWorker].ReplicaCount(), lo), hi)
}

// TotalReplicas is the number of pods of every type together, an elastic
// job's workers counted up to maxReplicas (ReplicaSlots).
func TotalReplicas(job *TrainJob) int32 {
	var total int32
	for rt := range job.Spec.ReplicaSpecs {
		total += ReplicaSlots(job, rt)
	}
	return total
}

// ReplicaSlots is how many pods of type rt trainstep may create: the
// replicas asked for, except for an elastic job's workers, which go up to
// maxReplicas. An elastic job starts once minReplicas of them run; the rest
// join as capacity frees up.
func ReplicaSlots(job *TrainJob, rt ReplicaType) int32 {
	n := job.Spec.ReplicaSpecs[rt].ReplicaCount()
	if rt != ReplicaTypeWorker || !IsElastic(job) {
		return n
	}
	if _, hi, ok := ElasticBounds(job); ok {
		return max(n, hi)
	}
	return n
}

// ElasticBounds returns an elastic job's [minReplicas, maxReplicas] of
// workers as defaulting filled them; ok is false for other jobs.
func ElasticBounds(job *TrainJob) (lo, hi int32, ok bool) {
	if !IsElastic(job) {
		return 0, 0, false
	}
	ep := job.Spec.ElasticPolicy
	workers := job.Spec.ReplicaSpecs[ReplicaTypeWorker].ReplicaCount()
	lo, hi = workers, workers
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
	return lo, hi, true
}

// ReplicaName is the name of one replica's pod (and, outside MPI, its
// Service): <job>-<lower-case type>-<index>, Training Operator style.
func ReplicaName(jobName string, rt ReplicaType, index int) string {
	return fmt.Sprintf("%s-%s-%d", jobName, strings.ToLower(string(rt)), index)
}

// MPIConfigMapName is the name of an MPI job's hostfile ConfigMap.
func MPIConfigMapName(jobName string) string { return jobName + MPIConfigMapSuffix }

// TFClusterConfigMapName is the name of a distributed TensorFlow job's
// cluster ConfigMap.
func TFClusterConfigMapName(jobName string) string { return jobName + TFClusterConfigMapSuffix }

// MPISSHSecretName is the name of an MPI job's SSH auth Secret.
func MPISSHSecretName(jobName string) string { return jobName + MPISSHSecretSuffix }

// TrainerStatusName is the name of the Service that reaches the step's
// progress endpoint and of the Secret holding its CA and token, which the
// replicas mount.
func TrainerStatusName(jobName string) string { return jobName + "-status" }

// TrainerStatusTLSName is the name of the Secret holding the endpoint's
// serving certificate and key, which only the step reads.
func TrainerStatusTLSName(jobName string) string { return jobName + "-status-tls" }

// ParseMetricsFrom splits a metricsFrom value "<Type>/<index>"; the type is
// returned in Kubeflow's spelling.
func ParseMetricsFrom(s string) (ReplicaType, int, error) {
	typ, idx, ok := strings.Cut(s, "/")
	if !ok || typ == "" {
		return "", 0, fmt.Errorf("must be <Type>/<index>, e.g. Worker/0")
	}
	index, err := strconv.Atoi(idx)
	if err != nil || index < 0 {
		return "", 0, fmt.Errorf("must be <Type>/<index> with a non-negative index, e.g. Worker/0")
	}
	rt, _ := CanonicalReplicaType(typ)
	return rt, index, nil
}

// CleanPodPolicyOrDefault returns the job's clean pod policy, Running when unset.
func (p *RunPolicy) CleanPodPolicyOrDefault() CleanPodPolicy {
	if p.CleanPodPolicy == nil {
		return CleanPodPolicyRunning
	}
	return *p.CleanPodPolicy
}

// IsElastic reports whether the job is an elastic PyTorch job.
func IsElastic(job *TrainJob) bool {
	return job.Spec.Framework == FrameworkPyTorch && job.Spec.ElasticPolicy != nil
}

// ScalesOnMetrics reports whether an elastic job's worker count follows
// elasticPolicy.metrics (the HPA's algorithm) rather than free capacity alone.
func ScalesOnMetrics(job *TrainJob) bool {
	return IsElastic(job) && len(job.Spec.ElasticPolicy.Metrics) > 0
}

// LauncherWaitsForWorkers reports whether an MPI job's launcher is created
// only once every worker is Ready (launcherCreationPolicy WaitForWorkersReady).
func LauncherWaitsForWorkers(job *TrainJob) bool {
	return job.Spec.Framework == FrameworkMPI && job.Spec.LauncherCreationPolicy == LauncherCreationWaitForWorkersReady
}

// DeepCopy returns an independent copy of the job, so a caller can default
// or override it without touching the original. Every field of a TrainJob
// round-trips through JSON, which keeps this free of generated code.
func (j *TrainJob) DeepCopy() *TrainJob {
	if j == nil {
		return nil
	}
	data, err := json.Marshal(j)
	if err != nil {
		panic(fmt.Sprintf("copying TrainJob: %v", err)) // cannot happen: plain data types
	}
	out := &TrainJob{}
	if err := json.Unmarshal(data, out); err != nil {
		panic(fmt.Sprintf("copying TrainJob: %v", err))
	}
	return out
}

// DeepCopy copies a failure policy, rules and all.
func (in *FailurePolicy) DeepCopy() *FailurePolicy {
	if in == nil {
		return nil
	}
	out := &FailurePolicy{Restart: in.Restart}
	if in.Rules != nil {
		out.Rules = make([]FailurePolicyRule, len(in.Rules))
		for i, r := range in.Rules {
			c := FailurePolicyRule{Action: r.Action}
			if r.OnExitCodes != nil {
				c.OnExitCodes = &ExitCodesRequirement{Operator: r.OnExitCodes.Operator, Values: append([]int32(nil), r.OnExitCodes.Values...)}
			}
			c.OnPodConditions = append([]PodConditionPattern(nil), r.OnPodConditions...)
			c.ReplicaTypes = append([]ReplicaType(nil), r.ReplicaTypes...)
			out.Rules[i] = c
		}
	}
	return out
}
