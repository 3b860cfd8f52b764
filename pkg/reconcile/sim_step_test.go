package reconcile

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	k8stesting "k8s.io/client-go/testing"

	"github.com/trainstep/trainstep/pkg/apierr"
	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/ending"
	"github.com/trainstep/trainstep/pkg/frameworks"
	"github.com/trainstep/trainstep/pkg/policy"
	"github.com/trainstep/trainstep/pkg/render"
	"github.com/trainstep/trainstep/pkg/result"
	"github.com/trainstep/trainstep/pkg/trainerstatus"
)

// The step around the controller, as the executor runs it: one step pod
// per generation, owning the job's objects (adopt points them at it); its
// hold on the job's Lease, renewed every quarter of the Lease's duration,
// lost when renewals fail for two thirds of it (the controller then writes
// nothing) and taken back within the API timeout; SIGTERM; and its end,
// carried out by the executor's own script (ending.CarryOut) through a Step
// whose teardown is the controller's Cleanup on the virtual clock. Argo
// retries a step that ended Transient leaving the job's objects; when the
// workflow is over its step pods go, and the garbage collector with them
// removes what they own.

const (
	// simLeaseDuration, simRenewDeadline and simRetryPeriod are the
	// executor's: DefaultLeaseDuration, two thirds and a quarter of it.
	simLeaseDuration = 15 * time.Second
	simRenewDeadline = simLeaseDuration * 2 / 3
	simRetryPeriod   = simLeaseDuration / 4
	// simGrace is --termination-grace: a stopped step's teardown.
	simGrace = 25 * time.Second
	// simCleanupBound bounds the teardown of a job that ended by itself
	// (--cleanup-timeout is 5 minutes): 150 s covers a node that stops
	// answering at the end, its grace period, then the node-lost timeout
	// after which the teardown deletes its pods with grace 0.
	simCleanupBound = 150 * time.Second
	// simRetakeBound is how long an ending tries to hold the Lease again.
	simRetakeBound = simGrace / 2
)

// simLease is the job's Lease as the API server holds it.
type simLease struct {
	// holder is the generation of the step holding it (0: none).
	holder  int
	renewed time.Time
}

// simStep is one step pod's run.
type simStep struct {
	r     *simRun
	gen   int
	owner *metav1.OwnerReference
	ctrl  *Controller
	// since is when the step started; startedAt when its controller's
	// Start was first tried.
	since, startedAt time.Time
	// leading: the step holds the Lease; lostAt is when it lost it last,
	// leadSince when it last took it.
	leading           bool
	lostAt, leadSince time.Time
	// started: Start completed; ended: the controller stopped and the
	// ending runs; dead: the step is gone (killed, or its run ended).
	started, ended, dead bool
	// stopped: the step was signalled; handOver: by its own pod's
	// disruption (its node drained), not by a stop of the workflow.
	stopped, handOver bool
	// planned is the view the teardown planned from: the product's one
	// Cleanup observes once, before its deletes.
	planned *policy.View
}

// simMaterial is the progress endpoint's identity, made once: a key pair
// costs more than a schedule.
var simMaterial = sync.OnceValue(func() trainerstatus.Material {
	m, err := trainerstatus.NewMaterial(render.TrainerStatusHosts(ns, "sim"), simEpoch)
	if err != nil {
		panic(err)
	}
	return m
})

// runSchedule runs s under the delivery order orderSeed.
func runSchedule(s schedule, orderSeed uint64, trace bool) *simRun {
	job := s.job.DeepCopy()
	w := newSimWorld(job, orderSeed, s.nodes)
	w.traceOn = trace
	w.roomFrom, w.load = simEpoch.Add(s.room), s.load
	r := &simRun{s: s, w: w, faults: append([]fault(nil), s.faults...), ctx: context.Background(), instances: map[string]types.UID{}, instanceGen: map[types.UID]int{}}
	w.onPodCreated, w.onPodRemoved = r.podCreated, r.removedUnwatched
	w.onBlind, w.onRelist = r.goesBlind, func() { r.sees(); r.relistShows() }
	w.onPanic = func() { r.notePanicCut(); r.panicking = r.panicking || !r.over() }
	saved := apierr.WriteBackoff
	apierr.WriteBackoff = wait.Backoff{Steps: 3}
	defer func() { apierr.WriteBackoff = saved }()

	for i := range r.faults {
		f := &r.faults[i]
		w.after(f.at, 0, "fault "+f.String(), func() { r.inject(f) })
	}
	lastFault := time.Duration(0)
	for _, f := range s.faults {
		lastFault = max(lastFault, f.at+f.lasts)
	}
	// Once the faults are over, every running replica finishes its work.
	healthyFrom := lastFault + 30*time.Second
	w.after(healthyFrom, 0, "success", r.successWave)
	r.startStep()
	until := simEpoch.Add(healthyFrom + simHorizon)
	for r.end == nil && !w.now().After(until) {
		if !r.step(until) {
			break
		}
	}
	if r.end == nil {
		r.violate("wedged: no outcome %s after the last fault; %s", simHorizon, r.stateLine())
		return r
	}
	r.checkEnd()
	return r
}

