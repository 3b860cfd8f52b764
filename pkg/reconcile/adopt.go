package reconcile

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/trainstep/trainstep/pkg/apierr"
	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/frameworks"
	"github.com/trainstep/trainstep/pkg/policy"
)

// adopt re-attaches the children an earlier attempt of the same job left
// behind (the step was killed, or ended Transient and Argo retried it):
// replica pods and the other children become this run's. A replica that
// finished meanwhile is judged by the first sync as if this run had seen
// it end — succeeded counts as done, failed goes to the failure policy
// and backoffLimit, as it would for the run that created it. Pods being
// deleted or of an earlier job attempt (what an earlier run had decided)
// and surplus pods are replaced rather than adopted; in a job that
// restarts as a whole, a pod being deleted, or pods of an attempt before
// the one the ledger records and none of it, mean an earlier run was
// restarting the job, and the restart goes on (uncounted: its cause was
// that run's to count).
//
// adopt reads only the caches: what it found that only writes can finish
// (the owners, the deletes of what is replaced, the earlier Secrets and
// ConfigMaps) is left to the first syncs (finishReattach), whose API
// errors are retried within the API timeout like every other write's.
func (c *Controller) adopt() error {
	desired := map[string]policy.ReplicaID{}
	for _, id := range c.order {
		desired[c.replicas[id].name] = id
	}
	// The cache is listed under the lock the pod handlers take: an event
	// delivered meanwhile finds the replica already adopted.
	c.mu.Lock()
	pods, err := c.pods.Pods(c.opts.Identity.Namespace).List(labels.Everything())
	if err != nil {
		c.mu.Unlock()
		return fmt.Errorf("listing the job's pods: %w", err)
	}
	ledger := c.continueRecords(pods, desired)
	podsJobRestarts := c.jobRestarts
	plan := c.adoptPods(pods, desired, ledger)
	c.restarts += c.applyLedger(ledger)
	if !plan.restartUnderWay && plan.adopted > 0 {
		c.lostWhileAway(plan.found)
	}
	if plan.adopted > 0 {
		c.collateralWhileAway()
	}
	switch {
	case plan.restartUnderWay:
		c.restarting = &jobRestart{next: c.jobAttempt + 1, why: "an earlier run of the step was restarting the job", committed: true}
	case plan.restartRecorded:
		// The ledger holds the restart and its count (the pods do not yet):
		// it goes on to the attempt recorded, counted nothing more.
		c.restarting = &jobRestart{next: c.jobAttempt, why: "an earlier run of the step recorded a restart of the job",
			counted: c.jobRestarts > podsJobRestarts, committed: true, recorded: true}
	}
	if c.restarting != nil {
		c.opts.Logger.Info("re-attached while the job was restarting; the restart goes on", zap.Int("attempt", c.restarting.next+1))
	}
	c.mu.Unlock()
	if len(pods) > 0 || len(c.listServices()) > 0 {
		c.createdAny.Store(true) // from here on, nothing ends the run Invalid
	}
	plan.owned = append(plan.owned, c.adoptJobWide()...)
	c.reattach = &plan.reattachPlan
	return nil
}

// adoption is what adopt makes of the pods an earlier attempt left.
type adoption struct {
	reattachPlan
	found           map[policy.ReplicaID]bool
	restartUnderWay bool
	// restartRecorded: the ledger records a whole-job restart to the job
	// attempt whose pods an earlier run had yet to stop (killed between
	// the record and the deletes, or before they were gone): pods of an
	// earlier attempt are left, none of the recorded one. No new rank may
	// be made beside them.
	restartRecorded bool
}

// reattachPlan is what a re-attach leaves to the first syncs: writes.
type reattachPlan struct {
	// stale are pods to delete: of an earlier job attempt, being replaced,
	// or no part of the job as it is specified now.
	stale []*corev1.Pod
	// owned are the objects to point at this run's owner.
	owned []metav1.Object
	// adopted counts the replica pods taken over as they are.
	adopted int
	// secretsRead: the job's Secrets an earlier attempt left were read.
	secretsRead bool
}

