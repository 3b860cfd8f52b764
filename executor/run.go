package executor

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/ending"
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
		res.Phase, res.Reason, res.Message = ending.ErrorResult(err)
	}
	res.DurationSeconds = result.Seconds(cfg.Clock.Since(start).Seconds())
	cfg.status.finish(res)
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
	// Local replicas are processes: a namespace's objects do not exist there.
	cfg.SpecOptions.Policy.Local = cfg.SpecOptions.Policy.Local || cfg.Local
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
	if err := checkRendered(cfg, job); err != nil {
		return err
	}

	// The first signal cancels the run, once it is known whether it stops
	// the job or hands it over; teardown then runs on its own context.
	runCtx, cancelRun := context.WithCancel(ctx)
	var connected atomic.Pointer[connection]
	terminated, signalsDone := watchSignals(runCtx, cfg.Signals, cancelRun, func() {
		cfg.stop.classify(cfg, job.Namespace, connected.Load())
		writeStoppingOutputs(cfg, res.JobName)
	})
	defer func() { cancelRun(); <-signalsDone }()

	cfg.Timeline.Mark("job loaded")
	s, err := prepare(runCtx, cfg, job)
	if err != nil && terminated() {
		// Nothing was created yet: stopping is all there is to do.
		markSignalled(res, cfg.stop, "before anything was created")
		return res.Err()
	}
	if err != nil {
		return err
	}
	connected.Store(s.conn)
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

// writeStoppingOutputs writes the output files as soon as the step is
// signalled, before the teardown (Terminated; Transient when the signal
// hands the job over); they are written again when it ends. Argo signals
// the step's wait container together with it, and that saves the output
// parameters from whatever files exist within about a second: without
// these, a stopped step's outputs were the template's defaults. Once the
// job's outcome is known they are not written: the signal then only
// hurries the teardown.
func writeStoppingOutputs(cfg *Config, jobName string) {
	cfg.Outputs.early(func() {
		res := newResult(cfg)
		res.JobName = jobName
		markSignalled(&res, cfg.stop, "")
		cfg.status.fill(&res)
		if err := outputs.Write(cfg.OutputsDir, res); err != nil {
			cfg.Logger.Error("writing output files", zap.String("dir", cfg.OutputsDir), zap.Error(err))
		}
	})
}