// step runs the world's next timer or delivery, then checks the invariants.
func (r *simRun) step(until time.Time) (ok bool) {
	defer func() {
		if p := recover(); p != nil {
			r.violate("panic left the controller: %v", p)
			ok = false
		}
	}()
	if !r.w.nextStep(until, r.sync) {
		return false
	}
	if s := r.cur; s != nil && s.started && !s.ended {
		// Run ends on a crash of a controller goroutine as on a sync's fatal error.
		if err := s.ctrl.crashError(); err != nil {
			r.w.logf("crash: %v", err)
			s.end(ending.Run{Started: true, Err: err})
		}
	}
	r.checkInvariants()
	return true
}

// runWorld moves the world on to until, as the ending's waits do: the
// controller no longer syncs.
func (r *simRun) runWorld(until time.Time) {
	for r.w.nextStep(until, r.sync) {
		r.checkInvariants()
	}
	if r.w.now().Before(until) {
		r.w.clock.SetTime(until)
	}
}

// over reports whether the run reached its end or is ending: no step
// takes decisions any more.
func (r *simRun) over() bool { return r.end != nil || r.cur != nil && r.cur.ended }

// startStep starts a new step pod: it waits for the job's Lease, then
// starts its controller, which re-attaches to what earlier steps left.
func (r *simRun) startStep() {
	w := r.w
	if r.end != nil {
		return
	}
	r.sees()
	w.gen++
	s := &simStep{r: r, gen: w.gen, since: w.now()}
	s.owner = &metav1.OwnerReference{APIVersion: "v1", Kind: "Pod", Name: fmt.Sprintf("step-%d", s.gen),
		UID: types.UID(fmt.Sprintf("step-uid-%d", s.gen)), Controller: ptrTrue()}
	r.cur, r.owners = s, append(r.owners, s.owner.UID)
	w.ctrl, w.inbox = nil, nil
	w.logf("step %d starts", s.gen)
	s.acquire()
}

// acquire takes the job's Lease once it is free: released, or not renewed
// for its duration. Its create is retried within the API timeout, then the
// step ends Transient without having held it.
func (s *simStep) acquire() {
	w := s.r.w
	if s.dead {
		return
	}
	free := w.lease.holder == 0 || w.lease.holder == s.gen || w.now().Sub(w.lease.renewed) >= simLeaseDuration
	switch {
	case s.stopped:
		s.endNeverHeld(errors.New("context canceled"))
		return
	case free && w.leaseWritable():
		w.lease = simLease{holder: s.gen, renewed: w.now()}
		s.leading, s.leadSince = true, w.now()
		w.logf("step %d holds the job's lease", s.gen)
		w.after(simRetryPeriod, s.gen, "lease renewal", s.renew)
		s.start()
		return
	case free && w.now().Sub(s.since) > simAPITimeout:
		s.endNeverHeld(result.Transient(result.ReasonAPIUnreachable, errors.New("the API server did not answer for the job's lease")))
		return
	}
	w.after(simRetryPeriod, s.gen, "lease", s.acquire)
}

// endNeverHeld ends a step that never held the Lease, as the executor
// does: its error, or Terminated leaving the objects when stopped.
func (s *simStep) endNeverHeld(err error) {
	handOver, disruption := s.HandOver()
	e := policy.End(policy.EndingFacts{Lease: policy.LeaseNeverHeld, Stopped: s.stopped, HandOver: handOver, Disruption: disruption,
		Decision: policy.Decision{Outcome: policy.OutcomeRunning}, Err: ending.RunError(err)})
	if e.Action == policy.EndWithError {
		e.Phase, e.Reason, e.Message = ending.ErrorResult(err)
	}
	s.ended = true
	s.r.stepEnded(s, ending.Result{Ending: e})
}

