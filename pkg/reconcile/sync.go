package reconcile

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"go.uber.org/zap"
	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/trainstep/trainstep/pkg/apierr"
	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/frameworks"
	"github.com/trainstep/trainstep/pkg/gang"
	"github.com/trainstep/trainstep/pkg/policy"
	"github.com/trainstep/trainstep/pkg/result"
)

// newBucket is the overall rate limit of re-syncs after errors: 10 per second, bursts of 100.
func newBucket() *rate.Limiter { return rate.NewLimiter(rate.Limit(10), 100) }

// prepare does, in order, the writes and live reads that come before the
// replicas are judged: a re-attach's writes (before any create), the
// PodGroup, live reads of what the cache may lack, Kueue's holds released,
// then the creates of what is missing.
func (c *Controller) prepare(ctx context.Context) error {
	for _, step := range []func(context.Context) error{
		c.finishReattach, c.ensurePodGroup, c.confirmExpectations, c.confirmUndelivered, c.releaseKueueHolds, c.createMissing,
	} {
		if err := step(ctx); err != nil {
			return err
		}
	}
	return nil
}

// sync looks at the whole job once: close overdue expectations with live
// reads, create what is missing, let the built-in gang admit the job,
// observe the replicas, ask the policy, then carry out recreations.
func (c *Controller) sync(ctx context.Context) (policy.Decision, error) {
	// The deadline needs no write: it holds while the API server refuses
	// them, and while the job restarts (success still comes first).
	if d, ok := policy.DeadlineExceeded(&policy.View{Job: c.opts.Job, StartTime: c.startTime, Now: c.opts.Clock.Now()}); ok {
		// The end's view is what it reports and charges. Best effort: the
		// deadline does not wait for an API server that does not answer.
		if err := c.confirmVanished(ctx); err != nil {
			c.opts.Logger.Debug("confirming replicas the informer saw deleted", zap.Error(err))
		}
		if c.view = c.observe(); !policy.Succeeded(&c.view, c.opts.Rule) {
			return c.confirmedWait(ctx, d)
		}
	}
	if err := c.prepare(ctx); err != nil {
		return policy.Decision{}, c.apiError(err)
	}
	gangRecheck, err := c.admitGang(ctx)
	if err != nil {
		return policy.Decision{}, err
	}
	c.view = c.observe()
	if c.restarting != nil {
		// No replica is judged while the job restarts (the deadline was above).
		return c.syncJobRestart(ctx)
	}
	decision, err := c.confirmedWait(ctx, policy.Decide(&c.view, c.opts.Rule, c.opts.Timeouts))
	if err != nil {
		return policy.Decision{}, c.apiError(err)
	}
	if decision.Outcome == policy.OutcomeRunning && decision.RestartJob != nil {
		c.startJobRestart(decision.RestartJob)
		return c.syncJobRestart(ctx)
	}
	c.reportProgress(decision.Settling)
	if decision.Outcome != policy.OutcomeRunning {
		return decision, nil
	}
	c.reportWorldSize()
	if err := c.recordInPlaceRestarts(ctx); err != nil {
		return policy.Decision{}, c.apiError(err)
	}
	if err := c.removeAboveTarget(ctx); err != nil {
		return policy.Decision{}, c.apiError(err)
	}
	if err := c.quotaTimedOut(); err != nil {
		return policy.Decision{}, err
	}
	if err := c.recreate(ctx, decision.Recreate, true); err != nil {
		return policy.Decision{}, c.apiError(err)
	}
	if err := c.recreate(ctx, decision.RecreateUncounted, false); err != nil {
		return policy.Decision{}, c.apiError(err)
	}
	// A replacement may wait for an instance Kueue holds: no event would
	// come to release it.
	if err := c.releaseKueueHolds(ctx); err != nil {
		return policy.Decision{}, c.apiError(err)
	}
	// After the recreations: a replacement created at once (its predecessor
	// was already gone) may have been refused by a quota, and no event would
	// come to try it again.
	decision.RecheckAfter = sooner(decision.RecheckAfter, gangRecheck)
	decision.RecheckAfter = sooner(decision.RecheckAfter, c.quotaRecheck())
	decision.RecheckAfter = sooner(decision.RecheckAfter, c.nextExpectationCheck())
	c.apiErrorsSince = time.Time{}
	return decision, nil
}

