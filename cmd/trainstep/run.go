package main

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/zapr"
	"github.com/spf13/cobra"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/trainstep/trainstep/executor"
	"github.com/trainstep/trainstep/pkg/backend/local"
	"github.com/trainstep/trainstep/pkg/logs"
	"github.com/trainstep/trainstep/pkg/result"
	"github.com/trainstep/trainstep/pkg/spec"
	"github.com/trainstep/trainstep/pkg/timeline"
)

// serviceAccountNamespaceFile holds the step pod's namespace inside a cluster.
const serviceAccountNamespaceFile = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// Default client rate limits: no client-side limit (QPS 0), the API
// server's own flow control paces the run; the burst bounds the parallel
// creates and deletes. "Client rate limits" in docs/running.md says why.
const (
	defaultKubeAPIQPS   = 0
	defaultKubeAPIBurst = 400
)

type runFlags struct {
	spec       specFlags
	local      bool
	kubeconfig string
	context    string
	cfg        executor.Config
	logs       string
	logFormat  string
	cpuProfile string
	memProfile string
	timeline   string
	// networkPolicy and disruptionBudget are --network-policy and
	// --disruption-budget; the Config holds their negations, so that a
	// Config left zero keeps the job's guards.
	networkPolicy, disruptionBudget bool
}