// start builds the step's controller and starts it; its informers cannot
// sync while the API server is away, and the executor gives Start the API
// timeout.
func (s *simStep) start() {
	r, w := s.r, s.r.w
	if s.dead || s.ended {
		return
	}
	if s.startedAt.IsZero() {
		s.startedAt = w.now()
	}
	if w.outage() {
		if w.now().Sub(s.startedAt) > simAPITimeout {
			s.end(ending.Run{Decision: policy.Decision{Outcome: policy.OutcomeRunning},
				Err: result.Transient(result.ReasonAPIUnreachable, fmt.Errorf("the job's informers did not sync within %s", simAPITimeout))})
			return
		}
		w.after(time.Second, s.gen, "start once the API server answers", s.start)
		return
	}
	c := s.newController()
	w.informers, w.inbox = map[schema.GroupVersionResource]*simInformer{}, map[schema.GroupVersionResource][]pendingEvent{}
	w.syncPending, w.watchBroken = false, false
	c.makeInformer = w.newInformer
	s.ctrl, w.ctrl = c, c
	c.queue = &simQueue{w: w, gen: s.gen}
	w.logf("controller %d starts", s.gen)
	r.ctrlStarted, r.jobStarted = w.now(), w.jobStartShown()
	if err := c.Start(r.ctx); err != nil {
		w.logf("controller %d: start failed: %v", s.gen, err)
		s.end(ending.Run{Decision: policy.Decision{Outcome: policy.OutcomeRunning}, Err: err})
		return
	}
	s.started = true
	r.truthSeen()
	w.initialAdds()
	c.queue.Add(syncKey)
	if frameworks.ScalesOnMetrics(w.job) {
		r.runAutoscaler(c, s.gen)
	}
}

// newController renders the job as the step does — owned by the step pod,
// with its NetworkPolicies and the progress endpoint's Secrets, Service
// and NetworkPolicy — and builds its controller.
func (s *simStep) newController() *Controller {
	r, w := s.r, s.r.w
	job := w.job
	id := render.Identity{Namespace: ns, JobName: job.Name, OwnerID: testOwnerID, Owner: s.owner,
		TrainerStatus: &render.TrainerStatusEndpoint{Port: 8443}}
	renderer, err := render.NewRenderer(job, id)
	if err != nil {
		panic(err)
	}
	material := simMaterial()
	inputs := testKeys
	inputs.TrainerStatus = &material
	desired, err := render.Render(job, id, inputs)
	if err != nil {
		panic(err)
	}
	desired.NetworkPolicy, desired.StatusNetworkPolicy = render.NetworkPolicy(job, id), render.StatusNetworkPolicy(job, id)
	return New(Options{Core: w.client.CoreV1(), Dynamic: w.dyn, Job: job, Identity: id, Renderer: renderer, Desired: desired,
		Rule: frameworks.SuccessRuleFor(job), Timeouts: simTimeouts, APITimeout: simAPITimeout,
		Parallelism: 1, TeardownParallelism: 1, Logger: zap.NewNop(), Clock: w.clock,
		OnPod: func(*corev1.Pod) {
			if r.panicOnPod {
				r.panicOnPod = false
				r.notePanicCut()
				r.panicking = !r.over()
				panic("injected in OnPod")
			}
		}})
}

// renew renews the Lease every retry period while the step lives. A step
// that could not for the renew deadline stops leading: its controller
// writes nothing until it holds the Lease again, which it tries at every
// period for the API timeout (then its run ends Transient).
func (s *simStep) renew() {
	w := s.r.w
	if s.dead {
		return
	}
	defer w.after(simRetryPeriod, s.gen, "lease renewal", s.renew)
	ours := w.lease.holder == s.gen
	switch {
	case s.leading && ours && w.leaseWritable():
		w.lease.renewed = w.now()
		if s.started && !s.ended {
			s.r.ledLast = w.now()
		}
	case s.leading && w.now().Sub(w.lease.renewed) >= simRenewDeadline:
		s.leading, s.lostAt = false, w.now()
		w.logf("step %d could not renew the job's lease; writing nothing until it is held again", s.gen)
	case !s.leading && !s.ended && w.leaseWritable() && (ours || w.lease.holder == 0 || w.now().Sub(w.lease.renewed) >= simLeaseDuration):
		w.lease = simLease{holder: s.gen, renewed: w.now()}
		s.leading, s.leadSince = true, w.now()
		w.logf("step %d holds the job's lease again; going on where it stopped", s.gen)
		if s.started {
			s.ctrl.queue.Add(syncKey)
		}
	case !s.leading && !s.ended && w.now().Sub(s.lostAt) > simAPITimeout:
		s.end(ending.Run{Started: s.started, Decision: policy.Decision{Outcome: policy.OutcomeRunning},
			Err: result.Transient(result.ReasonAPIUnreachable, fmt.Errorf("could not take the job's lease back within %s", simAPITimeout))})
	}
}

