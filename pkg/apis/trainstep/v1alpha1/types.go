package v1alpha1

import (
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Group, Version and Kind of the TrainJob manifest.
const (
	Group      = "trainstep.dev"
	Version    = "v1alpha1"
	Kind       = "TrainJob"
	APIVersion = Group + "/" + Version
)

// TrainJob is one distributed training job. It is never stored in a cluster:
// trainstep reads it from a file and creates the objects it describes.
type TrainJob struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec TrainJobSpec `json:"spec"`
}

// Framework names the training framework whose conventions (ports, env,
// success rule, extra objects) the replicas follow. Which frameworks exist,
// and everything about each, is pkg/frameworks' (one folder per framework,
// one table); the API only spells the names of those it has always had,
// for its readers and tests.
type Framework string

// Names of frameworks (a framework's folder also names its own).
const (
	FrameworkTensorFlow Framework = "tensorflow"
	FrameworkPyTorch    Framework = "pytorch"
	FrameworkMPI        Framework = "mpi"
	FrameworkJAX        Framework = "jax"
	FrameworkXGBoost    Framework = "xgboost"
)

// ReplicaType is the role of a group of replicas, spelled as Kubeflow spells it.
type ReplicaType string

// Replica types used by the frameworks (Kubeflow's spelling). Which types a
// framework accepts is its folder's (pkg/frameworks/<name>).
const (
	ReplicaTypePS        ReplicaType = "PS"
	ReplicaTypeWorker    ReplicaType = "Worker"
	ReplicaTypeChief     ReplicaType = "Chief"
	ReplicaTypeMaster    ReplicaType = "Master"
	ReplicaTypeEvaluator ReplicaType = "Evaluator"
	ReplicaTypeLauncher  ReplicaType = "Launcher"
)

// TrainJobSpec is the desired shape of a training job.
type TrainJobSpec struct {
	// Framework selects the conventions the replicas follow.
	Framework Framework `json:"framework"`

	// ReplicaSpecs maps each replica type of the framework (PS, Worker,
	// Chief, Master, Evaluator, Launcher) to how many replicas of it run
	// and how.
	ReplicaSpecs map[ReplicaType]*ReplicaSpec `json:"replicaSpecs"`

	// RunPolicy holds the job-wide policies: restarts, deadline, cleanup, scheduling.
	RunPolicy RunPolicy `json:"runPolicy,omitempty"`

	// SuccessPolicy decides when the job has succeeded. Default: the
	// framework's deciding replica; AllWorkers: every worker too (TensorFlow).
	SuccessPolicy SuccessPolicy `json:"successPolicy,omitempty"`

	// MetricsFrom is "<Type>/<index>", the replica whose JSON termination
	// message becomes the job's metrics. Default: the replica that decides success.
	MetricsFrom string `json:"metricsFrom,omitempty"`

	// NprocPerNode is PyTorch's processes per replica: a number, "auto",
	// "cpu" or "gpu" (Kubeflow PyTorchJob). WORLD_SIZE multiplies by it when numeric.
	NprocPerNode *string `json:"nprocPerNode,omitempty"`

	// ElasticPolicy makes a PyTorch job elastic (torchrun rendezvous).
	ElasticPolicy *ElasticPolicy `json:"elasticPolicy,omitempty"`

	// SlotsPerWorker is the number of MPI slots per worker (default 1).
	SlotsPerWorker *int32 `json:"slotsPerWorker,omitempty"`

	// MPIImplementation is OpenMPI (default), Intel or MPICH.
	MPIImplementation MPIImplementation `json:"mpiImplementation,omitempty"`

	// SSHAuthMountPath is where the SSH key Secret is mounted in MPI
	// replicas (default /root/.ssh).
	SSHAuthMountPath string `json:"sshAuthMountPath,omitempty"`

	// RunLauncherAsWorker makes the MPI launcher also run ranks (MPIJob v2beta1).
	RunLauncherAsWorker *bool `json:"runLauncherAsWorker,omitempty"`

	// LauncherCreationPolicy says when the MPI launcher pod is created:
	// AtStartup (default) together with the workers, or WaitForWorkersReady
	// once every worker pod is Running and Ready (MPIJob v2beta1).
	LauncherCreationPolicy LauncherCreationPolicy `json:"launcherCreationPolicy,omitempty"`

	// ServiceLayout says how replicas get DNS names: PerJob (default for a
	// TrainJob and for MPI) or PerReplica (default for the Training
	// Operator's Kubeflow manifests, whose env it keeps identical).
	ServiceLayout ServiceLayout `json:"serviceLayout,omitempty"`
}