func newRunCommand() *cobra.Command {
	f := &runFlags{}
	cmd := &cobra.Command{
		Use:   "run [-f] JOB.yaml",
		Short: "Run a training job to its end: create its replicas, keep them healthy, clean up, write outputs",
		Long: `Run a training job to its end.

trainstep creates the job's replica Pods and headless Services, reconciles them
until the job succeeds or fails, deletes them per cleanPodPolicy, and writes the
outputs: one JSON line on stdout and one file per value under --outputs-dir.
All logs go to stderr. Exit codes: 0 Succeeded, 10 Failed, 11 Invalid,
12 Transient (worth a retry), 13 Terminated by SIGTERM/SIGINT. Every exit
writes the outputs, a bad command line included, unless --outputs-dir itself
cannot be written (or has no value): then only stdout carries the result.`,
		RunE: func(cmd *cobra.Command, args []string) error { return f.run(cmd, args) },
	}
	fl := cmd.Flags()
	f.spec.register(cmd)
	fl.BoolVar(&f.local, "local", false, "run the replicas as local processes (no cluster needed)")
	fl.StringVar(&f.kubeconfig, "kubeconfig", "", "kubeconfig file (default: $KUBECONFIG, else ~/.kube/config, else the in-cluster config)")
	fl.StringVar(&f.context, "context", "", "kubeconfig context to use")
	fl.StringVar(&f.cfg.OwnerPod, "owner-pod", "", "name of the step pod that owns the job's objects (downward API metadata.name)")
	fl.StringVar(&f.cfg.OwnerUID, "owner-uid", "", "UID of the owner pod (downward API metadata.uid)")
	fl.StringVar(&f.cfg.OwnerWorkflow, "owner-workflow", "", "name of the Workflow that owns the job's objects, instead of the pod")
	fl.StringVar(&f.cfg.OwnerWorkflowUID, "owner-workflow-uid", "", "UID of the owner Workflow")
	fl.StringVar(&f.cfg.WorkflowName, "workflow-name", "", "Argo workflow name, set as the workflows.argoproj.io/workflow label")
	fl.StringVar(&f.cfg.WorkflowUID, "workflow-uid", "", "UID of the Argo workflow that runs the step ({{workflow.uid}}): with --workflow-node, the identity of the job's objects, proven from the pod the step's ServiceAccount token is bound to")
	fl.StringVar(&f.cfg.WorkflowNode, "workflow-node", "", "the step's Argo node ({{node.name}}; a retry attempt's \"(N)\" is dropped): every retry of the step presents the same identity and re-attaches to the job's objects")
	fl.StringVar(&f.cfg.Identity, "identity", "", "identity of the job's objects for a run outside Argo: a later run given the same one re-attaches to them; default: one of this run's own, which it logs")
	fl.StringVar(&f.cfg.OutputsDir, "outputs-dir", executor.DefaultOutputsDir, "directory for the output parameter files")
	fl.StringVar(&f.cfg.ProgressFile, "progress-file", os.Getenv("ARGO_PROGRESS_FILE"), "file for Argo's N/M progress (default: $ARGO_PROGRESS_FILE)")
	fl.DurationVar(&f.cfg.APITimeout, "api-timeout", executor.DefaultAPITimeout, "how long an unreachable API server is retried before the run ends Transient (exit 12)")
	fl.DurationVar(&f.cfg.StuckTimeout, "stuck-timeout", executor.DefaultStuckTimeout, "how long a replica may wait in ImagePullBackOff, ErrImagePull, CreateContainerConfigError or InvalidImageName before the job fails")
	fl.DurationVar(&f.cfg.PendingTimeout, "pending-timeout", executor.DefaultPendingTimeout, "how long a replica may stay unschedulable before the run ends Transient")
	fl.DurationVar(&f.cfg.NodeLostTimeout, "node-lost-timeout", executor.DefaultNodeLostTimeout, "how long a replica's node may stop answering (its pod NotReady while running) before the replica counts as lost to a disruption and is replaced")
	fl.DurationVar(&f.cfg.TerminationGrace, "termination-grace", executor.DefaultTerminationGrace, "time allowed for teardown after SIGTERM/SIGINT")
	fl.DurationVar(&f.cfg.CleanupTimeout, "cleanup-timeout", executor.DefaultCleanupTimeout, "time allowed for the teardown of a job that ended by itself (at least --termination-grace); a SIGTERM/SIGINT during it leaves it --termination-grace from then")
	fl.DurationVar(&f.cfg.LeaseDuration, "lease-duration", executor.DefaultLeaseDuration, "how long the job's Lease holds without renewal: another run of the same job takes over at most this long after this one dies")
	fl.Float32Var(&f.cfg.QPS, "kube-api-qps", defaultKubeAPIQPS, "client-side queries per second to the API server; 0 sets no client-side limit and leaves the pace to the API server's flow control (APF), whose 429 answers are waited out and retried: set it on a cluster without APF (default 0)")
	fl.IntVar(&f.cfg.Burst, "kube-api-burst", defaultKubeAPIBurst, "client-side burst of queries to the API server (also bounds parallel creates)")
	fl.StringVar(&f.cfg.APIStatsFile, "api-stats-file", "", "write this run's API requests, counted by verb and resource, to this JSON file (for benchmarks)")
	fl.StringVar(&f.timeline, "timeline", "", "write the launch's stages (config, preflight, lease, informers, creates) with the client-side rate limiter's waits to this file, once every object is created and again at the end")
	fl.BoolVar(&f.networkPolicy, "network-policy", true, "create the job's NetworkPolicy, which admits only the job's own pods to its replicas; --network-policy=false leaves the replicas open to every pod the cluster's policies allow")
	fl.BoolVar(&f.disruptionBudget, "disruption-budget", true, "give a job whose ranks restart as a whole (or that is gang-scheduled) a PodDisruptionBudget of all its ranks, so that a drain cannot evict one rank and stall the others; --disruption-budget=false lets a drain evict ranks one at a time (the job then restarts as a whole)")
	fl.StringVar(&f.logs, "logs", string(logs.ModeLeaders), "replica logs to stream to stderr: leaders (chief/master/worker-0/launcher), all or none")
	fl.BoolVar(&f.cfg.TrainerStatus, "trainer-status", true, "take the replicas' training progress and metrics (Kubeflow Trainer's KUBEFLOW_TRAINER_STATUS_* endpoint, served by the step in its pod (--owner-pod) or on 127.0.0.1 with --local, and a leader's log line {\"trainerStatus\": ...})")
	fl.StringVar(&f.cfg.TrainerStatusAddress, "trainer-status-address", executor.DefaultTrainerStatusAddress, "address the progress endpoint listens on in the step's pod")
	fl.StringVar(&f.logFormat, "log-format", "", "trainstep's own log format on stderr: json or console (default: console on a terminal, else json)")
	// For the benchmarks' profiles; not part of the step's interface.
	fl.StringVar(&f.cpuProfile, "cpu-profile", "", "write a CPU profile of the run to this file")
	fl.StringVar(&f.memProfile, "mem-profile", "", "write a heap profile to this file when the run ends")
	_ = fl.MarkHidden("cpu-profile")
	_ = fl.MarkHidden("mem-profile")
	return cmd
}