// syncJobRestart is a sync while the whole job restarts: no decision is
// taken on replicas that end meanwhile (they followed the cause); once
// every instance is gone, the next attempt's pods are created.
func (c *Controller) syncJobRestart(ctx context.Context) (policy.Decision, error) {
	c.reportProgress(0)
	under, err := c.continueJobRestart(ctx)
	if err != nil {
		return policy.Decision{}, c.apiError(err)
	}
	if err := c.releaseKueueHolds(ctx); err != nil {
		return policy.Decision{}, c.apiError(err)
	}
	if !under {
		if err := c.createMissing(ctx); err != nil {
			return policy.Decision{}, c.apiError(err)
		}
		c.view = c.observe()
		c.reportProgress(0)
	}
	c.apiErrorsSince = time.Time{}
	recheck := sooner(c.nextExpectationCheck(), c.nextNodeLost())
	recheck = sooner(recheck, c.quotaRecheck()) // the next attempt's pods may have been refused
	if left, ok := policy.DeadlineLeft(&c.view); ok {
		recheck = sooner(recheck, max(left, time.Millisecond))
	}
	return policy.Decision{Outcome: policy.OutcomeRunning, RecheckAfter: recheck}, nil
}

// sooner returns the shorter of two recheck delays, 0 meaning none.
func sooner(a, b time.Duration) time.Duration {
	if b > 0 && (a == 0 || b < a) {
		return b
	}
	return a
}

// expectationTimeout is how long an open expectation (a create or a
// delete the informer has not delivered) is trusted before a live read
// decides: a watch that dropped an event must not wedge a replica.
var expectationTimeout = 30 * time.Second

// confirmExpectations asks the API server about every replica whose
// instance the informer saw deleted without trainstep removing it, and
// about every create or delete the informer has not delivered within
// expectationTimeout: only a live read moves them on. A delete that did
// not take is sent again.
func (c *Controller) confirmExpectations(ctx context.Context) error {
	now := c.opts.Clock.Now()
	return c.confirmLive(ctx, func(st *replicaState) bool { return st.expectationOverdue(now, expectationTimeout) })
}

// confirmVanished asks the API server about every replica whose instance
// the informer saw deleted without trainstep removing it: an end decided
// now (the deadline) judges a loss no run saw as the cause of its peers'
// exits, as the next sync would. It writes nothing.
func (c *Controller) confirmVanished(ctx context.Context) error {
	return c.confirmLive(ctx, func(st *replicaState) bool { return st.stage == stageVanished })
}

// confirmLive reads the pod of every replica that asks for it live, and
// moves each on as the API server answers.
func (c *Controller) confirmLive(ctx context.Context, asks func(*replicaState) bool) error {
	now := c.opts.Clock.Now()
	c.mu.Lock()
	var overdue []*replicaState
	for _, id := range c.order {
		if st := c.replicas[id]; asks(st) {
			overdue = append(overdue, st)
		}
	}
	c.mu.Unlock()
	for _, st := range overdue {
		var live *corev1.Pod
		err := apierr.Retry(ctx, func() (err error) {
			live, err = c.opts.Core.Pods(c.opts.Identity.Namespace).Get(ctx, st.name, metav1.GetOptions{})
			return err
		})
		switch {
		case apierrors.IsNotFound(err):
			live = nil
		case err != nil:
			return fmt.Errorf("reading replica %s's pod: %w", st.id, err)
		}
		c.mu.Lock()
		before := st.stage
		if before == stageVanished || before == stageCreated {
			c.holdLiveRestarts(st, live)
		}
		deleteAgain := st.confirmed(live, now)
		after := st.stage
		if before == stageCreated && after == stageLost {
			c.undeliveredWorkerGone(st)
		}
		c.mu.Unlock()
		switch {
		case before == stageVanished && after == stageLost:
			c.opts.Logger.Info("replica removed from outside", zap.Stringer("replica", st.id), zap.String("pod", st.name))
		case before != stageVanished:
			c.opts.Logger.Info("the informer had not delivered a replica's change; a live read did",
				zap.Stringer("replica", st.id), zap.Stringer("from", before), zap.Stringer("to", after))
		}
		if deleteAgain != nil {
			if err := deletePod(ctx, c.opts.Core, deleteAgain); err != nil {
				return fmt.Errorf("deleting replica %s again: %w", st.id, err)
			}
		}
	}
	return nil
}