// continueRecords goes on from the records an earlier run left: the
// job's whole-job attempt and counted restarts, from the pods' own record
// and from the ledger's, which a restart writes before it deletes
// anything; the elastic worker target; the job's start. It returns the
// ledger. Called with the controller's mutex held.
func (c *Controller) continueRecords(pods []*corev1.Pod, desired map[string]policy.ReplicaID) restartLedger {
	ledger := c.readLedger()
	if target, ok := c.recordedWorkerTarget(); ok && target != c.scaler.target {
		c.opts.Logger.Info("elastic worker target of an earlier run", zap.Int("target", target))
		c.scaler.target = target
		// The run's start is the window's one recommendation, at the target it goes on from.
		c.scaler.recent = policy.Recommendations{}
		c.scaler.recent.Record(c.opts.Clock.Now(), target)
	}
	if e, ok := ledger.job(); ok {
		c.jobAttempt = max(c.jobAttempt, e.Attempt)
	}
	for _, pod := range pods {
		if _, ok := desired[pod.Name]; ok {
			c.jobAttempt = max(c.jobAttempt, jobAttemptOf(pod))
			c.jobRestarts = max(c.jobRestarts, annotationCount(pod, v1alpha1.AnnotationJobRestarts))
		}
	}
	for _, pod := range pods {
		if _, ok := desired[pod.Name]; ok && jobAttemptOf(pod) == c.jobAttempt && pod.Annotations[v1alpha1.AnnotationRestartReason] != "" {
			c.attemptReason = pod.Annotations[v1alpha1.AnnotationRestartReason]
		}
	}
	c.restarts += c.jobRestarts
	c.startTime = c.jobStart(pods, desired)
	return ledger
}

// adoptPods takes over each replica pod as it is, or marks it to be
// replaced; called with the controller's mutex held.
func (c *Controller) adoptPods(pods []*corev1.Pod, desired map[string]policy.ReplicaID, ledger restartLedger) adoption {
	a := adoption{found: map[policy.ReplicaID]bool{}}
	var removedLauncher *replicaState
	behind := false // a rank of an attempt before the job's
	for _, pod := range pods {
		id, ok := desired[pod.Name]
		a.found[id] = ok
		switch {
		case !ok:
			a.stale = append(a.stale, pod) // not part of the job as it is now specified
		case pod.DeletionTimestamp != nil && !c.disruptedRank(id, pod) || jobAttemptOf(pod) < c.jobAttempt:
			// A pod of an earlier job attempt (a whole-job restart was cut
			// short) cannot join the current one's rendezvous.
			// Replaced, not adopted: removed, then created at the next attempt.
			st := c.replicas[id]
			st.adopted(pod, attemptOf(pod, 0), restartsOf(pod))
			// Its counted in-place restarts live in its status only: the
			// replacement carries them, or they go with the pod.
			switch {
			case c.supersededLauncher(st, pod, ledger):
			case st == c.collateralLauncher():
				removedLauncher = st // judged once every worker was taken over
			default:
				st.recreations += c.replicaFromPod(id, st, pod).Restarts
			}
			c.restarts += st.recreations
			st.stage, st.nextAttempt, st.expectSince = stageRemoving, st.attempt+1, c.opts.Clock.Now()
			behind = behind || frameworks.RestartsWithJob(c.opts.Job, id.Type) && jobAttemptOf(pod) < c.jobAttempt
			if pod.DeletionTimestamp == nil {
				a.stale = append(a.stale, pod)
			} else if frameworks.RestartsWithJob(c.opts.Job, id.Type) && jobAttemptOf(pod) == c.jobAttempt {
				a.restartUnderWay = true
			}
		default:
			c.replicas[id].adopted(pod, attemptOf(pod, 0), restartsOf(pod))
			c.restarts += c.replicas[id].recreations
			c.launcher.adopted(c.replicas[id])
			a.owned = append(a.owned, pod)
			a.adopted++
		}
	}
	a.restartRecorded = behind && a.adopted == 0 && !a.restartUnderWay
	if st := removedLauncher; st != nil {
		// An MPI launcher being deleted (evicted) or of an earlier attempt
		// that restarted in place after a worker ended while no run
		// watched: those restarts are collateral, as for one adopted.
		st.collateral = c.collateralAway(st, ledger)
		n := c.replicaFromPod(st.id, st, st.pod).Restarts
		st.recreations += n
		c.restarts += n
	}
	return a
}