func (f *runFlags) run(cmd *cobra.Command, args []string) error {
	var launch *timeline.Timeline
	if f.timeline != "" {
		launch = timeline.New(timeline.ProcessStart(time.Now()))
		launch.Mark("main")
	}
	logger, logErr := newLogger(f.logFormat)
	defer func() { _ = logger.Sync() }()
	survivePipeClosed()
	// client-go logs through klog (API warnings, leader election,
	// reflectors); routed through zap, every stderr line has one format.
	klog.SetLogger(zapr.NewLogger(logger.Named("klog")))
	cfg := f.cfg
	var policyWarnings []string
	var optsErr error
	cfg.SpecOptions, policyWarnings, optsErr = f.specOptions(cmd)
	cfg.Local, cfg.NoNetworkPolicy = f.local, cfg.SpecOptions.Policy.NetworkPolicy.Disabled
	cfg.NoDisruptionBudget = !f.disruptionBudget
	cfg.Kubeconfig, cfg.KubeconfigPaths = f.kubeconfig, kubeconfigPaths()
	cfg.LocalSupervisor = localSupervisor()
	cfg.KubeContext = f.context
	cfg.PodNamespace = podNamespace()
	cfg.Logger, cfg.Stdout, cfg.Stderr = logger, cmd.OutOrStdout(), cmd.ErrOrStderr()

	// Whatever stops the run before it starts still writes the outputs; the
	// job file is read first so that they can name the job.
	memErr := applyMemoryLimit(os.Getenv, logger)
	var fileErr error
	cfg.Spec, fileErr = f.spec.readOne(cmd.InOrStdin(), args)
	mode, err := logs.ParseMode(f.logs)
	if err != nil {
		err = result.Invalid(result.ReasonInvalidArguments, fmt.Errorf("--logs: %w", err))
	}
	if logErr != nil {
		err = result.Invalid(result.ReasonInvalidArguments, logErr)
	}
	for _, w := range policyWarnings {
		logger.Warn(w)
	}
	if err == nil {
		err = optsErr
	}
	if err == nil {
		err = memErr
	}
	if err == nil {
		err = fileErr
	}
	if err == nil && f.cpuProfile != "" {
		var stop func()
		if stop, err = startCPUProfile(f.cpuProfile); err == nil {
			defer stop()
		} else {
			err = result.Invalid(result.ReasonInvalidArguments, err)
		}
	}
	if err != nil {
		executor.Report(cfg, err)
		return err
	}
	cfg.Logs = mode
	cfg.Timeline, cfg.TimelineFile = launch, f.timeline
	launch.Mark("config")
	// One result per process: a second signal's report and the run's own
	// end share the gate, whichever comes first writes.
	cfg.Outputs = executor.NewOutputGate()
	cfg.Signals = terminationSignals(cmd, func() {
		executor.Report(cfg, &result.Error{Phase: result.PhaseTerminated, Reason: result.ReasonTerminated,
			Err: errors.New("a second signal: trainstep exited without waiting for the teardown; what is left goes with its owner")})
	})

	if f.memProfile != "" {
		defer writeHeapProfile(f.memProfile, logger)
	}
	_, err = executor.Run(cmd.Context(), cfg)
	if reasonOf(err) != result.ReasonOutputsDirUnusable {
		logger.Info("output files written", zap.String("dir", cfg.OutputsDir))
	}
	return err
}

// specOptions are the spec flags' options with the settings of
// --policy-file, --local and --network-policy (when given, over the file's).
func (f *runFlags) specOptions(cmd *cobra.Command) (spec.Options, []string, error) {
	opts, warnings, err := f.spec.options()
	opts.Policy.Local = f.local
	if cmd.Flags().Changed("network-policy") {
		opts.Policy.NetworkPolicy.Disabled = !f.networkPolicy
	}
	return opts, warnings, err
}