// nextExpectationCheck is when the oldest open expectation becomes
// overdue (0 when none is open).
func (c *Controller) nextExpectationCheck() time.Duration {
	now := c.opts.Clock.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	var next time.Duration
	for _, id := range c.order {
		st := c.replicas[id]
		if (st.stage == stageCreated || st.stage == stageRemoving) && !st.expectSince.IsZero() {
			next = sooner(next, max(st.expectSince.Add(expectationTimeout).Sub(now), time.Millisecond))
		}
	}
	return next
}

// createMissing creates, in parallel, every child not in the caches: the
// job-wide objects and Services, and the pods of replicas that have no
// instance (first creation, or a replacement whose predecessor is gone).
func (c *Controller) createMissing(ctx context.Context) error {
	var objs []runtime.Object
	for _, child := range c.jobWide {
		// A cached object of the name stands for the child only if it is
		// the job's: one planted under it after adopt looked (labelled,
		// another owner) meets the create's AlreadyExists and is named.
		if !c.wasCreated(child.obj) && c.ownedCachedUID(child) == "" {
			objs = append(objs, child.obj)
		}
	}
	pending := c.podsToCreate()
	if len(objs)+len(pending) == 0 {
		if err := c.ensureGuards(ctx); err != nil {
			return err
		}
		if !c.gang.holdsCreates() && c.restarting == nil {
			c.quotaNotNeeded()
		}
		return nil
	}
	podCount := len(pending)
	// The pods read the ConfigMaps and Secrets (TF_CONFIG's cluster, MPI's
	// hostfile and keys): a pod started before them would wait in
	// CreateContainerConfigError.
	// The guards go out with them, before any pod too (ensureGuards).
	sources, objs := splitSources(objs)
	errs := c.parallel(ctx, len(sources)+1, func(i int) error {
		if i == len(sources) {
			return c.ensureGuards(ctx)
		}
		return c.createJobWide(ctx, sources[i])
	})
	if err := errs[len(sources)]; err != nil {
		return err
	}
	// Refusals are counted only on a failure: a count of none would restart
	// the pods' own wait on the quota.
	if errs := errs[:len(sources)]; joinErrors(errs) != nil {
		c.quotaRefusals(errs)
		if err := joinErrors(errs); err != nil {
			return fmt.Errorf("creating the job's objects: %w", err)
		}
		return nil // every failure was the quota's: the rest waits for room
	}
	shared := len(objs)
	var hostErr error
	if host, rest, ok := c.rendezvousHostFirst(pending); ok {
		// Sent alone before the others, the host reaches the scheduler's
		// queue first, so it is the first worker placed when room is short.
		hostErr = c.createReplica(ctx, host)
		pending = rest
	}
	errs = c.parallel(ctx, shared+len(pending), func(i int) error {
		if i < shared {
			return c.createJobWide(ctx, objs[i])
		}
		return c.createReplica(ctx, pending[i-shared])
	})
	errs = append(errs, hostErr)
	// A full ResourceQuota is no failure: the objects it refused are created
	// on a later sync, once there is room.
	refused := c.quotaRefusals(errs)
	if err := joinErrors(errs); err != nil {
		return fmt.Errorf("creating the job's objects: %w", err)
	}
	if refused == 0 && !c.createdEvent {
		c.createdEvent = true
		c.opts.Timeline.Mark("last create")
		if c.opts.OnLaunched != nil {
			c.opts.OnLaunched()
		}
		c.event(corev1.EventTypeNormal, EventCreated, "created %d pods and %d services for job %s", podCount, len(c.opts.Desired.Services), c.opts.Identity.JobName)
	}
	return nil
}

