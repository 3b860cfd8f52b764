package executor

import (
	"context"
	"errors"
	"fmt"
	"strings"
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
//
// A panic is recovered here: the run ends Failed with reason InternalError
// and the panic's message (its teardown was attempted where it happened).
func Run(ctx context.Context, cfg Config) (res result.Result, err error) {
	cfg.setDefaults()
	start := cfg.Clock.Now()
	res = newResult(&cfg)
	defer func() {
		if p := recover(); p != nil {
			err = internalError(p)
			cfg.Logger.Error("trainstep failed", zap.Error(err), zap.Stack("stack"))
			res.Phase = ""
		}
		end(&cfg, &res, err, start)
	}()
	if dirErr := outputs.CheckDir(cfg.OutputsDir); dirErr != nil {
		return res, result.Invalid(result.ReasonOutputsDirUnusable, fmt.Errorf("--outputs-dir %s: %w; nothing was started", cfg.OutputsDir, dirErr))
	}
	return res, run(ctx, &cfg, &res)
}

// internalError is the error of a run that panicked.
func internalError(p any) error {
	return &result.Error{Phase: result.PhaseFailed, Reason: result.ReasonInternalError, Err: fmt.Errorf("internal error: %v", p)}
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
	cfg.Timeline.Mark("run ended")
	writeTimeline(cfg)
	finish(cfg, *res)
}

// writeTimeline writes the launch's timeline, when asked for one; it never
// fails the run.
func writeTimeline(cfg *Config) {
	if err := cfg.Timeline.WriteFile(cfg.TimelineFile); err != nil {
		cfg.Logger.Warn("writing the timeline", zap.String("file", cfg.TimelineFile), zap.Error(err))
	}
}

// finish writes the outputs, once per gate; it never fails the run, it
// only logs.
func finish(cfg *Config, res result.Result) {
	cfg.Outputs.final(func() {
		if err := outputs.Write(cfg.OutputsDir, res); err != nil {
			cfg.Logger.Error("writing output files", zap.String("dir", cfg.OutputsDir), zap.Error(err))
		}
		if err := outputs.PrintResult(cfg.Stdout, res); err != nil {
			cfg.Logger.Error("printing the result", zap.Error(err))
		}
	})
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
	if w := spec.UnboundedRestartsWarning(job); w != "" {
		cfg.Logger.Warn(w)
	}
	if cfg.Local {
		return runLocal(ctx, cfg, job, res)
	}

	// The first signal cancels the run; teardown then runs on its own context.
	runCtx, cancelRun := context.WithCancel(ctx)
	terminated, signalsDone := watchSignals(runCtx, cfg.Signals, cancelRun, func() { writeStoppingOutputs(cfg, res.JobName) })
	defer func() { cancelRun(); <-signalsDone }()

	cfg.Timeline.Mark("job loaded")
	s, err := prepare(runCtx, cfg, job)
	if err != nil && terminated() {
		// Nothing was created yet: stopping is all there is to do.
		markTerminated(res, "the step was stopped before anything was created")
		return res.Err()
	}
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
	return res.Err()
}

// writeStoppingOutputs writes the Terminated output files as soon as the step
// is signalled, before the teardown; they are written again when it ends.
// Argo signals the step's wait container together with it, and that saves
// the output parameters from whatever files exist within about a second:
// without these, a stopped step's outputs were the template's defaults.
// Once the job's outcome is known they are not written: the signal then
// only hurries the teardown.
func writeStoppingOutputs(cfg *Config, jobName string) {
	cfg.Outputs.early(func() {
		res := newResult(cfg)
		res.JobName = jobName
		markTerminated(&res, "the step was stopped; deleting the job's objects")
		if err := outputs.Write(cfg.OutputsDir, res); err != nil {
			cfg.Logger.Error("writing output files", zap.String("dir", cfg.OutputsDir), zap.Error(err))
		}
	})
}

// markTerminated records a run the step's signal ended.
func markTerminated(res *result.Result, message string) {
	res.Phase, res.Reason, res.Message = result.PhaseTerminated, result.ReasonTerminated, message
}

// preparedRun is what a run needs once it may create objects.
type preparedRun struct {
	conn     *connection
	identity render.Identity
	// renderer renders each replica's pod when it is created; desired holds
	// the rest (Services, ConfigMaps, Secrets, PodGroup), never the pods.
	renderer    *render.Renderer
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
	if err := conn.preflight(ctx, cfg.APITimeout, requiredPermissions(isMPI, isMPI, eventObject != nil, podGroups.Group, v1alpha1.ScalesOnMetrics(job))); err != nil {
		return nil, err
	}
	cfg.Timeline.Mark("preflight done")
	if hasPodGroup {
		if err := conn.checkPodGroupAPI(ctx, cfg.APITimeout, podGroups); err != nil {
			return nil, err
		}
	}
	if v1alpha1.ScalesOnMetrics(job) {
		if err := conn.checkMetricsAPI(ctx, cfg.APITimeout); err != nil {
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
	renderer, desired, err := renderAllButPods(job, id, inputs)
	if err != nil {
		return nil, result.Invalid(result.ReasonInvalidSpec, fmt.Errorf("rendering the job: %w", err))
	}
	log := cfg.Logger.With(zap.String("job", job.Name), zap.String("namespace", conn.namespace))
	cfg.Timeline.Mark("rendered")
	return &preparedRun{conn: conn, identity: id, renderer: renderer, desired: desired, eventObject: eventObject, log: log}, nil
}

// renderAllButPods prepares the job's renderer (which refuses a job too
// large to run) and renders its shared objects and Services; pods are
// rendered one at a time as they are created.
func renderAllButPods(job *v1alpha1.TrainJob, id render.Identity, inputs render.Inputs) (*render.Renderer, *render.Objects, error) {
	renderer, err := render.NewRenderer(job, id)
	if err != nil {
		return nil, nil, err
	}
	desired, err := renderer.SharedObjects(inputs)
	if err != nil {
		return nil, nil, err
	}
	for _, ref := range renderer.Replicas() {
		svc, err := renderer.Service(ref.Type, ref.Index)
		if err != nil {
			return nil, nil, err
		}
		if svc != nil {
			desired.Services = append(desired.Services, svc)
		}
	}
	return renderer, desired, nil
}

// teardownContext bounds the teardown: by the grace period when the step
// was stopped, all that Argo waits before it kills the container; by
// CleanupTimeout when the job ended by itself, since then nothing kills the
// step and a job of thousands of replicas takes longer than a grace period
// to delete (a 2048-worker job left all its Services after 25 s). A signal
// during that longer teardown (runCtx ends) leaves it the grace period.
func teardownContext(runCtx context.Context, cfg *Config, stopped bool) (context.Context, context.CancelFunc) {
	if stopped {
		return context.WithTimeout(context.Background(), cfg.TerminationGrace)
	}
	ctx, cancel := context.WithTimeout(context.Background(), cfg.CleanupTimeout)
	stopWatching := context.AfterFunc(runCtx, func() { time.AfterFunc(cfg.TerminationGrace, cancel) })
	return ctx, func() { stopWatching(); cancel() }
}

// errLeaseLost cancels a run whose hold on the job's Lease ended: another
// run of the job writes now.
var errLeaseLost = errors.New("this run lost the job's lease to another run of the job")

// execute holds the job's Lease, reconciles the job until it ends or the
// step is stopped, then tears down on a context the signal does not cancel
// and fills res. The teardown is fenced by the Lease: a run that does not
// hold it (another run of the job took over) deletes nothing, signal or
// not, and the teardown stops if the Lease is lost while it runs.
func execute(ctx context.Context, cfg *Config, job *v1alpha1.TrainJob, s *preparedRun, terminated func() bool, res *result.Result) (err error) {
	events := newEventRecorder(s.conn.core, s.conn.namespace)
	defer events.flush(cfg.Logger)
	lease := newJobLease(cfg, s)
	if err := lease.acquire(ctx, job.Name, false, cfg.APITimeout); err != nil {
		if terminated() {
			markTerminated(res, "the step was stopped while another run of the job held its lease; the job's objects are left to that run")
			return nil
		}
		return err
	}
	cfg.Timeline.Mark("lease acquired")

	streamer := newLogStreamer(cfg, s.conn, job, s.log)
	ctrl := reconcile.New(reconcile.Options{
		Core: s.conn.core, Dynamic: s.conn.dynamic, Job: job, Identity: s.identity, Renderer: s.renderer, Desired: s.desired,
		Rule:        frameworks.SuccessRuleFor(job),
		Timeouts:    policy.Timeouts{Stuck: cfg.StuckTimeout, Pending: cfg.PendingTimeout, NodeLost: cfg.NodeLostTimeout},
		APITimeout:  cfg.APITimeout,
		Parallelism: parallelism(cfg.Burst), TeardownParallelism: teardownParallelism(cfg.Burst),
		Recorder: events.recorder, EventObject: s.eventObject,
		Logger: s.log, Clock: cfg.Clock,
		OnPod:      streamer.observe,
		OnProgress: progressReporter(cfg, s.log),
		BeforeSync: cfg.BeforeSync,
		Timeline:   cfg.Timeline,
		OnLaunched: func() { writeTimeline(cfg) },
		PodMetrics: s.conn.podMetrics,
	})
	// A panic past this point still tears the job down (when this run holds
	// its Lease); Run reports it.
	defer func() {
		if p := recover(); p != nil {
			s.log.Error("trainstep failed; deleting the job's objects", zap.Any("panic", p))
			teardownAfterPanic(cfg, ctrl, lease, s.log)
			panic(p)
		}
	}()

	// Informers live until teardown is over, so cleanup can watch deletions.
	informerCtx, stopInformers := context.WithCancel(context.Background())
	defer stopInformers()
	decision, superseded, runErr := reconcileHoldingLease(ctx, cfg, s, ctrl, lease, terminated, informerCtx, stopInformers)
	if decision.Outcome != policy.OutcomeRunning {
		// The outcome is known: a signal from now on only hurries the teardown.
		cfg.Outputs.settle()
	}
	if runErr != nil && !superseded && !ctrl.Started() && !terminated() {
		// Nothing was created: a retry of the step re-attaches to whatever
		// exists, so nothing is torn down.
		releaseCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		lease.release(releaseCtx)
		return runErr
	}

	teardownCtx, cancelTeardown := teardownContext(ctx, cfg, terminated())
	defer cancelTeardown()
	// Streams of replicas still running never drain by themselves: bound
	// the wait so the cleanup below keeps most of the grace period.
	drainCtx, cancelDrain := context.WithTimeout(teardownCtx, cfg.TerminationGrace/5)
	if terminated() {
		// Stopped: nothing is waited for before the deletes. Argo signals a
		// stopped step again within seconds, and a second signal ends
		// trainstep before its teardown.
		cancelDrain()
	}
	streamer.stop(drainCtx)
	cancelDrain()
	var re *result.Error
	errors.As(runErr, &re)
	if !terminated() && re != nil && leavesObjects(re.Reason) {
		// The API server is away, or a quota has no room: the step's retry
		// re-attaches to the replicas, and the owner reference removes
		// them if none comes.
		view := ctrl.View()
		fillResult(res, job, &view, decision, s.log)
		res.Phase, res.Reason, res.Message = re.Phase, re.Reason, runErr.Error()
		s.log.Warn("left the job's objects for a retry of the step to re-attach", zap.String("reason", re.Reason))
		releaseCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		lease.release(releaseCtx)
		return nil
	}
	if !superseded && !lease.held() {
		// The Lease was lost (the API server was away, or the step was
		// stopped while taking it back): hold it again before deleting.
		superseded = !takeLeaseBackForTeardown(teardownCtx, cfg, s, lease, res, terminated())
		if !superseded && !lease.held() {
			return nil // res says why nothing was deleted
		}
	}
	if superseded {
		// Another run writes now: it keeps the replicas; nothing is deleted.
		leftToSuccessor(res, terminated())
		s.log.Warn("job left to another run", zap.String("reason", res.Reason), zap.String("message", res.Message))
		return nil
	}
	wasTerminated := terminated() && decision.Outcome == policy.OutcomeRunning
	view := ctrl.View()
	fillResult(res, job, &view, decision, s.log)
	switch {
	case wasTerminated:
		markTerminated(res, "the step was stopped")
	case runErr != nil:
		res.Phase, res.Message = result.PhaseOf(runErr), runErr.Error()
		if re != nil {
			res.Reason = re.Reason
		}
	}
	deleteAll := terminated() || runErr != nil
	// The teardown stops the moment this run no longer holds the Lease.
	fencedCtx, cancelFenced := context.WithCancel(teardownCtx)
	defer cancelFenced()
	go func() {
		select {
		case <-lease.lost:
			cancelFenced()
		case <-fencedCtx.Done():
		}
	}()
	left, cleanErr := ctrl.Cleanup(fencedCtx, deleteAll, true)
	lostDuringTeardown := !lease.held()
	if cleanErr != nil {
		s.log.Error("cleaning up", zap.Error(cleanErr), zap.Strings("left", left))
	}
	switch {
	case lostDuringTeardown:
		res.Message += "; this run lost the job's lease during the teardown and stopped deleting"
	case wasTerminated && cleanErr == nil && len(left) == 0:
		res.Message += "; every object of the job was deleted"
	case wasTerminated && cleanErr == nil:
		res.Message += "; its objects were deleted"
	}
	switch {
	case len(left) > 0:
		res.Message += fmt.Sprintf("; %d objects were still there when the teardown ended: %s", len(left), strings.Join(left, ", "))
	case cleanErr != nil:
		res.Message += "; the teardown could not confirm that the job's objects are gone: " + cleanErr.Error()
	}
	plan := policy.Cleanup(job.Spec.RunPolicy.CleanPodPolicyOrDefault(), deleteAll, view.Replicas)
	markStopped(res, plan.Pods)
	events.final(s.eventObject, *res)
	lease.release(teardownCtx)
	s.log.Info("job ended", zap.String("phase", string(res.Phase)), zap.String("reason", res.Reason), zap.String("message", res.Message))
	return nil
}

// leavesObjects reports the Transient ends that leave the job's objects in
// place for a retry of the step to re-attach to.
func leavesObjects(reason string) bool {
	return reason == result.ReasonAPIUnreachable || reason == result.ReasonQuotaExceeded
}

// leftToSuccessor fills the result of a run another run of the job took
// over: nothing was deleted.
func leftToSuccessor(res *result.Result, terminated bool) {
	if terminated {
		markTerminated(res, "the step was stopped after another run of the job took it over (its lease); nothing was deleted: the job's objects are that run's")
		return
	}
	res.Phase, res.Reason, res.Message = result.PhaseTransient, result.ReasonLeaseLost, errLeaseLost.Error()
}

// takeLeaseBackForTeardown tries, for part of the termination grace, to
// hold the job's Lease again before the teardown. It returns false when
// another run holds it (this run is superseded); true otherwise, with
// lease.held() saying whether the teardown may go on — if not, res says
// that nothing was deleted and why.
func takeLeaseBackForTeardown(ctx context.Context, cfg *Config, s *preparedRun, lease *jobLease, res *result.Result, terminated bool) bool {
	bound := min(cfg.TerminationGrace/2, 2*cfg.LeaseDuration)
	takeCtx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	err := lease.acquire(takeCtx, s.identity.JobName, true, bound)
	switch {
	case errors.Is(err, errLeaseLost):
		return false
	case err != nil:
		s.log.Warn("could not hold the job's lease again; deleting nothing", zap.Error(err))
		msg := fmt.Sprintf("this run could not hold the job's lease again within %s (%v), so it deleted nothing: the objects go with their owner, or a retry of the step re-attaches to them", bound, err)
		if terminated {
			markTerminated(res, "the step was stopped; "+msg)
		} else {
			res.Phase, res.Reason, res.Message = result.PhaseTransient, result.ReasonAPIUnreachable, msg
		}
	}
	return true
}

// teardownAfterPanic deletes everything of the job after a panic, within
// the termination grace, if this run holds the job's Lease.
func teardownAfterPanic(cfg *Config, ctrl *reconcile.Controller, lease *jobLease, log *zap.Logger) {
	if !lease.held() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), cfg.TerminationGrace)
	defer cancel()
	if left, err := ctrl.Cleanup(ctx, true, true); err != nil || len(left) > 0 {
		log.Error("cleaning up after the failure", zap.Error(err), zap.Strings("left", left))
	}
	lease.release(ctx)
}

// reconcileHoldingLease starts the controller and runs it while this run
// holds the job's lease. When the lease is not renewed in time (the API
// server was away, or another run took it), nothing is written until this
// run holds it again; then it goes on where it stopped. superseded says
// another run took the job over.
func reconcileHoldingLease(ctx context.Context, cfg *Config, s *preparedRun, ctrl *reconcile.Controller, lease *jobLease,
	terminated func() bool, informerCtx context.Context, stopInformers context.CancelFunc) (policy.Decision, bool, error) {
	decision := policy.Decision{Outcome: policy.OutcomeRunning}
	watchLease := func() (context.Context, context.CancelCauseFunc) {
		runCtx, cancelRun := context.WithCancelCause(ctx)
		go func() {
			select {
			case <-lease.lost:
				cancelRun(errLeaseLost)
			case <-runCtx.Done():
			}
		}()
		return runCtx, cancelRun
	}
	startCtx, cancelStart := watchLease()
	err := startWithin(startCtx, informerCtx, stopInformers, cfg.APITimeout, ctrl)
	cancelStart(nil)
	if errors.Is(err, errLeaseLost) {
		return decision, false, result.Transient(result.ReasonLeaseLost, err)
	}
	if err != nil {
		return decision, false, err
	}
	s.log.Info("job started", zap.Int("replicas", len(s.renderer.Replicas())), zap.Int("services", len(s.desired.Services)))
	for {
		runCtx, cancelRun := watchLease()
		decision, err = ctrl.Run(runCtx)
		lostLease := errors.Is(context.Cause(runCtx), errLeaseLost)
		cancelRun(nil)
		if err != nil || !lostLease || terminated() {
			return decision, false, err
		}
		s.log.Warn("could not renew the job's lease; writing nothing until it is held again")
		lease.stop()
		if err := lease.acquire(ctx, s.identity.JobName, true, cfg.APITimeout); err != nil {
			if errors.Is(err, errLeaseLost) {
				return decision, true, nil
			}
			if terminated() {
				return decision, false, nil
			}
			return decision, false, err
		}
		s.log.Info("holding the job's lease again; going on where this run stopped")
	}
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
			ExitCode: r.ExitCode, Restarts: r.Restarts + r.EarlierRestarts, Node: r.Node, WorldSize: r.WorldSize,
		})
	}
	return out
}