// LauncherCreationPolicy says when an MPI job's launcher is created.
type LauncherCreationPolicy string

// Launcher creation policies, as in MPIJob v2beta1. WaitForWorkersReady keeps
// mpirun from starting before the workers' DNS names resolve.
const (
	LauncherCreationAtStartup           LauncherCreationPolicy = "AtStartup"
	LauncherCreationWaitForWorkersReady LauncherCreationPolicy = "WaitForWorkersReady"
)

// RestartPolicy says what happens when a replica's container exits.
type RestartPolicy string

// Restart policies. ExitCode is decided by trainstep: exit codes 1–127 are
// permanent, 128–255 and RetryableExitCodes are retried.
const (
	RestartPolicyNever     RestartPolicy = "Never"
	RestartPolicyOnFailure RestartPolicy = "OnFailure"
	RestartPolicyAlways    RestartPolicy = "Always"
	RestartPolicyExitCode  RestartPolicy = "ExitCode"
)

// ReplicaSpec describes one replica type.
type ReplicaSpec struct {
	// Replicas is how many pods of this type run (default 1).
	Replicas *int32 `json:"replicas,omitempty"`

	// RestartPolicy is Never, OnFailure, Always or ExitCode.
	RestartPolicy RestartPolicy `json:"restartPolicy,omitempty"`

	// RetryableExitCodes are exit codes retried under ExitCode, in
	// addition to 128–255.
	RetryableExitCodes []int32 `json:"retryableExitCodes,omitempty"`

	// Template is the pod template of every replica of this type.
	Template corev1.PodTemplateSpec `json:"template"`
}

// CleanPodPolicy says which pods are deleted when the job ends.
type CleanPodPolicy string

// Clean pod policies (Kubeflow's names).
const (
	CleanPodPolicyNone    CleanPodPolicy = "None"
	CleanPodPolicyRunning CleanPodPolicy = "Running"
	CleanPodPolicyAll     CleanPodPolicy = "All"
)

// RunPolicy holds the job-wide runtime policies (Kubeflow's RunPolicy).
type RunPolicy struct {
	// CleanPodPolicy: None, Running (default) or All.
	CleanPodPolicy *CleanPodPolicy `json:"cleanPodPolicy,omitempty"`

	// BackoffLimit is how many restarts (in place or by recreation) the job
	// allows before it fails with BackoffLimitExceeded. Nil means no limit,
	// as with the Training Operator; an MPI job defaults to 6, as MPI
	// Operator's launcher Job does.
	BackoffLimit *int32 `json:"backoffLimit,omitempty"`

	// ActiveDeadlineSeconds bounds the job's running time; past it the job
	// fails with DeadlineExceeded.
	ActiveDeadlineSeconds *int64 `json:"activeDeadlineSeconds,omitempty"`

	// TTLSecondsAfterFinished is accepted from Kubeflow manifests and
	// ignored: trainstep cleans up when the step ends.
	TTLSecondsAfterFinished *int32 `json:"ttlSecondsAfterFinished,omitempty"`

	// SchedulingPolicy configures gang scheduling, queue and priority.
	SchedulingPolicy *SchedulingPolicy `json:"schedulingPolicy,omitempty"`

	// Suspend is accepted from Kubeflow manifests; a suspended job is an error.
	Suspend *bool `json:"suspend,omitempty"`

	// FailurePolicy says what a failed or lost replica restarts: itself or
	// the whole job, counted against BackoffLimit or not.
	FailurePolicy *FailurePolicy `json:"failurePolicy,omitempty"`
}

// FailureRestart is what a retryable failure restarts.
type FailureRestart string