// sync is one pass of the controller's worker, as Run does it while the
// step holds the Lease.
func (r *simRun) sync() {
	s := r.cur
	if s == nil || s.ended || !s.started || !s.leading {
		return
	}
	w, c := r.w, s.ctrl
	r.lastDecided = w.now()
	r.decideDeliveries()
	d, err := c.syncRecovered(r.ctx)
	w.logf("sync: %s %s %s %v", d.Outcome, d.Reason, d.Message, err)
	if crash := c.crashError(); crash != nil {
		// Run ends on a crash of a controller goroutine, whatever the sync
		// beside it decided.
		s.end(ending.Run{Started: true, Err: crash})
		return
	}
	var re *result.Error
	switch {
	case err != nil && errors.As(err, &re):
		if re.Reason == result.ReasonQuotaExceeded {
			if v := c.View(); w.job.Spec.ElasticPolicy != nil {
				if e, _ := policy.ElasticOf(&v); e.Running >= e.Min {
					r.violate("an elastic job with %d of %d..%d workers running ended %s: workers waiting for room never end it", e.Running, e.Min, e.Max, re.Reason)
				}
			}
		}
		s.end(ending.Run{Started: true, Err: err})
	case err != nil:
		w.after(time.Duration(50+w.rng.IntN(1000))*time.Millisecond, s.gen, "requeue", func() { c.queue.Add(syncKey) })
	case d.Outcome != policy.OutcomeRunning:
		s.end(ending.Run{Started: true, Decision: d})
	default:
		// An end the cache's lag holds back (freshness.go) is not a job
		// going on: the sync did nothing else.
		if limit := w.job.Spec.RunPolicy.BackoffLimit; limit != nil && c.behindSince.IsZero() {
			if v := c.View(); v.Restarts > *limit {
				r.violate("the job goes on with %d counted restarts, past backoffLimit %d", v.Restarts, *limit)
			}
		}
		if d.RecheckAfter > 0 {
			w.after(d.RecheckAfter, s.gen, "recheck", func() { c.queue.Add(syncKey) })
		}
	}
}

// end carries the step's ending out, as the executor does once its
// controller stopped.
func (s *simStep) end(run ending.Run) {
	if s.ended || s.dead {
		return
	}
	s.ended = true
	s.r.w.logf("step %d ends: decision %s %s, error %v", s.gen, run.Decision.Outcome, run.Decision.Reason, run.Err)
	out := ending.CarryOut(s, run)
	if e := out.Ending; e.Action == policy.LeaveObjects && e.Reason == result.ReasonStepDisrupted && s.leading && s.ctrl != nil {
		// As the executor does: the replicas must not go with the step
		// pod, whose grace bounds the tries.
		s.disown(s.r.w.now().Add(simGrace-2*time.Second), func() { s.finishEnd(out) })
		return
	}
	s.finishEnd(out)
}

// finishEnd gives the Lease up when the ending says so, and goes on as the
// step's run ended.
func (s *simStep) finishEnd(out ending.Result) {
	if s.dead {
		return
	}
	if out.Ending.ReleaseLease {
		s.release()
	}
	if s.handOver {
		// Its process exited: the eviction removes the step pod, and the
		// garbage collector what the pod still owns, while Argo retries.
		owner := s.owner.UID
		s.r.w.after(time.Duration(200+s.r.w.rng.IntN(800))*time.Millisecond, 0, "step pod evicted", func() { s.r.collectOwnedBy(owner) })
	}
	s.r.stepEnded(s, out)
}

