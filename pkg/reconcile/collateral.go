package reconcile

import (
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/frameworks"
	"github.com/trainstep/trainstep/pkg/policy"
)

// An MPI launcher is retried in place (its own failure: mpirun not reaching
// workers still starting), but in a job that restarts as a whole its workers
// restart with the job. mpirun fails whenever a worker goes, so the
// launcher's in-place restarts that come after a worker of its job attempt
// ended are collateral: the worker's end is what the job's restart counts
// (or what the failure policy makes free), once.

// collateralLauncher is the replica whose in-place restarts may be
// collateral of its peers' ends: the launcher of an MPI job whose workers
// restart with the job; nil in any other job.
func (c *Controller) collateralLauncher() *replicaState {
	job := c.opts.Job
	driver, ok := frameworks.Driver(job)
	if !ok || frameworks.RestartsWithJob(job, driver) || !frameworks.RestartsWithJob(job, v1alpha1.ReplicaTypeWorker) {
		return nil
	}
	return c.replicas[policy.ReplicaID{Type: driver}]
}

// noteCollateral counts the in-place restarts pod shows beyond those last
// seen of the same instance as collateral while a worker has ended; a
// worker's end seen after the launcher's restart has it judged by time
// (collateralBefore). Called with the controller's mutex held, before st
// takes pod.
func (c *Controller) noteCollateral(st *replicaState, pod *corev1.Pod) {
	if pod.UID != st.uid || st.uid == "" {
		return
	}
	if st.id.Type == v1alpha1.ReplicaTypeWorker && podEnded(pod) && !podEnded(st.pod) {
		c.collateralBefore(c.endOf(st.id.Type, pod))
		return
	}
	if st != c.collateralLauncher() {
		return
	}
	var before int32
	unchanged := false
	if st.pod != nil && st.pod.UID == pod.UID {
		before = inPlaceRestarts(st.pod)
		unchanged = st.pod.ResourceVersion == pod.ResourceVersion
	}
	// Restarts a live read held are judged now, as the informer brings
	// them: with the workers' ends of their moment.
	before -= st.heldLive
	st.collateral -= st.heldLive
	st.heldLive = 0
	switch grew := inPlaceRestarts(pod) - before; {
	case grew > 0 && c.workerEnded():
		st.collateral += grew
		st.collateralAt, st.batch, st.batchRead = c.lastExitOf(st.id.Type, pod), 0, false
	case grew > 0:
		st.batch, st.batchBase, st.batchEnd, st.batchRead = grew, st.collateral, time.Time{}, false
		if c.workerUndelivered() {
			st.collateral += grew
			st.heldUnseen += grew
		}
	case unchanged:
		// Delivered again at the version last delivered: a later list
		// (a watch never repeats a version), so the delivery that
		// brought the restarts was no fold of that list's tombstones.
		st.noteBatchRead()
	}
}

// workerUndelivered reports whether a worker's instance was created but
// never delivered by the informer; called with the controller's mutex held.
func (c *Controller) workerUndelivered() bool {
	for _, id := range c.order {
		if id.Type == v1alpha1.ReplicaTypeWorker && c.replicas[id].stage == stageCreated {
			return true
		}
	}
	return false
}

// releaseHeldUnseen counts the launcher's restarts held while a worker was
// undelivered, once every worker is delivered: none went unseen before
// them. Called with the controller's mutex held, before the view is read.
func (c *Controller) releaseHeldUnseen() {
	st := c.collateralLauncher()
	if st == nil || st.heldUnseen == 0 || c.workerUndelivered() {
		return
	}
	st.collateral -= min(st.heldUnseen, st.collateral)
	st.heldUnseen, st.dirty = 0, true
}

// undeliveredWorkerGone judges the launcher's held restarts when worker
// st, never delivered, is found gone (a live read): it ended at a time
// nobody knows, so they are judged as after a worker's end unknown.
// Called with the controller's mutex held.
func (c *Controller) undeliveredWorkerGone(st *replicaState) {
	if launcher := c.collateralLauncher(); launcher != nil && launcher.heldUnseen > 0 && st.id.Type == v1alpha1.ReplicaTypeWorker {
		c.collateralBefore(time.Time{})
	}
}