// createJobWide creates one job-wide object or Service.
// One already there is used only when it is the job's (a create retried
// after a lost answer); any other ends the run Invalid, naming it.
func (c *Controller) createJobWide(ctx context.Context, obj runtime.Object) error {
	var uid types.UID
	err := apierr.Retry(ctx, func() (err error) {
		uid, err = createObject(ctx, c.opts.Core, c.opts.Dynamic, c.withRecords(obj, c.ledger))
		if err == nil {
			c.opts.Timeline.Created()
		}
		return err
	})
	if apierrors.IsAlreadyExists(err) {
		uid, err = c.checkExisting(ctx, obj)
	}
	if err != nil || uid == "" {
		return err
	}
	c.markCreated(obj, uid)
	return nil
}

// splitSources separates the ConfigMaps and Secrets, which pods read, from
// the other objects.
func splitSources(objs []runtime.Object) (sources, rest []runtime.Object) {
	for _, obj := range objs {
		switch obj.(type) {
		case *corev1.ConfigMap, *corev1.Secret:
			sources = append(sources, obj)
		default:
			rest = append(rest, obj)
		}
	}
	return sources, rest
}

// rendezvousHostFirst splits off the worker that hosts an elastic job's
// c10d rendezvous (Worker 0, unless elasticPolicy.rdzvHost names another
// host) when it is to be created with others: no worker can train until
// it runs.
func (c *Controller) rendezvousHostFirst(pending []podCreate) (host podCreate, rest []podCreate, ok bool) {
	ep := c.opts.Job.Spec.ElasticPolicy
	e, elastic := frameworks.Elastic(c.opts.Job)
	if len(pending) < 2 || !elastic || ep.RDZVHost != nil {
		return podCreate{}, pending, false
	}
	for i, p := range pending {
		if p.st.id.Type == e.Type && p.st.id.Index == 0 {
			rest = append(append(rest, pending[:i]...), pending[i+1:]...)
			return p, rest, true
		}
	}
	return podCreate{}, pending, false
}

// podCreate is one replica pod to create: which replica, at which attempt.
type podCreate struct {
	st      *replicaState
	attempt int
}

// podsToCreate lists the replicas that have no instance and may get one now.
func (c *Controller) podsToCreate() []podCreate {
	if c.gang.holdsCreates() || c.restarting != nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []podCreate
	for _, id := range c.order {
		if st := c.replicas[id]; st.wantsCreate() && !c.launcher.holds(st) && !c.aboveTarget(st) {
			out = append(out, podCreate{st: st, attempt: st.nextAttempt})
		}
	}
	c.announceLauncher()
	return out
}