// disown clears the owner of the job's objects as the executor's ending
// does: tried again every second while it fails for a reason that may
// pass, until deadline; then done.
func (s *simStep) disown(deadline time.Time, done func()) {
	w := s.r.w
	if s.dead {
		return
	}
	err := s.ctrl.Disown(s.r.ctx)
	if err == nil || apierr.IsPermanent(err) || !w.now().Add(time.Second).Before(deadline) {
		if err != nil {
			w.logf("step %d: clearing the job's owner failed: %v", s.gen, err)
		}
		done()
		return
	}
	w.after(time.Second, 0, "disown again", func() { s.disown(deadline, done) })
}

// release gives the Lease up, when the API server takes the write.
func (s *simStep) release() {
	w := s.r.w
	if w.lease.holder == s.gen && w.leaseWritable() {
		w.lease = simLease{}
	}
	s.leading = false
}

// kill ends the step pod without a teardown; the Lease stays its own
// until it expires.
func (s *simStep) kill() {
	s.dead = true
	s.r.w.logf("step %d is killed", s.gen)
}

// stepEnded goes on after a step's run ended: Argo retries a step that
// ended Transient leaving the job's objects (its retry re-attaches); any
// other end is the schedule's.
func (r *simRun) stepEnded(s *simStep, out ending.Result) {
	w := r.w
	s.dead = true
	r.lostDeliveries()
	w.ctrl, w.inbox, w.informers = nil, nil, nil
	e := out.Ending
	leaves := e.Action == policy.EndWithError || e.Action == policy.LeaveObjects
	if leaves && e.Phase == result.PhaseTransient && (!s.stopped || s.handOver) {
		if r.retries < simRetries {
			r.retries++
			r.cur = nil
			r.goesBlind()
			r.undecidedLost(s)
			r.noteLedgerLost(s)
			// A panic whose run could not hold the Lease to tear down (it
			// deletes nothing then, Transient) is that step's: its retry
			// goes on with the job.
			r.notePanicAway(s)
			r.panicking = false
			w.logf("step %d ended %s/%s leaving the job's objects; Argo retries it", s.gen, e.Phase, e.Reason)
			w.after(time.Duration(1+w.rng.IntN(10))*time.Second, 0, "step retried", r.startStep)
			return
		}
		r.abandoned = true
	}
	r.finishRun(s, out)
}

// finishRun records the schedule's end.
func (r *simRun) finishRun(s *simStep, out ending.Result) {
	w, e := r.w, out.Ending
	r.ended = e
	end := &simEnd{phase: string(e.Phase), reason: e.Reason, reattached: r.retries, at: w.now(), landed: r.landedFaults(), targets: slices.Clone(r.targets),
		resumed: maxTime(s.leadSince, s.startedAt), launcherAway: r.launcherAway, panicAway: r.panicAway, panicCut: r.panicCut,
		goneUnseen: r.goneUnseen(),
		lateFault:  r.landedLate()}
	if r.abandoned {
		end.reason = "RetriesExhausted: " + e.Reason
	}
	// The outputs list the replicas, and the restarts, only when the ending
	// does: otherwise nothing reports them.
	v, haveView := out.View, e.ListReplicas
	if haveView {
		end.restarts = v.Restarts
		end.charged = v.Restarts + policy.CheckFailures(&v, simTimeouts).Counted()
	} else {
		// No run listed the replicas (it never held the Lease): nothing
		// reports the restarts.
		end.restarts, r.unreported = r.restartsOnRecord(), true
		end.charged = end.restarts
	}
	if d := w.job.Spec.RunPolicy.ActiveDeadlineSeconds; d != nil && s.ctrl != nil {
		end.deadline = r.jobStarted.Add(time.Duration(*d) * time.Second)
	}
	r.end = end
	w.logf("outcome %s (%s)", end, e.Message)
	if e.Phase == result.PhaseSucceeded {
		if limit := w.job.Spec.RunPolicy.BackoffLimit; limit != nil && end.restarts > *limit {
			r.violate("succeeded with %d counted restarts, past backoffLimit %d", end.restarts, *limit)
		}
	}
	if r.panicking && e.Reason != result.ReasonInternalError {
		r.violate("ended %s/%s although trainstep panicked: a panic ends the run Failed %s", e.Phase, e.Reason, result.ReasonInternalError)
	}
	if r.permanentExit != "" && e.Phase != result.PhaseFailed && !r.panicking && !s.stopped {
		r.violate("ended %s/%s although %s, which its restart policy does not retry", e.Phase, e.Reason, r.permanentExit)
	}
	r.checkTruth(end)
}