// supersededLauncher reports whether st, adopted as pod, is an MPI
// launcher of a job attempt a recorded whole-job restart ended. That
// restart's ledger entry holds the launcher's in-place restarts its run
// counted (applyLedger); the pod's later ones are mpirun failing as the
// restart stopped its workers, or with the worker whose end caused it,
// seen too late: collateral, as a watching run judges them.
func (c *Controller) supersededLauncher(st *replicaState, pod *corev1.Pod, ledger restartLedger) bool {
	e, ok := ledger.job()
	return ok && st == c.collateralLauncher() && jobAttemptOf(pod) < e.Attempt
}

// adoptJobWide takes over the job-wide objects the caches hold: the
// teardown deletes exactly these (by UID) from now on, whether or not
// their owners were pointed at this run yet.
func (c *Controller) adoptJobWide() []metav1.Object {
	var owned []metav1.Object
	for _, s := range c.listServices() {
		owned = append(owned, s)
		c.markCreated(s, s.UID)
	}
	for _, cm := range c.listConfigMaps() {
		owned = append(owned, cm)
		c.markCreated(cm, cm.UID)
	}
	return owned
}

// finishReattach carries out the writes of a re-attach, ahead of any
// create: it reads the job's Secrets an earlier attempt left, deletes the
// pods being replaced, points every re-attached object at this run's
// owner and restores the ConfigMaps. It is repeated whole until it
// succeeds (each write is idempotent); its errors are the sync's.
func (c *Controller) finishReattach(ctx context.Context) error {
	p := c.reattach
	if p == nil {
		return nil
	}
	if !p.secretsRead {
		if err := c.findEarlierSecrets(ctx); err != nil {
			return err
		}
		for _, s := range c.earlierSecrets {
			p.owned = append(p.owned, s)
			c.markCreated(s, s.UID)
		}
		p.secretsRead = true
	}
	errs := c.parallel(ctx, len(p.stale), func(i int) error { return deletePod(ctx, c.opts.Core, p.stale[i]) })
	if err := joinErrors(errs); err != nil {
		return fmt.Errorf("deleting replicas of an earlier attempt: %w", err)
	}
	errs = c.parallel(ctx, len(p.owned), func(i int) error { return c.setOwner(ctx, p.owned[i]) })
	if err := joinErrors(errs); err != nil {
		return fmt.Errorf("re-attaching the job's objects: %w", err)
	}
	if err := c.restoreConfigMaps(ctx); err != nil {
		return err
	}
	c.reattach = nil
	if p.adopted > 0 || len(p.stale) > 0 {
		c.opts.Logger.Info("re-attached to an earlier attempt of the job",
			zap.Int("adoptedPods", p.adopted), zap.Int("replacedPods", len(p.stale)), zap.Int("objects", len(p.owned)))
		c.event(corev1.EventTypeNormal, EventAdopted, "re-attached %d running replicas of an earlier attempt; replacing %d", p.adopted, len(p.stale))
	}
	return nil
}

// disruptedRank reports whether pod, being deleted, is a rank of a job that
// restarts as a whole that a disruption is removing: it is adopted and lost
// to the disruption as if the run had watched, not taken for a whole-job
// restart of an earlier run's under way. (Its ranks restart no container
// in place, so no in-place restart goes with it.)
func (c *Controller) disruptedRank(id policy.ReplicaID, pod *corev1.Pod) bool {
	return frameworks.RestartsWithJob(c.opts.Job, id.Type) && !disruptedAt(pod).IsZero()
}

// jobStart is when an earlier run started the job: the earliest creation
// of its replicas' pods, Services and ConfigMaps still there, if before
// this run's start. activeDeadlineSeconds counts from there, so that a
// retried step does not start the job's deadline over. Each of them
// counts: a whole-job restart makes every pod again, and a Service removed
// from outside (the ledger's) is made again, later than the job started.
func (c *Controller) jobStart(pods []*corev1.Pod, desired map[string]policy.ReplicaID) time.Time {
	start := c.startTime
	earlier := func(t metav1.Time) {
		if !t.IsZero() && t.Time.Before(start) {
			start = t.Time
		}
	}
	for _, pod := range pods {
		if _, ok := desired[pod.Name]; ok {
			earlier(pod.CreationTimestamp)
		}
	}
	for _, svc := range c.listServices() {
		earlier(svc.CreationTimestamp)
	}
	for _, cm := range c.listConfigMaps() {
		earlier(cm.CreationTimestamp)
	}
	return start
}