// holdLiveRestarts holds as collateral the in-place restarts a live read
// of the launcher (confirmExpectations) shows beyond those the informer
// delivered. The pod cache is behind when the informer has not delivered
// the launcher: the workers' ends that came before those restarts may not
// be in it yet, so a restart that only followed a worker's end would count
// until the relist brought that end. The informer's delivery of them
// judges them (noteCollateral); a run that ends before it does not count
// them, as a run that was away does not count the restarts it never saw.
// Called with the controller's mutex held, before st takes live.
func (c *Controller) holdLiveRestarts(st *replicaState, live *corev1.Pod) {
	if live == nil || live.UID != st.uid || st.uid == "" || st != c.collateralLauncher() {
		return
	}
	var before int32
	if st.pod != nil && st.pod.UID == live.UID {
		before = inPlaceRestarts(st.pod)
	}
	if grew := inPlaceRestarts(live) - before; grew > 0 {
		st.collateral += grew
		st.heldLive += grew
	}
}

// workerVanished judges the launcher's last in-place restart, seen before,
// when worker st's instance is deleted without its end having been seen
// (cached shows none): by the end the deletion's final state shows, or,
// when it shows none (a relist's tombstone), as of the last time the
// worker was seen alive: it ended after that. Called with the
// controller's mutex held.
//
// A restart a sync has read stands against an end unknown: it came while
// the cache held every worker running, and that cache was as new as the
// restart (a watch delivers in order, a list is one moment), so the worker
// ended after it. Only a relist folds a worker's end it missed into the
// same delivery as the restart, and its tombstones follow its updates at
// once, before any sync and before the launcher is delivered again. So a
// restart the launcher's re-delivery unchanged followed stands too: no
// sync need have run (a step that lost its Lease still watches).
func (c *Controller) workerVanished(st *replicaState, cached, final *corev1.Pod) {
	if st.id.Type != v1alpha1.ReplicaTypeWorker || podEnded(cached) {
		return
	}
	if podEnded(final) {
		c.collateralBefore(c.endOf(st.id.Type, final))
		return
	}
	if launcher := c.collateralLauncher(); launcher != nil && launcher.batchRead {
		return
	}
	c.collateralBefore(st.aliveAt)
}

// collateralBefore judges, as the end of a worker is seen, the launcher's
// in-place restarts seen before it and counted: the kubelets report each
// pod on their own, so mpirun's failure may reach the API server before the
// end of the worker it followed. Several restarts seen at once (a relist
// folds what a broken watch did not deliver) are judged as a re-attach
// judges them, against the earliest of the workers' ends seen after them
// (however a relist orders them): when the run that failed last started at
// or after it, they all came after it; otherwise only the last one did.
func (c *Controller) collateralBefore(ended time.Time) {
	st := c.collateralLauncher()
	if st == nil || st.pod == nil || st.pod.UID != st.uid || st.batch == 0 {
		return
	}
	if !st.batchEnd.IsZero() && !ended.Before(st.batchEnd) {
		return // an earlier end already judged the batch
	}
	st.batchEnd = ended
	if ended.IsZero() {
		st.batchEnd = time.Unix(0, 1) // unknown: the earliest there is
	}
	exited, started := c.lastRunOf(st.id.Type, st.pod)
	var n int32
	if !exited.IsZero() && cameAfter(exited, ended) {
		n = 1
		if st.batch > 1 && (started.IsZero() || cameAfter(started, ended)) {
			n = st.batch
		}
	}
	st.collateral = st.batchBase + min(n, inPlaceRestarts(st.pod)-st.batchBase)
	st.collateralAt, st.dirty, st.heldUnseen = exited, true, 0
}

// collateralWhileAway judges, as a run re-attaches, the adopted launcher's
// in-place restarts: when its last one came at or after the end of a worker
// that ended while no step watched, or such a worker is gone and its end
// unknown, that one is collateral. The pod keeps no time of the earlier
// ones, only when the run that failed last started: when that came before
// every worker's end, they came before it too and count; otherwise none of
// them does (a launcher that crash-loops while a worker is gone restarts
// many times). Called with the controller's mutex held.
//
// Restarts an earlier run saw and counted are its judgement, kept: the
// ledger holds them for the instance (recordInPlaceRestarts); only those
// since are judged here.
func (c *Controller) collateralWhileAway() {
	launcher := c.collateralLauncher()
	if launcher == nil || launcher.stage != stageObserved || launcher.pod == nil {
		return
	}
	if n := c.collateralAway(launcher, c.ledger); n > 0 {
		launcher.collateral = n
	}
}