// maxParallelism bounds the creates and deletes in flight at once. Each
// create in flight holds its rendered pod and the server's answer (about
// 100 KiB at 512 TensorFlow workers), but with 32 a 512-worker launch took
// 1.28 times as long as a plain loop of 64 goroutines (make bench).
const maxParallelism = 64

// parallelism matches concurrent creates to the client's burst, up to
// maxParallelism.
func parallelism(burst int) int {
	if burst <= 0 {
		return 16
	}
	return min(burst, maxParallelism)
}

// maxTeardownParallelism bounds the teardown's deletes in flight: 2048
// workers are 4096 deletes, which 32 at a time do not all reach the API
// server within the default --termination-grace.
const maxTeardownParallelism = 128

func teardownParallelism(burst int) int {
	if burst <= 0 {
		return 16
	}
	return min(burst, maxTeardownParallelism)
}

// startWithin starts the controller. The caches cannot sync while the API
// server is away, so it gives up after the API timeout. When the run ends
// first, the informers are stopped and Start is waited for, so that the
// teardown never runs beside an adoption.
func startWithin(runCtx, informerCtx context.Context, stopInformers context.CancelFunc, timeout time.Duration, ctrl *reconcile.Controller) error {
	errc := make(chan error, 1)
	go func() { errc <- ctrl.Start(informerCtx) }()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case err := <-errc:
		return err
	case <-timer.C:
		stopInformers()
		<-errc
		return result.Transient(result.ReasonAPIUnreachable, fmt.Errorf("the job's informers did not sync within %s", timeout))
	case <-runCtx.Done():
		stopInformers()
		<-errc
		return context.Cause(runCtx)
	}
}