// createReplica renders and creates one replica's pod, then commits its UID
// and attempt. The rendered pod lives only for the call. A pod already
// there under the name is adopted when this job controls it.
func (c *Controller) createReplica(ctx context.Context, p podCreate) error {
	id := p.st.id
	pod, err := c.opts.Renderer.Pod(id.Type, id.Index, p.attempt)
	if err != nil {
		return result.Invalid(result.ReasonInvalidSpec, fmt.Errorf("rendering pod %s: %w", p.st.name, err))
	}
	c.gangGate(pod)
	c.mu.Lock()
	restarts, jobRestarts := p.st.restartsSoFar(), c.jobRestarts
	c.mu.Unlock()
	if pod.Labels == nil {
		pod.Labels = map[string]string{}
	}
	pod.Labels[v1alpha1.LabelJobAttempt] = strconv.Itoa(c.jobAttempt)
	if _, ok := pod.Labels[gang.KueuePodGroupLabel]; ok {
		pod.Labels[gang.KueuePodGroupLabel] = c.kueueGroup() // each attempt a Kueue group of its own
	}
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	if restarts > 0 {
		pod.Annotations[v1alpha1.AnnotationRestarts] = strconv.Itoa(int(restarts))
	}
	if c.attemptReason != "" {
		pod.Annotations[v1alpha1.AnnotationRestartReason] = c.attemptReason
	}
	if jobRestarts > 0 {
		pod.Annotations[v1alpha1.AnnotationJobRestarts] = strconv.Itoa(int(jobRestarts))
	}
	obj, err := c.opts.Renderer.PodObject(pod)
	if err != nil {
		return result.Invalid(result.ReasonInvalidSpec, fmt.Errorf("rendering pod %s: %w", p.st.name, err))
	}
	var uid types.UID
	err = apierr.Retry(ctx, func() (err error) {
		uid, err = createObject(ctx, c.opts.Core, c.opts.Dynamic, obj)
		if err == nil {
			c.opts.Timeline.Created()
		}
		return err
	})
	attempt, carried := p.attempt, restarts
	if apierrors.IsAlreadyExists(err) {
		// Also a create retried after an answer that was lost: the first one landed.
		uid, attempt, err = c.adoptExisting(ctx, p.st.name)
		carried = 0 // not known: the ledger keeps what it holds for the replica
	}
	if err != nil || uid == "" {
		return err
	}
	c.createdAny.Store(true)
	// The cache is read under the lock the pod handlers take, so an add
	// delivered meanwhile is either seen here or handed to podSeen after.
	c.mu.Lock()
	defer c.mu.Unlock()
	cached, _ := c.pods.Pods(c.opts.Identity.Namespace).Get(p.st.name)
	if err := p.st.createAccepted(uid, attempt, c.opts.Clock.Now(), cached); err != nil {
		return err
	}
	p.st.jobAttempt, p.st.carried = c.jobAttempt, carried
	return nil
}

// adoptExisting reads the pod that made a create fail with AlreadyExists.
// It returns its UID and attempt when it is this job's to take; nothing
// (and no error: the next sync looks again) while it is being deleted; an
// error with a Warning event when someone else controls it.
func (c *Controller) adoptExisting(ctx context.Context, name string) (types.UID, int, error) {
	pod, err := c.opts.Core.Pods(c.opts.Identity.Namespace).Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return "", 0, nil // gone meanwhile: created on the next sync
	case err != nil:
		return "", 0, fmt.Errorf("reading pod %s that already exists: %w", name, err)
	case pod.DeletionTimestamp != nil:
		return "", 0, nil
	}
	if !c.ofThisJob(pod.Labels) {
		c.event(corev1.EventTypeWarning, EventNotOwned, "pod %s exists but is not this job's; not using it", name)
		return "", 0, notOwned("pod", name, pod)
	}
	if !c.controls(pod) {
		c.event(corev1.EventTypeWarning, EventNotOwned, "pod %s exists but is not controlled by this job's owner; not adopting it", name)
		return "", 0, fmt.Errorf("pod %s exists and is controlled by %s, not by this job", name, controllerName(pod))
	}
	c.opts.Logger.Info("adopted a replica pod that already existed", zap.String("pod", name), zap.String("uid", string(pod.UID)))
	return pod.UID, attemptOf(pod, 0), nil
}

// controls reports whether pod belongs to this run: labelled with the job
// and controlled by this run's owner (or by nothing when the run has none).
func (c *Controller) controls(pod *corev1.Pod) bool {
	if !c.ofThisJob(pod.Labels) {
		return false
	}
	if owner := c.opts.Identity.Owner; owner != nil {
		return metav1.IsControlledBy(pod, &metav1.ObjectMeta{UID: owner.UID})
	}
	return metav1.GetControllerOf(pod) == nil
}

