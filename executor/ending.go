package executor

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/trainstep/trainstep/pkg/apierr"
	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/ending"
	"github.com/trainstep/trainstep/pkg/policy"
	"github.com/trainstep/trainstep/pkg/reconcile"
	"github.com/trainstep/trainstep/pkg/result"
)

// errLeaseLost cancels a run whose hold on the job's Lease ended: another
// run of the job writes now.
var errLeaseLost = errors.New(policy.MessageLeaseLost)

// runEnd carries out how a run that held the job's Lease ends, as
// policy.End decides it (ending.CarryOut asks): what is deleted or left,
// the phase and message. It is ending.CarryOut's Step on the cluster.
type runEnd struct {
	cfg        *Config
	job        *v1alpha1.TrainJob
	s          *preparedRun
	ctrl       *reconcile.Controller
	lease      *jobLease
	events     *eventRecorder
	streamer   *logStreamer
	terminated func() bool
	res        *result.Result

	// runCtx is the run's context; teardownCtx bounds what the ending does
	// once it deals with the job's objects (Begin).
	runCtx         context.Context
	teardownCtx    context.Context
	cancelTeardown context.CancelFunc
}

// carryOut ends the run after the controller stopped with decision or
// runErr, and writes how into the result.
func (r *runEnd) carryOut(ctx context.Context, decision policy.Decision, superseded bool, runErr error) error {
	r.runCtx = ctx
	defer func() {
		if r.cancelTeardown != nil {
			r.cancelTeardown()
		}
	}()
	out := ending.CarryOut(r, ending.Run{Started: r.ctrl.Started(), Superseded: superseded, Decision: decision, Err: runErr})
	if out.Ending.Action == policy.EndWithError {
		if out.Ending.ReleaseLease {
			r.releaseLease(nil)
		}
		return runErr
	}
	r.apply(r.teardownCtx, out.Ending, decision, &out.View)
	return nil
}

// Stopped reports whether the step was signalled.
func (r *runEnd) Stopped() bool { return r.terminated() }

// HandOver reports whether the step's own pod is being removed by the
// infrastructure, and how: its retry goes on with the job.
func (r *runEnd) HandOver() (bool, string) { return r.cfg.stop.handOver(), r.cfg.stop.reason() }

// Lease is where this run stands with the job's Lease now.
func (r *runEnd) Lease() policy.LeaseState {
	if r.lease.held() {
		return policy.LeaseHeld
	}
	return policy.LeaseLost
}

// Settle: the outcome is known, so a signal from now on only hurries the
// teardown.
func (r *runEnd) Settle() { r.cfg.Outputs.settle() }

// Begin bounds what the ending does from here (teardownContext) and
// drains the replicas' logs.
func (r *runEnd) Begin() {
	r.teardownCtx, r.cancelTeardown = teardownContext(r.runCtx, r.cfg, r.terminated())
	r.drainLogs(r.teardownCtx)
}

// RetakeLease tries to hold the job's Lease again before the teardown.
func (r *runEnd) RetakeLease() (policy.LeaseState, string) { return r.retakeLease(r.teardownCtx) }

// TearDown deletes the job's objects.
func (r *runEnd) TearDown(deleteAll bool) *policy.TeardownReport {
	return r.tearDown(r.teardownCtx, deleteAll)
}

// View is the view the teardown planned from: a replica that ended since
// the last sync was kept, and the outputs say so.
func (r *runEnd) View() policy.View { return r.ctrl.View() }

// drainLogs waits a little for the replicas' log streams. Streams of
// replicas still running never drain by themselves: the wait is bounded so
// the cleanup keeps most of the grace period. A stopped step waits for
// nothing before the deletes: Argo signals it again within seconds, and a
// second signal ends trainstep before its teardown.
func (r *runEnd) drainLogs(teardownCtx context.Context) {
	drainCtx, cancelDrain := context.WithTimeout(teardownCtx, r.cfg.TerminationGrace/5)
	defer cancelDrain()
	if r.terminated() {
		cancelDrain()
	}
	r.streamer.stop(drainCtx)
}

