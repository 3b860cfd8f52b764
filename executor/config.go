package executor

import (
	"io"
	"os"
	"time"

	"go.uber.org/zap"
	"k8s.io/utils/clock"

	"github.com/trainstep/trainstep/pkg/logs"
	"github.com/trainstep/trainstep/pkg/spec"
	"github.com/trainstep/trainstep/pkg/timeline"
)

// Config is everything one run needs, filled by cmd/trainstep.
type Config struct {
	// Spec is the job manifest's bytes; SpecOptions the overrides and flags that shape it.
	Spec        []byte
	SpecOptions spec.Options

	// Local runs the replicas as local processes instead of on a cluster.
	Local bool
	// LocalSupervisor is the command that runs each local replica under a
	// supervisor (trainstep's hidden supervise command; see
	// local.Options.Supervisor). Empty starts the replicas directly.
	LocalSupervisor []string

	// Kubeconfig is the kubeconfig file --kubeconfig names; it wins over
	// KubeconfigPaths, the files kubectl would read otherwise ($KUBECONFIG's
	// list, else ~/.kube/config). With neither, the in-cluster config.
	Kubeconfig      string
	KubeconfigPaths []string
	// KubeContext selects a context of Kubeconfig.
	KubeContext string
	// PodNamespace is the step pod's own namespace, when known.
	PodNamespace string
	// QPS and Burst bound the client's request rate; QPS 0 sets no
	// client-side limit. Burst also bounds the parallel creates and deletes.
	QPS   float32
	Burst int

	// The step pod (OwnerPod + OwnerUID) and the Workflow (OwnerWorkflow +
	// OwnerWorkflowUID), both in PodNamespace: the Workflow owns the job's
	// objects when given, else the step pod (owner.go).
	OwnerPod, OwnerUID              string
	OwnerWorkflow, OwnerWorkflowUID string
	// WorkflowName, when known, labels every object for `argo logs -l`
	// (the proven workflow's name wins, when WorkflowUID is set).
	WorkflowName string
	// WorkflowUID and WorkflowNode are the Argo workflow and the step's
	// node (node.name): together the job's owner identity, which every
	// retry of the step presents and no other step can. The workflow is
	// proven from the pod the step's token is bound to (identity.go).
	WorkflowUID, WorkflowNode string
	// Identity is the owner identity of a run outside Argo: runs given the
	// same one re-attach to each other's objects. Empty (and no workflow):
	// the run draws its own, and logs it.
	Identity string
	// NoNetworkPolicy leaves out the job's NetworkPolicy (render.NetworkPolicy),
	// which otherwise admits only the job's own pods to its replicas.
	NoNetworkPolicy bool
	// NoDisruptionBudget leaves out the PodDisruptionBudget of a job whose
	// ranks restart as a whole (render.DisruptionBudget): a drain may then
	// evict one rank while the others run.
	NoDisruptionBudget bool

	// OutputsDir receives the output parameter files; ProgressFile the
	// "N/M" progress (Argo's $ARGO_PROGRESS_FILE), when set.
	OutputsDir   string
	ProgressFile string

	// APITimeout bounds retries while the API server is unreachable.
	APITimeout time.Duration
	// StuckTimeout bounds a replica waiting in ImagePullBackOff and alike;
	// PendingTimeout a replica the scheduler cannot place.
	StuckTimeout   time.Duration
	PendingTimeout time.Duration
	// NodeLostTimeout bounds how long a replica's node may stop answering
	// before the replica counts as lost to a disruption.
	NodeLostTimeout time.Duration
	// TerminationGrace bounds the teardown after SIGTERM.
	TerminationGrace time.Duration
	// CleanupTimeout bounds the teardown of a job that ended by itself (at
	// least TerminationGrace): nothing kills the step then, and deleting
	// thousands of replicas takes longer than a grace period. A signal
	// during it leaves the teardown TerminationGrace from the signal.
	CleanupTimeout time.Duration
	// LeaseDuration is how long the job's Lease holds without renewal: a
	// second run of the same job waits at most this long after the first
	// one dies.
	LeaseDuration time.Duration

	// APIStatsFile, when set, receives the run's API requests counted by
	// verb and resource (JSON), for benchmarks.
	APIStatsFile string
	// Timeline, when not nil, records the launch's stages; it is written to
	// TimelineFile once every object is created and again when the run ends.
	Timeline     *timeline.Timeline
	TimelineFile string

	// Logs selects which replicas' logs are streamed to Stderr.
	Logs logs.Mode

	// TrainerStatus takes the replicas' training status (Kubeflow
	// Trainer's progress protocol): served on TrainerStatusAddress of the
	// step's pod when OwnerPod is known, on 127.0.0.1 for a local run, and
	// read from the leaders' log lines when logs are streamed.
	TrainerStatus        bool
	TrainerStatusAddress string

	Logger *zap.Logger
	// Stdout receives exactly one line: the result JSON.
	Stdout io.Writer
	// Stderr receives the replicas' prefixed logs.
	Stderr io.Writer
	// Signals delivers SIGTERM/SIGINT; the first one terminates the job.
	Signals <-chan os.Signal
	Clock   clock.WithTicker
	// Outputs lets every writer of this process's result (Run, Report on a
	// second signal) write it once; nil gives each call a gate of its own.
	Outputs *OutputGate

	// status is the run's progress endpoint, nil when it has none.
	status *statusEndpoint
	// stop says, once a signal came, whether it was a stop or the step
	// pod's disruption (handover.go).
	stop *stopKind

	// BeforeSync, for tests, is called before each look the controller
	// takes at the job: a panic there is the reconciler's own.
	BeforeSync func()
}

// Defaults used when a Config field is left zero.
const (
	DefaultAPITimeout       = 2 * time.Minute
	DefaultStuckTimeout     = 10 * time.Minute
	DefaultPendingTimeout   = 30 * time.Minute
	DefaultNodeLostTimeout  = 2 * time.Minute
	DefaultTerminationGrace = 25 * time.Second
	DefaultCleanupTimeout   = 5 * time.Minute
	DefaultOutputsDir       = "/tmp/outputs"
)

func (c *Config) setDefaults() {
	if c.APITimeout <= 0 {
		c.APITimeout = DefaultAPITimeout
	}
	if c.StuckTimeout <= 0 {
		c.StuckTimeout = DefaultStuckTimeout
	}
	if c.PendingTimeout <= 0 {
		c.PendingTimeout = DefaultPendingTimeout
	}
	if c.NodeLostTimeout <= 0 {
		c.NodeLostTimeout = DefaultNodeLostTimeout
	}
	if c.TerminationGrace <= 0 {
		c.TerminationGrace = DefaultTerminationGrace
	}
	if c.CleanupTimeout <= 0 {
		c.CleanupTimeout = DefaultCleanupTimeout
	}
	c.CleanupTimeout = max(c.CleanupTimeout, c.TerminationGrace)
	if c.LeaseDuration <= 0 {
		c.LeaseDuration = DefaultLeaseDuration
	}
	if c.OutputsDir == "" {
		c.OutputsDir = DefaultOutputsDir
	}
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	if c.Stdout == nil {
		c.Stdout = io.Discard
	}
	if c.Stderr == nil {
		c.Stderr = io.Discard
	}
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	if c.Logs == "" {
		c.Logs = logs.ModeLeaders
	}
	if c.Outputs == nil {
		c.Outputs = NewOutputGate()
	}
	if c.stop == nil {
		c.stop = &stopKind{}
	}
}