// restartsOnRecord is the counted restarts the job's pods carry: what a
// new step would continue from.
func (r *simRun) restartsOnRecord() int32 {
	var n int32
	for _, p := range r.w.jobPods() {
		n = max(n, annotationCount(p, v1alpha1.AnnotationJobRestarts))
	}
	return n
}

// ---- the Step ending.CarryOut drives ----

func (s *simStep) Stopped() bool { return s.stopped }

func (s *simStep) HandOver() (bool, string) {
	if !s.handOver {
		return false, ""
	}
	return true, simStepDisruption
}

func (s *simStep) Lease() policy.LeaseState {
	if s.leading {
		return policy.LeaseHeld
	}
	return policy.LeaseLost
}

func (s *simStep) Settle() {}

func (s *simStep) Begin() {}

// RetakeLease tries to hold the Lease again for simRetakeBound.
func (s *simStep) RetakeLease() (policy.LeaseState, string) {
	r, w := s.r, s.r.w
	until := w.now().Add(simRetakeBound)
	for {
		if w.leaseWritable() && (w.lease.holder == 0 || w.lease.holder == s.gen || w.now().Sub(w.lease.renewed) >= simLeaseDuration) {
			w.lease = simLease{holder: s.gen, renewed: w.now()}
			s.leading, s.leadSince = true, w.now()
			return policy.LeaseHeld, ""
		}
		if !w.now().Before(until) {
			return policy.LeaseNotRetaken, fmt.Sprintf("within %s (the API server did not take the write)", simRetakeBound)
		}
		r.runWorld(minTime(w.now().Add(simRetryPeriod), until))
	}
}

// TearDown sends the controller's Cleanup every 2 s, the world moving on
// between, until nothing it deletes is left or its bound passed (the
// grace period when stopped); it stops when the step loses the Lease.
// Faults clear 10 s into it.
func (s *simStep) TearDown(deleteAll bool) *policy.TeardownReport {
	r, w, c := s.r, s.r.w, s.ctrl
	report := &policy.TeardownReport{}
	if c == nil {
		return report
	}
	bound := simCleanupBound
	if s.stopped {
		bound = simGrace
	}
	until := w.now().Add(bound)
	w.after(10*time.Second, 0, "faults clear", r.clearFaults)
	r.teardown, r.plan = deleteAll, policy.Cleanup(w.job.Spec.RunPolicy.CleanPodPolicyOrDefault(), deleteAll, c.View().Replicas)
	for {
		if !s.leading {
			report.LostLease = true
			break
		}
		if _, err := c.Cleanup(r.ctx, deleteAll, false); err != nil {
			w.logf("cleanup: %v", err)
		}
		if s.planned == nil {
			v := c.View()
			s.planned = &v
		}
		// The executor's wait for the pods to go (Cleanup's waitGone, which
		// polls in real time) drops Kueue's finalizer from each pod it lists.
		if err := c.releaseKueueHoldsOf(r.ctx, w.jobPods(), nil); err != nil {
			w.logf("cleanup: %v", err)
		}
		// What the policy keeps is decided on the replicas as they stand:
		// a pod whose delete failed may have ended meanwhile.
		r.plan = policy.Cleanup(w.job.Spec.RunPolicy.CleanPodPolicyOrDefault(), deleteAll, c.View().Replicas)
		if len(r.leftByTeardown()) == 0 || !w.now().Before(until) {
			break
		}
		r.runWorld(minTime(w.now().Add(2*time.Second), until))
	}
	report.Left = r.leftByTeardown()
	return report
}

func (s *simStep) View() policy.View {
	if s.planned != nil {
		return *s.planned
	}
	return s.ctrl.View()
}

