package executor

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/frameworks"
	"github.com/trainstep/trainstep/pkg/gang"
	"github.com/trainstep/trainstep/pkg/outputs"
	"github.com/trainstep/trainstep/pkg/policy"
	"github.com/trainstep/trainstep/pkg/reconcile"
	"github.com/trainstep/trainstep/pkg/render"
	"github.com/trainstep/trainstep/pkg/result"
	"github.com/trainstep/trainstep/pkg/spec"
)

// Run executes one job to its end and always writes the outputs: the files
// under OutputsDir and one JSON line on Stdout. The returned Result's phase
// gives the exit code; the error, when not nil, explains a run that did not
// succeed for a reason other than the training itself.
//
// An outputs directory that cannot be written ends the run Invalid before
// anything starts: the outputs would be lost. That is the one exit that
// writes no file; the result line still goes to Stdout.
func Run(ctx context.Context, cfg Config) (result.Result, error) {
	cfg.setDefaults()
	start := cfg.Clock.Now()
	res := newResult(&cfg)
	var err error
	if dirErr := outputs.CheckDir(cfg.OutputsDir); dirErr != nil {
		err = result.Invalid(result.ReasonOutputsDirUnusable, fmt.Errorf("--outputs-dir %s: %w; nothing was started", cfg.OutputsDir, dirErr))
	} else {
		err = run(ctx, &cfg, &res)
	}
	end(&cfg, &res, err, start)
	return res, err
}

// Report writes the outputs of a run that ended before it could start — a
// job file that cannot be read, a flag with a bad value — so that every
// exit that knows its outputs directory writes every output file and the
// result line. err gives the phase and reason.
func Report(cfg Config, err error) result.Result {
	cfg.setDefaults()
	res := newResult(&cfg)
	end(&cfg, &res, err, cfg.Clock.Now())
	return res
}

// newResult is the result before anything is known but the job's name.
func newResult(cfg *Config) result.Result {
	return result.Result{
		JobName:  spec.JobName(cfg.Spec, cfg.SpecOptions),
		Replicas: []result.ReplicaStatus{}, Metrics: map[string]any{},
	}
}

// end fills what err says about the run, when the run did not say it
// itself, and writes the outputs.
func end(cfg *Config, res *result.Result, err error, start time.Time) {
	if err != nil && res.Phase == "" {
		var re *result.Error
		res.Phase = result.PhaseOf(err)
		if errors.As(err, &re) {
			res.Reason = re.Reason
		}
		if res.Reason == "" {
			res.Reason = string(res.Phase)
		}
		res.Message = err.Error()
	}
	res.DurationSeconds = result.Seconds(cfg.Clock.Since(start).Seconds())
	finish(cfg, *res)
}

// finish writes the outputs; it never fails the run, it only logs.
func finish(cfg *Config, res result.Result) {
	if err := outputs.Write(cfg.OutputsDir, res); err != nil {
		cfg.Logger.Error("writing output files", zap.String("dir", cfg.OutputsDir), zap.Error(err))
	}
	if err := outputs.PrintResult(cfg.Stdout, res); err != nil {
		cfg.Logger.Error("printing the result", zap.Error(err))
	}
}

// run is the step lifecycle as a script: load → connect and check rights →
// render → reconcile → clean up → fill the result.
func run(ctx context.Context, cfg *Config, res *result.Result) error {
	job, warnings, err := spec.Load(cfg.Spec, cfg.SpecOptions)
	if err != nil {
		return err
	}
	res.JobName = job.Name
	for _, w := range warnings {
		cfg.Logger.Warn(w)
	}
	if cfg.Local {
		return runLocal(ctx, cfg, job, res)
	}

	// The first signal cancels the run; teardown then runs on its own context.
	runCtx, cancelRun := context.WithCancel(ctx)
	defer cancelRun()
	terminated := watchSignals(runCtx, cfg.Signals, cancelRun)

	s, err := prepare(runCtx, cfg, job)
	if err != nil {
		return err
	}
	res.Namespace = s.conn.namespace
	if s.conn.requests != nil {
		defer func() {
			if err := s.conn.requests.WriteFile(cfg.APIStatsFile); err != nil {
				cfg.Logger.Warn("writing API request counts", zap.Error(err))
			}
		}()
	}
	if err := execute(runCtx, cfg, job, s, terminated, res); err != nil {
		return err
	}
	if res.Phase != result.PhaseSucceeded {
		return &result.Error{Phase: res.Phase, Reason: res.Reason, Err: errors.New(res.Message)}
	}
	return nil
}