// Failure restarts. Job suits collective training (DDP, all-reduce, JAX,
// MultiWorkerMirrored), where one rank's death breaks every other rank's
// collective call; Replica suits parameter servers and elastic jobs.
const (
	FailureRestartJob     FailureRestart = "Job"
	FailureRestartReplica FailureRestart = "Replica"
)

// FailureAction is what a failure policy rule does with a failure it matches.
type FailureAction string

// Failure actions.
const (
	// FailureActionIgnore restarts (per FailurePolicy.Restart) without
	// counting against backoffLimit: the failure was not the job's fault.
	FailureActionIgnore FailureAction = "Ignore"
	// FailureActionRestartJob stops every replica and starts the job's next
	// attempt; it counts one restart.
	FailureActionRestartJob FailureAction = "RestartJob"
	// FailureActionRestartReplica recreates the failed replica alone; it
	// counts one restart.
	FailureActionRestartReplica FailureAction = "RestartReplica"
	// FailureActionFailJob fails the job at once.
	FailureActionFailJob FailureAction = "FailJob"
)

// FailurePolicy is the job-level failure policy, in the manner of
// Kubernetes Job's podFailurePolicy and JobSet's failurePolicy.
type FailurePolicy struct {
	// Restart is what a retryable failure that no rule matches restarts:
	// Job or Replica (default by framework: Job for pytorch without
	// elasticPolicy, mpi, jax and tensorflow without PS).
	Restart FailureRestart `json:"restart,omitempty"`
	// Rules are tried in order; the first that matches a failure decides
	// it. When Rules is not given, one rule is: Ignore on the pod
	// condition DisruptionTarget (preemption, eviction, node loss). An
	// empty list turns that off.
	Rules []FailurePolicyRule `json:"rules"`
}

// FailurePolicyRule matches a replica failure by its exit code or its
// pod's conditions, optionally only for some replica types.
type FailurePolicyRule struct {
	Action FailureAction `json:"action"`
	// OnExitCodes matches the main container's exit code.
	OnExitCodes *ExitCodesRequirement `json:"onExitCodes,omitempty"`
	// OnPodConditions matches when any of these conditions is on the pod.
	OnPodConditions []PodConditionPattern `json:"onPodConditions,omitempty"`
	// ReplicaTypes limits the rule to these types (all when empty).
	ReplicaTypes []ReplicaType `json:"replicaTypes,omitempty"`
}

// ExitCodesOperator is In or NotIn, as in a Job's podFailurePolicy.
type ExitCodesOperator string

// Exit code operators.
const (
	ExitCodesOpIn    ExitCodesOperator = "In"
	ExitCodesOpNotIn ExitCodesOperator = "NotIn"
)

// ExitCodesRequirement matches exit codes.
type ExitCodesRequirement struct {
	Operator ExitCodesOperator `json:"operator"`
	Values   []int32           `json:"values"`
}

// PodConditionPattern matches a pod condition of this type with this
// status (default True).
type PodConditionPattern struct {
	Type   corev1.PodConditionType `json:"type"`
	Status corev1.ConditionStatus  `json:"status,omitempty"`
}

// PodConditionDisruptionTarget is the condition Kubernetes puts on a pod
// it is about to remove for preemption, eviction, a taint or a lost node.
const PodConditionDisruptionTarget corev1.PodConditionType = "DisruptionTarget"

// GangKind selects how a job is started all-or-nothing.
type GangKind string

// Gang kinds.
const (
	GangNone             GangKind = "none"
	GangBuiltin          GangKind = "builtin"
	GangSchedulerPlugins GangKind = "scheduler-plugins"
	GangVolcano          GangKind = "volcano"
	GangKueue            GangKind = "kueue"
	// GangKubernetes is Kubernetes' own gang scheduling (KEP-4671): a
	// scheduling.k8s.io/v1beta1 PodGroup and the default scheduler.
	GangKubernetes GangKind = "kubernetes"
)