func controllerName(pod *corev1.Pod) string {
	if ref := metav1.GetControllerOf(pod); ref != nil {
		return ref.Kind + " " + ref.Name
	}
	return "no controller"
}

// recreate starts the replacement of each replica the policy asked for: a
// failed pod is deleted (its replacement is created once the informer
// delivers the delete), a lost one is replaced at once. Each counts as one
// restart (when counted: a rule's Ignore is free) from the decision on,
// once: a ledger write or delete that failed leaves the replica as it was,
// and the next sync decides it again without counting it twice.
func (c *Controller) recreate(ctx context.Context, ids []policy.ReplicaID, counted bool) error {
	if len(ids) == 0 {
		return nil
	}
	plans, entries := c.planRecreations(ids, counted)
	if err := c.recordCounted(ctx, nil, entries); err != nil {
		c.recreationsNotSent(plans)
		return err
	}
	errs := c.parallel(ctx, len(plans), func(i int) error {
		d := plans[i].doomed
		if d == nil {
			return nil
		}
		return deletePodWith(ctx, c.opts.Core, d.Namespace, d.Name, d.UID, c.nodeLost(plans[i].st.id))
	})
	replaceNow := c.recreationsSent(plans, errs, counted)
	if err := joinErrors(errs); err != nil {
		return fmt.Errorf("deleting failed replicas: %w", err)
	}
	if replaceNow {
		// Lost replicas have no pod to wait for: create their replacements now.
		return c.createMissing(ctx)
	}
	return nil
}

func describeEnd(r policy.Replica) string {
	switch {
	case r.Lost:
		return "its pod was removed from outside (preemption or eviction)"
	case r.ExitCode != nil:
		return "exit code " + strconv.Itoa(int(*r.ExitCode))
	}
	return "it ended"
}

// reportProgress calls OnProgress when the counts changed; settling is
// how long a failure waits for a peer's earlier exit (0: none does).
func (c *Controller) reportProgress(settling time.Duration) {
	if c.opts.OnProgress == nil {
		return
	}
	p := ProgressOf(&c.view)
	p.Settling = settling
	c.mu.Lock()
	if c.scaler != nil {
		p.WorkerTarget = c.scaler.target
	}
	p.Waiting = c.launcher.waiting()
	if c.quota.refusal != "" {
		p.Waiting = "waiting for quota: " + c.quota.refusal
	}
	if r := c.restarting; r != nil {
		p.Waiting = fmt.Sprintf("restarting the job (attempt %d): %s", r.next+1, r.why)
	}
	c.mu.Unlock()
	if line := p.String(); line != c.lastProgress {
		c.lastProgress = line
		c.opts.OnProgress(p)
	}
}

// reportWorldSize records an event and a log line when the number of running
// workers of an elastic job changed: the world torchrun's next rendezvous
// forms. While the job gathers its first minReplicas workers nothing is
// reported but the start.
func (c *Controller) reportWorldSize() {
	e, ok := policy.ElasticOf(&c.view)
	if !ok || e.Running == c.worldSize || (e.Running < e.Min && c.worldSize < e.Min) {
		return
	}
	before := c.worldSize
	c.worldSize = e.Running
	c.event(corev1.EventTypeNormal, EventElasticResized, "elastic world size %d -> %d workers (elastic %d..%d), %d waiting for capacity",
		before, e.Running, e.Min, e.Max, e.WaitingForCapacity)
	c.opts.Logger.Info("elastic world size changed", zap.Int("from", before), zap.Int("to", e.Running),
		zap.Int("min", e.Min), zap.Int("max", e.Max), zap.Int("waitingForCapacity", e.WaitingForCapacity))
}

func (c *Controller) event(eventType, reason, format string, args ...any) {
	if c.opts.Recorder != nil && c.opts.EventObject != nil {
		c.opts.Recorder.Eventf(c.opts.EventObject, eventType, reason, format, args...)
	}
}