// preparedRun is what a run needs once it may create objects.
type preparedRun struct {
	conn        *connection
	identity    render.Identity
	desired     *render.Objects
	eventObject runtime.Object
	log         *zap.Logger
}

// prepare connects, checks every right and CRD the job needs, and renders
// it. Nothing is created before it returns without error.
func prepare(ctx context.Context, cfg *Config, job *v1alpha1.TrainJob) (*preparedRun, error) {
	conn, err := connect(cfg, job.Namespace)
	if err != nil {
		return nil, err
	}
	job.Namespace = conn.namespace
	owner, eventObject, err := ownerOf(cfg, conn.namespace)
	if err != nil {
		return nil, err
	}
	isMPI := job.Spec.Framework == v1alpha1.FrameworkMPI
	podGroups, hasPodGroup := gang.PodGroupResource(gang.Kind(job))
	if err := conn.preflight(ctx, cfg.APITimeout, requiredPermissions(isMPI, isMPI, eventObject != nil, podGroups.Group)); err != nil {
		return nil, err
	}
	if hasPodGroup {
		if err := conn.checkCRD(ctx, cfg.APITimeout, podGroups); err != nil {
			return nil, err
		}
	}
	id := render.Identity{Namespace: conn.namespace, JobName: job.Name, Owner: owner, Labels: map[string]string{}}
	if cfg.WorkflowName != "" {
		id.Labels[v1alpha1.LabelWorkflow] = cfg.WorkflowName
	}
	inputs, err := renderInputs(ctx, conn, job, cfg.APITimeout)
	if err != nil {
		return nil, err
	}
	desired, err := render.Render(job, id, inputs)
	if err != nil {
		return nil, result.Invalid(result.ReasonInvalidSpec, fmt.Errorf("rendering the job: %w", err))
	}
	log := cfg.Logger.With(zap.String("job", job.Name), zap.String("namespace", conn.namespace))
	return &preparedRun{conn: conn, identity: id, desired: desired, eventObject: eventObject, log: log}, nil
}

// execute reconciles the job until it ends or the step is stopped, then
// tears down on a context the signal does not cancel and fills res.
func execute(runCtx context.Context, cfg *Config, job *v1alpha1.TrainJob, s *preparedRun, terminated func() bool, res *result.Result) error {
	events := newEventRecorder(s.conn.client, s.conn.namespace)
	defer events.flush(cfg.Logger)
	streamer := newLogStreamer(cfg, s.conn, job, s.log)
	ctrl := reconcile.New(reconcile.Options{
		Client: s.conn.client, Dynamic: s.conn.dynamic, Job: job, Identity: s.identity, Desired: s.desired,
		Rule:        frameworks.SuccessRuleFor(job),
		Timeouts:    policy.Timeouts{Stuck: cfg.StuckTimeout, Pending: cfg.PendingTimeout},
		APITimeout:  cfg.APITimeout,
		Parallelism: parallelism(cfg.Burst),
		Recorder:    events.recorder, EventObject: s.eventObject,
		Logger: s.log, Clock: cfg.Clock,
		OnPod:      streamer.observe,
		OnProgress: progressReporter(cfg, s.log),
	})

	// Informers live until teardown is over, so cleanup can watch deletions.
	informerCtx, stopInformers := context.WithCancel(context.Background())
	defer stopInformers()
	if err := startWithin(runCtx, informerCtx, cfg.APITimeout, ctrl); err != nil {
		return err
	}
	s.log.Info("job started", zap.Int("replicas", len(s.desired.Pods)), zap.Int("services", len(s.desired.Services)))
	decision, runErr := ctrl.Run(runCtx)

	teardownCtx, cancelTeardown := context.WithTimeout(context.Background(), cfg.TerminationGrace)
	defer cancelTeardown()
	// Streams of replicas still running never drain by themselves: bound
	// the wait so the cleanup below keeps most of the grace period.
	drainCtx, cancelDrain := context.WithTimeout(teardownCtx, cfg.TerminationGrace/5)
	streamer.stop(drainCtx)
	cancelDrain()
	wasTerminated := terminated()
	view := ctrl.View()
	fillResult(res, job, &view, decision, s.log)
	switch {
	case wasTerminated:
		res.Phase, res.Reason, res.Message = result.PhaseTerminated, result.ReasonTerminated, "the step was stopped; every object of the job was deleted"
	case runErr != nil:
		res.Phase, res.Message = result.PhaseOf(runErr), runErr.Error()
		var re *result.Error
		if errors.As(runErr, &re) {
			res.Reason = re.Reason
		}
	}
	deleteAll := wasTerminated || runErr != nil
	if err := ctrl.Cleanup(teardownCtx, deleteAll, true); err != nil {
		s.log.Error("cleaning up", zap.Error(err))
	}
	plan := policy.Cleanup(job.Spec.RunPolicy.CleanPodPolicyOrDefault(), deleteAll, view.Replicas)
	markStopped(res, plan.Pods)
	events.final(s.eventObject, *res)
	s.log.Info("job ended", zap.String("phase", string(res.Phase)), zap.String("reason", res.Reason), zap.String("message", res.Message))
	return nil
}