// lostWhileAway marks, in a job that restarts as a whole, the replicas
// whose pods are gone while their peers' are there: whether one was lost
// while no step watched or never created, the peers cannot go on with a
// new rank alone, so the first sync restarts the job — for free, since no
// run saw why it went. Called with the controller's mutex held.
func (c *Controller) lostWhileAway(found map[policy.ReplicaID]bool) {
	for _, id := range c.order {
		st := c.replicas[id]
		if found[id] || st.stage != stageAbsent || !frameworks.RestartsWithJob(c.opts.Job, id.Type) {
			continue
		}
		st.stage, st.lostUnseen = stageLost, true
		c.opts.Logger.Info("a replica's pod was gone when this run re-attached; the job restarts as a whole", zap.Stringer("replica", id))
	}
}

// setOwner points obj's owner references at this run's owner (or at none,
// so the garbage collector does not remove adopted objects with the dead
// owner of an earlier attempt).
func (c *Controller) setOwner(ctx context.Context, obj metav1.Object) error {
	return c.setOwnerTo(ctx, obj, c.opts.Identity.Owner)
}

// setOwnerTo points obj's owner references at owner (none when nil).
func (c *Controller) setOwnerTo(ctx context.Context, obj metav1.Object, owner *metav1.OwnerReference) error {
	var want []metav1.OwnerReference
	if owner != nil {
		want = []metav1.OwnerReference{*owner}
	}
	if equality.Semantic.DeepEqual(obj.GetOwnerReferences(), want) || len(obj.GetOwnerReferences()) == 0 && len(want) == 0 {
		return nil
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"ownerReferences": want}})
	if err != nil {
		return err
	}
	core := c.opts.Core
	ns, name := obj.GetNamespace(), obj.GetName()
	err = apierr.Retry(ctx, func() (err error) {
		switch obj.(type) {
		case *corev1.Pod:
			_, err = core.Pods(ns).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
		case *corev1.Service:
			_, err = core.Services(ns).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
		case *corev1.ConfigMap:
			_, err = core.ConfigMaps(ns).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
		case *corev1.Secret:
			_, err = core.Secrets(ns).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
		}
		return err
	})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// restartsOf reads the restarts annotation of a replica pod: the replica's
// restarts before that instance, as the run that created it counted them.
func restartsOf(pod *corev1.Pod) int32 { return annotationCount(pod, v1alpha1.AnnotationRestarts) }

// annotationCount reads a non-negative count from one of pod's annotations.
func annotationCount(pod *corev1.Pod, key string) int32 {
	n, err := strconv.Atoi(pod.Annotations[key])
	if err != nil || n < 0 {
		return 0
	}
	return int32(n)
}

// jobAttemptOf reads a replica pod's job-attempt label.
func jobAttemptOf(pod *corev1.Pod) int {
	if n, err := strconv.Atoi(pod.Labels[v1alpha1.LabelJobAttempt]); err == nil && n >= 0 {
		return n
	}
	return 0
}

// attemptOf reads the attempt label of a replica pod.
func attemptOf(pod *corev1.Pod, fallback int) int {
	if n, err := strconv.Atoi(pod.Labels[v1alpha1.LabelAttempt]); err == nil && n >= 0 {
		return n
	}
	return fallback
}

func (c *Controller) listServices() []*corev1.Service {
	list, _ := c.services.Services(c.opts.Identity.Namespace).List(labels.Everything())
	return list
}

func (c *Controller) listConfigMaps() []*corev1.ConfigMap {
	if c.configMaps == nil {
		return nil
	}
	list, _ := c.configMaps.ConfigMaps(c.opts.Identity.Namespace).List(labels.Everything())
	return list
}