// markSignalled records a run the step's signal ended: Terminated, or
// Transient when the step pod's disruption hands the job over. when says
// at what stage ("" while the job's objects are being dealt with).
func markSignalled(res *result.Result, stop *stopKind, when string) {
	if stop.handOver() {
		msg := "the step's pod is being removed (" + stop.reason() + "); the job's objects are kept for the step's retry"
		if when != "" {
			msg = "the step's pod is being removed (" + stop.reason() + ") " + when + "; the step's retry goes on with the job"
		}
		res.Phase, res.Reason, res.Message = result.PhaseTransient, result.ReasonStepDisrupted, msg
		return
	}
	msg := "the step was stopped; deleting the job's objects"
	if when != "" {
		msg = "the step was stopped " + when
	}
	markTerminated(res, msg)
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
	// watchNodes: the step may watch nodes, and sees drains coming.
	watchNodes bool
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
	identity, err := proveIdentity(ctx, cfg, conn)
	if err != nil {
		return nil, err
	}
	id := render.Identity{Namespace: conn.namespace, JobName: job.Name, OwnerID: identity.key, Owner: owner, Labels: map[string]string{}}
	if workflow := firstNonEmpty(identity.workflow, cfg.WorkflowName); workflow != "" {
		id.Labels[v1alpha1.LabelWorkflow] = workflow
	}
	logIdentity(cfg, job.Name, identity)
	renderer, err := render.NewRenderer(job, id)
	if err != nil {
		return nil, result.Invalid(result.ReasonInvalidSpec, fmt.Errorf("rendering the job: %w", err))
	}
	planned, err := renderer.SharedObjects(plannedInputs(job))
	if err != nil {
		return nil, result.Invalid(result.ReasonInvalidSpec, fmt.Errorf("rendering the job: %w", err))
	}
	endpointDenied, watchNodes, err := preflight(ctx, cfg, conn, job, id, planned, eventObject != nil)
	if err != nil {
		return nil, err
	}
	inputs, err := renderInputs(ctx, conn, job, id, cfg.APITimeout)
	if err != nil {
		return nil, err
	}
	if cfg.status, err = prepareTrainerStatus(ctx, cfg, conn, job, endpointDenied, &id, &inputs); err != nil {
		return nil, err
	}
	// Rendered again: the progress endpoint, once prepared, is in the identity.
	if renderer, err = render.NewRenderer(job, id); err != nil {
		return nil, result.Invalid(result.ReasonInvalidSpec, fmt.Errorf("rendering the job: %w", err))
	}
	desired, err := renderAllButPods(renderer, inputs)
	if err != nil {
		return nil, result.Invalid(result.ReasonInvalidSpec, fmt.Errorf("rendering the job: %w", err))
	}
	if !cfg.NoNetworkPolicy {
		desired.NetworkPolicy = render.NetworkPolicyAdmitting(job, id, cfg.SpecOptions.Policy.NetworkPolicy.Ingress)
		desired.StatusNetworkPolicy = render.StatusNetworkPolicy(job, id)
	}
	if !cfg.NoDisruptionBudget {
		desired.DisruptionBudget = render.DisruptionBudget(job, id) // nil for a job that needs none
	}
	if err := conn.admitPods(ctx, cfg.APITimeout, renderer); err != nil {
		return nil, err
	}
	log := cfg.Logger.With(zap.String("job", job.Name), zap.String("namespace", conn.namespace))
	cfg.Timeline.Mark("rendered")
	return &preparedRun{conn: conn, identity: id, renderer: renderer, desired: desired, eventObject: eventObject, log: log, watchNodes: watchNodes}, nil
}

// preflight checks every right the job needs, that no object in its way is
// another's, and the APIs it uses (PodGroups, metrics). It returns the
// progress endpoint's rights that are denied (the endpoint is worth no
// failed run, so without them it is left out, with a warning) and whether
// the step may watch nodes.
func preflight(ctx context.Context, cfg *Config, conn *connection, job *v1alpha1.TrainJob, id render.Identity, planned *render.Objects, events bool) (endpointDenied []permission, watchNodes bool, err error) {
	perms := requiredPermissions(planned, events, frameworks.ScalesOnMetrics(job))
	if !cfg.NoNetworkPolicy {
		perms = append(perms, networkPolicyPermissions()...)
	}
	budget := !cfg.NoDisruptionBudget && render.DisruptionBudget(job, id) != nil
	if budget {
		perms = append(perms, disruptionBudgetPermissions()...)
	}
	var endpointPerms []permission
	if servesTrainerStatus(cfg) {
		endpointPerms = trainerStatusPermissions()
	}
	endpointDenied, err = conn.checkPermissions(ctx, cfg.APITimeout, perms, endpointPerms)
	if err != nil {
		return nil, false, err
	}
	cfg.Timeline.Mark("preflight done")
	watchNodes = conn.mayWatchNodes(ctx)
	if !watchNodes && render.DisruptionBudget(job, id) != nil {
		cfg.Logger.Info("the step may not watch nodes (deploy/nodes/): a drain of a rank's node waits on the job's PodDisruptionBudget instead of stopping every rank at once")
	}
	endpoint := servesTrainerStatus(cfg) && cfg.TrainerStatus && len(endpointDenied) == 0
	if err := checkNoForeignObjects(ctx, conn, id, namedObjects(job, planned, endpoint, !cfg.NoNetworkPolicy, budget), cfg.APITimeout); err != nil {
		return nil, false, err
	}
	if podGroups, hasPodGroup := gang.PodGroupResource(gang.Kind(job)); hasPodGroup {
		if err := conn.checkPodGroupAPI(ctx, cfg.APITimeout, podGroups); err != nil {
			return nil, false, err
		}
	}
	if frameworks.ScalesOnMetrics(job) {
		if err := conn.checkMetricsAPI(ctx, cfg.APITimeout); err != nil {
			return nil, false, err
		}
	}
	return endpointDenied, watchNodes, nil
}