// fillResult turns the final decision and view into the result. A
// termination message that is not a JSON object gives no metrics, with a
// warning; its text is kept in the result either way.
func fillResult(res *result.Result, job *v1alpha1.TrainJob, view *policy.View, d policy.Decision, log *zap.Logger) {
	switch d.Outcome {
	case policy.OutcomeSucceeded:
		res.Phase = result.PhaseSucceeded
	case policy.OutcomeTransient:
		res.Phase = result.PhaseTransient
	default:
		res.Phase = result.PhaseFailed
	}
	res.Reason, res.Message, res.Restarts = d.Reason, d.Message, view.Restarts
	res.Replicas = replicaStatuses(view)
	if r := policy.MetricsReplica(view, frameworks.SuccessRuleFor(job)); r != nil {
		metrics, err := outputs.Metrics(r.TerminationMessage)
		if err != nil {
			log.Warn("the termination message gives no metrics: metrics.json is {}, the termination-message output keeps its text",
				zap.Stringer("replica", r.ReplicaID), zap.Error(err), zap.String("terminationMessage", r.TerminationMessage))
		}
		res.Metrics, res.TerminationMessage = metrics, r.TerminationMessage
	}
}

// markStopped gives the replicas trainstep stopped at the end — still
// pending or running when the job ended — the phase Stopped, so the
// outputs do not list them as running on.
func markStopped(res *result.Result, stopped []policy.ReplicaID) {
	for _, id := range stopped {
		for i := range res.Replicas {
			r := &res.Replicas[i]
			if r.Type == string(id.Type) && r.Index == id.Index && (r.Phase == string(policy.PhaseRunning) || r.Phase == string(policy.PhasePending)) {
				r.Phase = result.ReplicaPhaseStopped
			}
		}
	}
}

func replicaStatuses(view *policy.View) []result.ReplicaStatus {
	out := make([]result.ReplicaStatus, 0, len(view.Replicas))
	for _, r := range view.Replicas {
		out = append(out, result.ReplicaStatus{
			Type: string(r.Type), Index: r.Index, Phase: string(r.Phase),
			ExitCode: r.ExitCode, Restarts: r.Restarts + r.EarlierRestarts, Node: r.Node,
		})
	}
	return out
}

// parallelism matches concurrent creates to the client's burst.
func parallelism(burst int) int {
	if burst <= 0 {
		return 16
	}
	return min(burst, 128)
}

// startWithin starts the controller. The caches cannot sync while the API
// server is away, so it gives up after the API timeout.
func startWithin(runCtx, informerCtx context.Context, timeout time.Duration, ctrl *reconcile.Controller) error {
	errc := make(chan error, 1)
	go func() { errc <- ctrl.Start(informerCtx) }()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case err := <-errc:
		return err
	case <-timer.C:
		return result.Transient(result.ReasonAPIUnreachable, fmt.Errorf("the job's informers did not sync within %s", timeout))
	case <-runCtx.Done():
		return runCtx.Err()
	}
}