// clearFaults ends the API faults, the quota and the nodes' silence.
func (r *simRun) clearFaults() {
	w := r.w
	w.apiFaults, w.quotaUntil, w.outageUntil = nil, time.Time{}, time.Time{}
	for _, n := range w.nodes {
		if !n.up || n.deleted {
			r.nodeUp(n)
		}
	}
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// killStep ends the running step pod without a teardown (it was killed);
// its successor starts after d and re-attaches, but not before an exit
// awaited while no step runs landed on a replica that runs: it happens
// while no step runs, however late its turn came.
func (r *simRun) killStep(d time.Duration) {
	w, s := r.w, r.cur
	if s == nil || s.dead || r.over() {
		return
	}
	s.kill()
	r.cur = nil
	r.goesBlind()
	r.undecidedLost(s)
	r.noteLedgerLost(s)
	w.ctrl, w.inbox, w.informers = nil, nil, nil
	w.gen++
	var restart func()
	restart = func() {
		if r.end != nil || r.cur != nil {
			return
		}
		if r.exitAwaited() {
			w.after(time.Second, 0, "step restarted", restart)
			return
		}
		r.startStep()
	}
	w.after(d, 0, "step restarted", restart)
}

// stopStep signals the running step (argo stop): its run ends, and the
// ending tears the job down within the grace period. With no step
// running, the workflow stops and leaves the objects to their owners.
func (r *simRun) stopStep() {
	s := r.cur
	if r.over() {
		return
	}
	r.stopped = true
	if s == nil || s.dead {
		r.w.logf("stopped while no step runs: the objects are left to their owners")
		r.unreported = true
		r.finishRun(&simStep{r: r, stopped: true}, ending.Result{Ending: policy.Ending{Action: policy.LeaveObjects,
			Phase: result.PhaseTerminated, Reason: result.ReasonTerminated, Message: "the workflow was stopped between its retries"}})
		return
	}
	s.stopped = true
	if !s.leading && !s.started {
		return // waiting for the Lease: acquire ends it, never having held it
	}
	s.end(ending.Run{Started: s.started, Decision: policy.Decision{Outcome: policy.OutcomeRunning}})
}

// simStepDisruption is the step pod's DisruptionTarget when its node is
// drained, as the executor reads it.
const simStepDisruption = "EvictionByEvictionAPI: Eviction API: evicting"

// drainStep drains the running step's own node: the step is signalled and
// its pod is a DisruptionTarget, so it hands the job over to its retry
// (Transient, nothing deleted) unless the job already ended. With no step
// running, there is nothing to drain.
func (r *simRun) drainStep() {
	s := r.cur
	if r.over() || s == nil || s.dead {
		return
	}
	r.w.logf("step %d: its node is drained", s.gen)
	s.stopped, s.handOver = true, true
	// The eviction removes the step pod once its grace is over at the
	// latest, and the garbage collector what it still owns.
	owner := s.owner.UID
	r.w.after(simGrace, 0, "step pod evicted", func() { r.collectOwnedBy(owner) })
	if !s.leading && !s.started {
		return // waiting for the Lease: acquire ends it, never having held it
	}
	s.end(ending.Run{Started: s.started, Decision: policy.Decision{Outcome: policy.OutcomeRunning}})
}

// collectOwnedBy deletes the job's objects whose controller is the step
// pod owner, gone, as the garbage collector does (pods with their grace).
func (r *simRun) collectOwnedBy(owner types.UID) {
	w := r.w
	for _, gvr := range []schema.GroupVersionResource{podsGVR, servicesGVR, configMapsGVR, secretsGVR} {
		for _, m := range w.jobObjects(gvr) {
			if ref := metav1.GetControllerOfNoCopy(m); ref == nil || ref.UID != owner {
				continue
			}
			w.logf("the garbage collector deletes %s %s with its owner, the evicted step pod", gvr.Resource, m.GetName())
			if gvr == podsGVR && m.GetDeletionTimestamp() == nil {
				r.gcTaken++
			}
			if gvr == podsGVR && m.GetUID() == r.permanentPod && (w.ctrl == nil || w.watchBroken) {
				// No step watched: none will know of that exit.
				w.logf("the garbage collector removes %s before any step saw its exit", r.permanentExit)
				r.permanentExit = ""
			}
			if err := w.delete(k8stesting.NewDeleteAction(gvr, m.GetNamespace(), m.GetName()), gvr); err != nil {
				w.logf("the garbage collector: %v", err)
			}
		}
	}
	for _, m := range w.jobNetworkPolicies() {
		if ref := metav1.GetControllerOfNoCopy(m); ref != nil && ref.UID == owner {
			w.logf("the garbage collector deletes networkpolicy %s with its owner, the evicted step pod", m.GetName())
			_ = w.dyn.Tracker().Delete(networkPolicies, m.GetNamespace(), m.GetName())
		}
	}
}

// leftByTeardown names the job's objects the teardown's plan deletes that
// are still there (being deleted or not).
func (r *simRun) leftByTeardown() []string {
	w := r.w
	kept := map[string]bool{}
	if !r.plan.Shared {
		for _, name := range replicaNames(w.job) {
			kept[name] = true
		}
		for _, id := range r.plan.Pods {
			delete(kept, render.PodName(w.job.Name, id.Type, id.Index))
		}
	}
	var left []string
	for _, p := range w.jobPods() {
		if !kept[p.Name] {
			left = append(left, "pod "+describe(p))
		}
	}
	if r.plan.Shared {
		for _, gvr := range []schema.GroupVersionResource{servicesGVR, configMapsGVR, secretsGVR} {
			for _, m := range w.jobObjects(gvr) {
				left = append(left, gvr.Resource+" "+m.GetName())
			}
		}
		for _, m := range w.jobNetworkPolicies() {
			left = append(left, "networkpolicies "+m.GetName())
		}
	}
	return left
}

// checkEnd checks the schedule's end. A teardown that held the Lease left
// nothing but what cleanPodPolicy keeps. Then the workflow is over: its
// step pods go, and the garbage collector removes what they own — which
// must be everything of the job: no replica outlives its workflow.
func (r *simRun) checkEnd() {
	w := r.w
	if r.ended.Action == policy.Ended && !strings.Contains(r.ended.Message, "lost the job's lease") {
		for _, left := range r.leftByTeardown() {
			r.violate("%s left after the teardown (%s, cleanPodPolicy %s)", left, r.end, w.job.Spec.RunPolicy.CleanPodPolicyOrDefault())
		}
	}
	r.collectGarbage()
}

// collectGarbage deletes the workflow's step pods' objects, as the garbage
// collector does once they are gone, and checks that nothing of the job
// is left: an object without a step for owner would outlive the workflow.
func (r *simRun) collectGarbage() {
	w := r.w
	owned := func(m metav1.Object) bool {
		ref := metav1.GetControllerOfNoCopy(m)
		return ref != nil && slices.Contains(r.owners, ref.UID)
	}
	for _, p := range w.jobPods() {
		if !owned(p) {
			r.violate("pod %s has no step of the workflow for owner (%v): it would outlive the workflow", describe(p), p.OwnerReferences)
			continue
		}
		_ = w.remove(podsGVR, p)
	}
	for _, gvr := range []schema.GroupVersionResource{servicesGVR, configMapsGVR, secretsGVR} {
		for _, m := range w.jobObjects(gvr) {
			if !owned(m) {
				r.violate("%s %s has no step of the workflow for owner (%v): it would outlive the workflow", gvr.Resource, m.GetName(), m.GetOwnerReferences())
				continue
			}
			_ = w.tracker.Delete(gvr, m.GetNamespace(), m.GetName())
		}
	}
	for _, m := range w.jobNetworkPolicies() {
		if !owned(m) {
			r.violate("networkpolicy %s has no step of the workflow for owner (%v): it would outlive the workflow", m.GetName(), m.GetOwnerReferences())
		}
	}
	for _, p := range w.jobPods() {
		if p.DeletionTimestamp == nil || len(p.Finalizers) == 0 {
			r.violate("pod %s left once the workflow's steps were gone", describe(p))
		}
	}
}

// goesBlind records when no watch delivers any more (the step died, or
// its watches broke), once until a step sees again; the failures whose
// events were on their way are lost with them.
func (r *simRun) goesBlind() {
	r.lostDeliveries()
	if r.unwatchedSince.IsZero() {
		r.unwatchedSince = r.w.now()
	}
}

// sees records that a step lists the job again (it starts, or relists):
// what an MPI launcher and its workers did meanwhile is judged now.
func (r *simRun) sees() {
	if r.launcherJudgedAway(r.unwatchedSince) {
		r.launcherAway = true
	}
	r.unwatchedSince = time.Time{}
}

// noteLedgerLost records a step that died while the ledger's Service was
// missing: what only it recorded is gone for the next step.
func (r *simRun) noteLedgerLost(s *simStep) {
	if s.ctrl == nil {
		return
	}
	if _, err := r.w.tracker.Get(servicesGVR, simNamespace, s.ctrl.ledgerService()); err != nil {
		r.ledgerLostAt = r.w.now()
	}
}