// apply writes an ending that leaves the job or ended its teardown into
// the result, and gives the Lease up when the ending says so.
func (r *runEnd) apply(teardownCtx context.Context, e policy.Ending, decision policy.Decision, view *policy.View) {
	if e.ListReplicas {
		fillResult(r.res, r.job, view, decision, r.s.log)
	}
	r.res.Phase, r.res.Reason, r.res.Message = e.Phase, e.Reason, e.Message
	fields := []zap.Field{zap.String("phase", string(e.Phase)), zap.String("reason", e.Reason), zap.String("message", e.Message)}
	if e.Action == policy.LeaveObjects {
		r.s.log.Warn("deleted nothing: the job's objects are left to a retry of the step or to another run", fields...)
		if e.Reason == result.ReasonStepDisrupted && r.lease.held() {
			if err := r.disown(teardownCtx); err != nil {
				r.s.log.Warn("the job's objects may go with the step's pod: clearing their owner failed", zap.Error(err))
			}
		}
		if e.ReleaseLease {
			r.releaseLease(nil)
		}
		return
	}
	plan := policy.Cleanup(r.job.Spec.RunPolicy.CleanPodPolicyOrDefault(), e.DeleteAll, view.Replicas)
	markStopped(r.res, plan.Pods)
	r.events.final(r.s.eventObject, *r.res)
	r.releaseLease(teardownCtx)
	r.s.log.Info("job ended", fields...)
}

// disownRetry is how often a failed Controller.Disown is tried again.
const disownRetry = time.Second

// disown clears the owner of the job's objects before the step pod goes
// (Controller.Disown), tried again every disownRetry while it fails for a
// reason that may pass (an API error, a conflict), until ctx ends: once the
// step pod's grace is over, the garbage collector takes whatever it still
// owns, the replicas with it.
func (r *runEnd) disown(ctx context.Context) error {
	for {
		err := r.ctrl.Disown(ctx)
		if err == nil || apierr.IsPermanent(err) {
			return err
		}
		r.s.log.Info("clearing the job's owner failed; trying again", zap.Error(err))
		select {
		case <-ctx.Done():
			return err
		case <-time.After(disownRetry):
		}
	}
}

// releaseLease gives the Lease up on ctx, or within 5 s when ctx is nil.
func (r *runEnd) releaseLease(ctx context.Context) {
	if ctx == nil {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
	}
	r.lease.release(ctx)
}

// tearDown deletes the job's objects, fenced by the Lease, and reports
// what it did.
func (r *runEnd) tearDown(ctx context.Context, deleteAll bool) *policy.TeardownReport {
	left, err := fencedCleanup(ctx, r.ctrl, r.lease, deleteAll)
	report := &policy.TeardownReport{LostLease: !r.lease.held(), Left: left}
	if err != nil {
		r.s.log.Error("cleaning up", zap.Error(err), zap.Strings("left", left))
		report.Err = err.Error()
	}
	return report
}

// fencedCleanup runs the controller's Cleanup on a context that ends the
// moment this run no longer holds the job's Lease: another run writes then.
func fencedCleanup(ctx context.Context, ctrl *reconcile.Controller, lease *jobLease, everything bool) ([]string, error) {
	fencedCtx, cancelFenced := context.WithCancel(ctx)
	defer cancelFenced()
	select {
	case <-lease.lost:
		cancelFenced() // lost already: not one delete goes out
	default:
	}
	go func() {
		select {
		case <-lease.lost:
			cancelFenced()
		case <-fencedCtx.Done():
		}
	}()
	return ctrl.Cleanup(fencedCtx, everything, true)
}

// retakeLease tries, for part of the termination grace, to hold the job's
// Lease again before the teardown: Held, Superseded when another run
// holds it, or NotRetaken with why.
func (r *runEnd) retakeLease(ctx context.Context) (policy.LeaseState, string) {
	bound := min(r.cfg.TerminationGrace/2, 2*r.cfg.LeaseDuration)
	takeCtx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	err := r.lease.acquire(takeCtx, true, bound)
	switch {
	case errors.Is(err, errLeaseLost):
		return policy.LeaseSuperseded, ""
	case err != nil:
		r.s.log.Warn("could not hold the job's lease again; deleting nothing", zap.Error(err))
		return policy.LeaseNotRetaken, fmt.Sprintf("within %s (%v)", bound, err)
	}
	return policy.LeaseHeld, ""
}

// teardownAfterPanic deletes everything of the job after a panic, within
// the termination grace, if this run holds the job's Lease; like the
// teardown of a run that ended, it stops the moment the Lease is lost.
func teardownAfterPanic(cfg *Config, ctrl *reconcile.Controller, lease *jobLease, log *zap.Logger) {
	if !lease.held() {
		log.Warn("this run does not hold the job's lease: it deletes nothing after the failure")
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), cfg.TerminationGrace)
	defer cancel()
	if left, err := fencedCleanup(ctx, ctrl, lease, true); err != nil || len(left) > 0 {
		log.Error("cleaning up after the failure", zap.Error(err), zap.Strings("left", left))
	}
	lease.release(ctx)
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