// plannedInputs stand in for the inputs renderInputs reads or generates
// (an SSH key pair), so that the preflight sees every kind of object the
// job will create before anything is read or created. The objects rendered
// with them are never sent.
func plannedInputs(job *v1alpha1.TrainJob) render.Inputs {
	if _, _, ok := frameworks.SSHSecret(job, job.Name); !ok {
		return render.Inputs{}
	}
	unused := []byte("planned")
	return render.Inputs{SSHPrivateKey: unused, SSHPublicKey: unused}
}

// renderAllButPods renders the job's shared objects and Services; pods are
// rendered one at a time as they are created.
func renderAllButPods(renderer *render.Renderer, inputs render.Inputs) (*render.Objects, error) {
	desired, err := renderer.SharedObjects(inputs)
	if err != nil {
		return nil, err
	}
	for _, ref := range renderer.Replicas() {
		svc, err := renderer.Service(ref.Type, ref.Index)
		if err != nil {
			return nil, err
		}
		if svc != nil {
			desired.Services = append(desired.Services, svc)
		}
	}
	return desired, nil
}

// execute holds the job's Lease, reconciles the job until it ends or the
// step is stopped, then ends the run as policy.End decides: a teardown on
// a context the signal does not cancel, fenced by the Lease, or the job's
// objects left to a retry of the step or to another run of the job.
func execute(ctx context.Context, cfg *Config, job *v1alpha1.TrainJob, s *preparedRun, terminated func() bool, res *result.Result) (err error) {
	events := newEventRecorder(s.conn.core, s.conn.namespace)
	defer events.flush(cfg.Logger)
	lease := newJobLease(cfg, s)
	if err := lease.acquire(ctx, false, cfg.APITimeout); err != nil {
		e := policy.End(policy.EndingFacts{Lease: policy.LeaseNeverHeld, Stopped: terminated(), HandOver: cfg.stop.handOver(), Disruption: cfg.stop.reason(),
			Decision: policy.Decision{Outcome: policy.OutcomeRunning}, Err: ending.RunError(err)})
		if e.Action == policy.EndWithError {
			return err
		}
		res.Phase, res.Reason, res.Message = e.Phase, e.Reason, e.Message
		return nil
	}
	cfg.Timeline.Mark("lease acquired")
	stopTrainerStatus := cfg.status.serve(ctx, cfg, s.conn, events, s.eventObject)
	defer stopTrainerStatus()

	streamer := newLogStreamer(cfg, s.conn, job, s.log)
	ctrl := newController(cfg, job, s, events, streamer)
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
	end := &runEnd{cfg: cfg, job: job, s: s, ctrl: ctrl, lease: lease, events: events, streamer: streamer, terminated: terminated, res: res}
	return end.carryOut(ctx, decision, superseded, runErr)
}

// newController builds the job's controller.
func newController(cfg *Config, job *v1alpha1.TrainJob, s *preparedRun, events *eventRecorder, streamer *logStreamer) *reconcile.Controller {
	return reconcile.New(reconcile.Options{
		Core: s.conn.core, Dynamic: s.conn.dynamic, Metadata: s.conn.metadata, Job: job, Identity: s.identity, Renderer: s.renderer, Desired: s.desired,
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
		OnLaunched: func() {
			writeTimeline(cfg)
			cfg.status.jobLaunched()
		},
		PodMetrics: s.conn.podMetrics,
		WatchNodes: s.watchNodes,
		OnJobRestart: func(attempt int, reason string) {
			cfg.status.jobRestarted(attempt, reason)
		},
	})
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
		if err := lease.acquire(ctx, true, cfg.APITimeout); err != nil {
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
	go func() {
		defer func() {
			if p := recover(); p != nil {
				errc <- internalError(p)
			}
		}()
		errc <- ctrl.Start(informerCtx)
	}()
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