// survivePipeClosed keeps a run going when whoever reads its stdout or
// stderr goes away (`trainstep run ... | head`): writes then fail instead
// of SIGPIPE killing trainstep before it cleaned up and wrote its outputs.
// The signal is caught, not ignored, so replicas started from here get the
// default action back.
func survivePipeClosed() {
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
}

// writeHeapProfile writes the heap profile: what is still in use after a
// final collection, and every allocation since the start.
func writeHeapProfile(path string, logger *zap.Logger) {
	file, err := os.Create(path)
	if err != nil {
		logger.Warn("writing the heap profile", zap.Error(err))
		return
	}
	defer func() { _ = file.Close() }()
	runtime.GC()
	if err := pprof.WriteHeapProfile(file); err != nil {
		logger.Warn("writing the heap profile", zap.Error(err))
	}
}

// startCPUProfile profiles the process into path until stop is called.
func startCPUProfile(path string) (stop func(), err error) {
	file, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("--cpu-profile: %w", err)
	}
	if err := pprof.StartCPUProfile(file); err != nil {
		_ = file.Close()
		return nil, fmt.Errorf("--cpu-profile: %w", err)
	}
	return func() {
		pprof.StopCPUProfile()
		_ = file.Close()
	}, nil
}

// terminationSignals delivers the first SIGTERM/SIGINT to the executor; a
// second one kills every local process group, writes the Terminated
// outputs (report) and exits at once.
func terminationSignals(cmd *cobra.Command, report func()) <-chan os.Signal {
	incoming := make(chan os.Signal, 2)
	signal.Notify(incoming, syscall.SIGTERM, syscall.SIGINT)
	first := make(chan os.Signal, 1)
	go func() {
		first <- <-incoming
		<-incoming
		fmt.Fprintln(cmd.ErrOrStderr(), "trainstep: second signal, exiting without waiting for teardown")
		local.KillProcessGroups() // os.Exit runs no deferred cleanup
		report()
		os.Exit(result.ExitTerminated)
	}()
	return first
}

// kubeconfigPaths are the kubeconfig files kubectl reads without
// --kubeconfig: $KUBECONFIG's list, else ~/.kube/config.
func kubeconfigPaths() []string {
	return clientcmd.NewDefaultClientConfigLoadingRules().Precedence
}

// stderrIsTerminal tells whether a person is reading stderr.
func stderrIsTerminal() bool {
	info, err := os.Stderr.Stat()
	return err == nil && info.Mode()&os.ModeCharDevice != 0
}

// podNamespace is the step pod's namespace: $POD_NAMESPACE (downward API),
// else the service account's namespace file.
func podNamespace() string {
	if ns := os.Getenv("POD_NAMESPACE"); ns != "" {
		return ns
	}
	if b, err := os.ReadFile(serviceAccountNamespaceFile); err == nil {
		return strings.TrimSpace(string(b))
	}
	return ""
}

// newLogger builds trainstep's logger in format: "" picks console on a
// terminal and JSON otherwise (as the argo CLI does). An unknown format is
// an error, with a JSON logger to report it.
func newLogger(format string) (*zap.Logger, error) {
	if format == "" {
		format = "json"
		if stderrIsTerminal() {
			format = "console"
		}
	}
	var cfg zap.Config
	var formatErr error
	switch format {
	case "json":
		cfg = zap.NewProductionConfig()
		cfg.EncoderConfig.EncodeTime = zapcore.RFC3339NanoTimeEncoder
	case "console":
		cfg = zap.NewDevelopmentConfig()
		cfg.EncoderConfig.EncodeTime = zapcore.TimeEncoderOfLayout(time.TimeOnly)
		cfg.DisableStacktrace = true
		cfg.DisableCaller = true // a person reads it: the source line is noise
	default:
		formatErr = fmt.Errorf("--log-format: %q is not json or console", format)
		cfg = zap.NewProductionConfig()
	}
	cfg.OutputPaths, cfg.ErrorOutputPaths = []string{"stderr"}, []string{"stderr"}
	cfg.Sampling = nil
	// An error line says what went wrong; trainstep's call stack is no help.
	cfg.DisableStacktrace = true
	logger, err := cfg.Build()
	if err != nil {
		return zap.NewNop(), err
	}
	return logger, formatErr
}