// collateralAway is how many of the in-place restarts of launcher's pod,
// taken over by a re-attach, are collateral (collateralWhileAway); those
// ledger holds were judged by an earlier run. Called with the controller's
// mutex held, once every pod was taken over.
func (c *Controller) collateralAway(launcher *replicaState, ledger restartLedger) int32 {
	judged := int32(0)
	if e, ok := ledger.Replicas[ledgerSlot(launcher.id)]; ok && e.replaces(launcher) {
		judged = max(0, e.Restarts-launcher.restartsSoFar())
	}
	unjudged := inPlaceRestarts(launcher.pod) - judged
	if unjudged <= 0 {
		return 0
	}
	exited, started := c.lastRunOf(launcher.id.Type, launcher.pod)
	if exited.IsZero() {
		return 0
	}
	first, ended := c.firstWorkerEnd()
	if !ended || !cameAfter(exited, first) {
		return 0
	}
	if !started.IsZero() && !cameAfter(started, first) {
		return 1
	}
	return unjudged
}

// workerEnded reports whether a worker's current instance ended, is lost
// or is being removed (a whole-job restart removes them all); called with
// the controller's mutex held.
func (c *Controller) workerEnded() bool {
	_, ended := c.firstWorkerEnd()
	return ended
}

// firstWorkerEnd is the earliest end of the workers whose current instance
// ended, zero when one of them went with its end unknown; ended is false
// when none did. Called with the controller's mutex held.
func (c *Controller) firstWorkerEnd() (first time.Time, ended bool) {
	unknown := false
	for _, id := range c.order {
		if id.Type != v1alpha1.ReplicaTypeWorker {
			continue
		}
		done, at := c.workerEndedAt(c.replicas[id])
		switch {
		case !done:
			continue
		case at.IsZero():
			unknown = true
		case !ended || at.Before(first):
			first = at
		}
		ended = true
	}
	if unknown {
		return time.Time{}, ended
	}
	return first, ended
}

// cameAfter reports whether an exit at exited came at or after a worker's
// end at ended, in whole seconds as pod times go; always when the end is
// unknown (zero).
func cameAfter(exited, ended time.Time) bool {
	return ended.IsZero() || !exited.Truncate(time.Second).Before(ended.Truncate(time.Second))
}

// lastExitOf is when the main container of pod last exited before its
// current run, zero when it has not.
func (c *Controller) lastExitOf(t v1alpha1.ReplicaType, pod *corev1.Pod) time.Time {
	exited, _ := c.lastRunOf(t, pod)
	return exited
}

// lastRunOf is when the main container of pod's run before its current one
// exited and when it had started; zero when there was none (or the kubelet
// gave no start).
func (c *Controller) lastRunOf(t v1alpha1.ReplicaType, pod *corev1.Pod) (exited, started time.Time) {
	if main := c.mainContainerStatus(t, pod); main != nil && main.LastTerminationState.Terminated != nil {
		last := main.LastTerminationState.Terminated
		return last.FinishedAt.Time, last.StartedAt.Time
	}
	return time.Time{}, time.Time{}
}

// podEnded reports whether pod failed, is being deleted or is marked for
// removal by a disruption.
func podEnded(pod *corev1.Pod) bool {
	if pod == nil {
		return false
	}
	return pod.Status.Phase == corev1.PodFailed || pod.DeletionTimestamp != nil || !disruptedAt(pod).IsZero()
}

func inPlaceRestarts(pod *corev1.Pod) int32 {
	var n int32
	for _, cs := range pod.Status.ContainerStatuses {
		n += cs.RestartCount
	}
	return n
}

// workerEndedAt reports whether worker st's current instance ended, is lost
// or is being removed, and when it ended (endOf); zero when unknown (gone
// without trace).
func (c *Controller) workerEndedAt(st *replicaState) (bool, time.Time) {
	switch st.stage {
	case stageVanished, stageLost, stageRemoving:
	case stageObserved:
		if !podEnded(st.pod) {
			return false, time.Time{}
		}
	default:
		return false, time.Time{}
	}
	if st.pod == nil {
		return true, time.Time{}
	}
	return true, c.endOf(st.id.Type, st.pod)
}

// endOf is when pod, which ended, ended: its main container's exit, else
// when it was marked for removal; zero when unknown.
func (c *Controller) endOf(t v1alpha1.ReplicaType, pod *corev1.Pod) time.Time {
	if main := c.mainContainerStatus(t, pod); main != nil && main.State.Terminated != nil {
		return main.State.Terminated.FinishedAt.Time
	}
	if at := disruptedAt(pod); !at.IsZero() {
		return at
	}
	if pod.DeletionTimestamp != nil {
		return pod.DeletionTimestamp.Time
	}
	return time.Time{}
}