// SchedulingPolicy is Kubeflow's SchedulingPolicy plus the gang kind and
// the built-in gang's attempts.
type SchedulingPolicy struct {
	// Gang is none (default), builtin, kubernetes, scheduler-plugins,
	// volcano or kueue.
	Gang GangKind `json:"gang,omitempty"`

	// MinAvailable is how many pods must be bound together (default: all).
	MinAvailable *int32 `json:"minAvailable,omitempty"`

	// Queue is the Volcano or Kueue queue.
	Queue string `json:"queue,omitempty"`

	// MinResources overrides the PodGroup's minResources (default: the sum
	// of the first MinAvailable replicas' requests).
	MinResources *corev1.ResourceList `json:"minResources,omitempty"`

	// PriorityClass is set as priorityClassName on every pod (and on the
	// Volcano and Kubernetes PodGroups).
	PriorityClass string `json:"priorityClass,omitempty"`

	// ScheduleTimeoutSeconds bounds one attempt to bind MinAvailable pods
	// (default 300); with gang kubernetes, the whole wait.
	ScheduleTimeoutSeconds *int32 `json:"scheduleTimeoutSeconds,omitempty"`

	// MaxScheduleAttempts is how many attempts the builtin gang makes
	// before the job ends Unschedulable (default 3).
	MaxScheduleAttempts *int32 `json:"maxScheduleAttempts,omitempty"`

	// WorkloadPriorityClass is the Kueue WorkloadPriorityClass of the
	// job's pod group (gang kueue): its priority in its queue, apart from
	// the pods' PriorityClass. Default: the job's label
	// kueue.x-k8s.io/priority-class.
	WorkloadPriorityClass string `json:"workloadPriorityClass,omitempty"`
}

// SuccessPolicy decides when a job has succeeded.
type SuccessPolicy string

// Success policies (Kubeflow TFJob's names; the empty string is Default).
const (
	SuccessPolicyDefault    SuccessPolicy = "Default"
	SuccessPolicyAllWorkers SuccessPolicy = "AllWorkers"
)

// RDZVBackend is a torchrun rendezvous backend.
type RDZVBackend string

// Rendezvous backends accepted by Kubeflow PyTorchJob.
const (
	BackendC10D   RDZVBackend = "c10d"
	BackendETCD   RDZVBackend = "etcd"
	BackendETCDv2 RDZVBackend = "etcd-v2"
)

// ElasticPolicy is Kubeflow PyTorchJob's elasticPolicy.
type ElasticPolicy struct {
	MinReplicas  *int32       `json:"minReplicas,omitempty"`
	MaxReplicas  *int32       `json:"maxReplicas,omitempty"`
	RDZVBackend  *RDZVBackend `json:"rdzvBackend,omitempty"`
	RDZVPort     *int32       `json:"rdzvPort,omitempty"`
	RDZVHost     *string      `json:"rdzvHost,omitempty"`
	RDZVID       *string      `json:"rdzvId,omitempty"`
	RDZVConf     []RDZVConf   `json:"rdzvConf,omitempty"`
	Standalone   *bool        `json:"standalone,omitempty"`
	NProcPerNode *int32       `json:"nProcPerNode,omitempty"`
	MaxRestarts  *int32       `json:"maxRestarts,omitempty"`
	// Metrics are the HPA MetricSpecs the worker count follows (Resource
	// metrics, evaluated by trainstep at the HPA's algorithm), starting at
	// the Worker replicas.
	Metrics []autoscalingv2.MetricSpec `json:"metrics,omitempty"`
	// GrowIntoCapacity is trainstep's own: true gives the job a worker for
	// every slot up to MaxReplicas from the start, each joining as capacity
	// frees up; false starts the Worker replicas and keeps them, as the
	// Training Operator does. Default: true for a TrainJob, false for a
	// PyTorchJob; not with Metrics, which decide the count.
	GrowIntoCapacity *bool `json:"growIntoCapacity,omitempty"`
}

// RDZVConf is one torchrun rendezvous option.
type RDZVConf struct {
	Key   string `json:"key,omitempty"`
	Value string `json:"value,omitempty"`
}

// MPIImplementation selects the MPI flavour's hostfile format and env.
type MPIImplementation string

// MPI implementations (MPI Operator v2's names).
const (
	MPIImplementationOpenMPI MPIImplementation = "OpenMPI"
	MPIImplementationIntel   MPIImplementation = "Intel"
	MPIImplementationMPICH   MPIImplementation = "MPICH"
)
