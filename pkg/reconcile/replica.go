package reconcile

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/trainstep/trainstep/pkg/policy"
)

// stage is where trainstep stands with one replica. Transitions happen only
// on evidence: a create the API server accepted, an instance or a deletion
// the informer delivered, a live GET. A replica in a stage with an open
// expectation (created, removing, vanished) is never the subject of a
// decision: the policy sees it Pending or Missing-but-not-lost.
//
//	absent ──create ok──► created ──informer add──► observed ──recreate──► removing
//	  ▲                      │                         │                       │
//	  │                      └──informer delete──┐     └─informer delete──┐     │
//	  │                                          ▼                        ▼     │
//	  │                                       vanished ◄──────────────────┘     │
//	  │                                          │ live GET: NotFound           │
//	  │                                          ▼                              │
//	  └──────────replace (restart decided)──── lost                             │
//	  └────────────────────────────informer delete of that UID──────────────────┘
type stage int

const (
	// stageAbsent: no instance; one is created unless the gang holds creates.
	stageAbsent stage = iota
	// stageCreated: the API server accepted a create (UID known); the
	// informer has not delivered that instance yet.
	stageCreated
	// stageObserved: the informer delivered the instance; its phase is read
	// from the pod (pending, running, finished).
	stageObserved
	// stageRemoving: trainstep deleted the instance (a recreation or a gang
	// release); the replacement waits for the informer's delete of that UID.
	stageRemoving
	// stageVanished: the informer delivered a delete of the current UID that
	// trainstep did not ask for; a live GET must confirm it before anything
	// is decided.
	stageVanished
	// stageLost: confirmed gone without trainstep removing it. The policy
	// decides whether a replacement comes.
	stageLost
)

var stageNames = [...]string{"absent", "created", "observed", "removing", "vanished", "lost"}

func (s stage) String() string {
	if int(s) < len(stageNames) {
		return stageNames[s]
	}
	return fmt.Sprintf("stage(%d)", int(s))
}

// replicaState is what the controller knows about one replica. Every field
// is guarded by the controller's mutex.
type replicaState struct {
	id policy.ReplicaID
	// name is the replica's pod name, the same for every attempt.
	name  string
	stage stage
	// uid and attempt are those of the current instance, committed only once
	// the API server accepted its create (or it was adopted).
	uid     types.UID
	attempt int
	// jobAttempt is the current instance's job attempt, and carried the
	// restarts its restarts annotation carries (what the ledger no longer
	// needs to hold for it).
	jobAttempt int
	carried    int32
	// nextAttempt is the attempt label the next create uses.
	nextAttempt int
	// createdAt is when the current instance's create was accepted.
	createdAt time.Time
	// expectSince is when the open expectation (created, removing) began:
	// past expectationTimeout a live read closes it.
	expectSince time.Time
	// pod is the current instance as the informer last delivered it: a
	// shared cache object, never modified.
	pod *corev1.Pod
	// dirty is set when pod changed since last was computed.
	dirty bool
	// deleting is set while a delete of the current instance is in flight:
	// its informer delete, which may come before the call returns, is the
	// removal trainstep asked for, not a vanishing.
	deleting bool
	// unanswered is the instance whose delete without a restart (a gang
	// release, a whole-job restart, a scale-down) got no answer: it may
	// have landed before the answer was lost, so the instance going is
	// that delete's work, not a failure.
	unanswered types.UID
	// restartsBefore counts in-place restarts of instances already removed.
	restartsBefore int32
	// collateral counts the current instance's in-place restarts that do
	// not count: an MPI launcher's after a worker ended (collateral.go);
	// collateralAt is the exit of the last of them.
	collateral   int32
	collateralAt time.Time
	// aliveAt is when the current instance was last delivered not ended:
	// it ended after that, if it went without trace. goneAt is when its
	// deletion was delivered: it ended before that.
	aliveAt, goneAt time.Time
	// batch is how many in-place restarts the last delivery that showed
	// new ones brought, when they counted (0 once judged collateral);
	// batchBase the collateral restarts before it, batchEnd the earliest
	// worker's end it was judged against (collateralBefore); batchRead
	// says a sync has read it since (observe), or the informer delivered
	// the pod again unchanged (noteCollateral).
	batch, batchBase int32
	batchEnd         time.Time
	batchRead        bool
	// heldLive counts in-place restarts a live read showed before the
	// informer delivered them (holdLiveRestarts): held as collateral until
	// the informer brings them with the workers' ends of that moment.
	heldLive int32
	// heldUnseen counts in-place restarts the launcher showed while a
	// worker's create was not delivered yet: that worker may have run and
	// gone unseen (a relist lists no pod the cache never held), so they are
	// held as collateral until every worker is delivered (they count) or
	// that one is found gone without trace (judged against an end unknown).
	heldUnseen int32
	// recreations counts replacements of this replica (its share of the
	// job's restarts, with the in-place restarts).
	recreations int32
	waitingFor  string
	// waitingSince is when waitingFor was first seen.
	waitingSince time.Time
	// last is the replica as last observed, kept for outputs after cleanup.
	last policy.Replica
	// worldSize is, for an elastic worker, how many workers ran the last
	// time this one was seen running.
	worldSize int
	// lostUnseen: lost while no run of the step watched (adopt), or its
	// end went with a broken watch (a relist's tombstone).
	lostUnseen bool
	// endedFirst is the instance once seen ended (Failed or Succeeded)
	// with no deletion under way: its removal after that (the pod garbage
	// collector's, which marks no pod that already ended, or by hand) is
	// no loss, and the policy goes on judging the end it saw.
	endedFirst types.UID
	// restartDecided is the failed instance whose counted restart was
	// decided but is not carried out yet (its ledger entry or delete did
	// not land): it counts from the decision on, once, so that what the
	// job counts does not depend on when the API server answered.
	restartDecided types.UID
}

func newReplicaState(id policy.ReplicaID, name string) *replicaState {
	return &replicaState{id: id, name: name, last: policy.Replica{ReplicaID: id, Phase: policy.PhaseMissing}}
}

// expecting reports an open expectation: no decision may be taken on the
// replica until the informer or a live read closes it.
func (st *replicaState) expecting() bool {
	switch st.stage {
	case stageCreated, stageRemoving, stageVanished:
		return true
	}
	return false
}

// wantsCreate reports whether the replica needs an instance created.
func (st *replicaState) wantsCreate() bool { return st.stage == stageAbsent }

// createAccepted commits a create: the instance's UID and attempt become
// the replica's. A pod the informer already holds with that UID is taken as
// observed at once, so an add delivered before the create returned is not
// waited for.
func (st *replicaState) createAccepted(uid types.UID, attempt int, now time.Time, cached *corev1.Pod) error {
	if st.stage != stageAbsent {
		return fmt.Errorf("replica %s: create accepted while %s", st.id, st.stage)
	}
	st.stage, st.uid, st.attempt, st.nextAttempt, st.createdAt, st.expectSince = stageCreated, uid, attempt, attempt, now, now
	st.jobAttempt, st.carried = 0, 0
	st.pod, st.collateral, st.collateralAt, st.batch, st.batchBase, st.batchEnd = nil, 0, time.Time{}, 0, 0, time.Time{}
	st.batchRead, st.heldLive, st.heldUnseen, st.goneAt = false, 0, 0, time.Time{}
	if cached != nil && cached.UID == uid {
		st.podSeen(cached, now)
	}
	return nil
}

// adopted takes over a live instance left by an earlier run of the job.
// restartsBefore is the replica's restarts before this instance, read
// from the pod (its restarts annotation): they count as recreations.
func (st *replicaState) adopted(pod *corev1.Pod, attempt int, restartsBefore int32) {
	st.stage, st.uid, st.attempt, st.nextAttempt = stageObserved, pod.UID, attempt, attempt
	st.jobAttempt, st.carried = jobAttemptOf(pod), restartsBefore
	st.pod, st.dirty, st.createdAt = pod, true, pod.CreationTimestamp.Time
	st.recreations, st.restartsBefore, st.collateral, st.collateralAt = restartsBefore, 0, 0, time.Time{}
	st.batch, st.batchBase, st.batchEnd, st.batchRead, st.heldLive, st.goneAt = 0, 0, time.Time{}, false, 0, time.Time{}
	st.heldUnseen = 0
}

// noteBatchRead records that the last batch of in-place restarts was
// looked at again after the delivery that brought it (a sync read it, or
// the pod came again unchanged): that delivery was no relist's with
// tombstones still to come. Restarts held while a worker is undelivered
// are judged as that worker is found, not so.
func (st *replicaState) noteBatchRead() {
	st.batchRead = st.batch > 0 && st.heldUnseen == 0
}

// podSeen records an instance the informer delivered. Only the current
// instance counts: an older one (still terminating, or delivered late) or
// one this run did not create is ignored. An instance going after a delete
// whose answer was lost is released: that delete landed.
func (st *replicaState) podSeen(pod *corev1.Pod, now time.Time) bool {
	if pod.UID != st.uid || st.uid == "" {
		return false
	}
	if !podEnded(pod) {
		st.aliveAt = now
	}
	st.noteEndedFirst(pod)
	switch st.stage {
	case stageCreated, stageObserved, stageVanished:
		if pod.DeletionTimestamp != nil && st.unanswered == pod.UID && !st.deleting {
			st.pod, st.dirty = pod, true
			st.release(now)
			return true
		}
		// A vanished instance seen again means the delete was a stale view.
		st.stage, st.pod, st.dirty, st.lostUnseen = stageObserved, pod, true, false
		return true
	case stageRemoving:
		st.pod, st.dirty = pod, true
		return true
	}
	return false
}

// noteEndedFirst records that pod, the current instance, ended before
// anything deleted it: a delete, from outside too, marks the pod
// (deletionTimestamp) before its containers are stopped, or removes it
// at once, so an end seen unmarked came first.
func (st *replicaState) noteEndedFirst(pod *corev1.Pod) {
	finished := pod.Status.Phase == corev1.PodFailed || pod.Status.Phase == corev1.PodSucceeded
	if finished && pod.DeletionTimestamp == nil {
		st.endedFirst = pod.UID
	}
}

// removedAfterEnd reports whether the current instance, lost, had ended
// before it went (see endedFirst).
func (st *replicaState) removedAfterEnd() bool {
	return st.stage == stageLost && st.uid != "" && st.endedFirst == st.uid
}

// podDeleted records a deletion the informer delivered. The deletion of
// the instance trainstep removed ends the removal; that of the current
// instance otherwise makes it vanished, pending a live check.
func (st *replicaState) podDeleted(uid types.UID) bool {
	if uid != st.uid || uid == "" {
		return false
	}
	switch st.stage {
	case stageRemoving:
		st.stage, st.uid, st.pod = stageAbsent, "", nil
		return true
	case stageCreated, stageObserved:
		if st.deleting || st.unanswered == uid {
			st.stage, st.uid, st.pod = stageAbsent, "", nil
			return true
		}
		st.stage = stageVanished
		return true
	}
	return false
}

// deleteSent marks a delete of the current instance in flight; deleteFailed
// takes the mark back when the API server refused it.
func (st *replicaState) deleteSent()   { st.deleting = true }
func (st *replicaState) deleteFailed() { st.deleting = false }

// releaseUnanswered takes the mark back from a release's delete of uid
// that failed with an error the write may have landed before (a lost
// answer, a timeout): the instance is released once it shows it is going
// (now, if the informer delivered that already), and deleted again
// otherwise.
func (st *replicaState) releaseUnanswered(uid types.UID, now time.Time) {
	st.deleting = false
	if st.uid != uid {
		return
	}
	st.unanswered = uid
	if (st.stage == stageCreated || st.stage == stageObserved) && st.pod != nil && st.pod.UID == uid && st.pod.DeletionTimestamp != nil {
		st.release(now)
	}
}

// confirmed closes an overdue expectation with a live read: live is the
// instance the API server returned under the replica's name (nil when
// none). It returns the instance to delete again when a delete this run
// sent did not take.
func (st *replicaState) confirmed(live *corev1.Pod, now time.Time) (deleteAgain *corev1.Pod) {
	same := live != nil && live.UID == st.uid
	switch st.stage {
	case stageVanished, stageCreated:
		if same {
			// The informer will deliver it (again); until then, the live copy.
			st.stage, st.pod, st.dirty, st.lostUnseen = stageObserved, live, true, false
			st.noteEndedFirst(live)
			return nil
		}
		// An instance the informer never delivered (a broken watch) went
		// with nobody seeing why: a loss no run watched, free, as a
		// relist's tombstone that shows no end is.
		st.lostUnseen = st.lostUnseen || st.stage == stageCreated
		st.stage, st.pod = stageLost, nil
	case stageRemoving:
		switch {
		case !same:
			st.stage, st.uid, st.pod = stageAbsent, "", nil
		case live.DeletionTimestamp == nil:
			st.expectSince = now
			return live
		default:
			st.expectSince = now // still terminating: look again later
		}
	}
	return nil
}

// doomedForRecreate returns the instance a recreation must delete (nil
// when there is none to delete: it is lost, or already being deleted) and
// whether a recreation may start at all. It changes nothing: the replica
// moves on only once the delete landed (recreateStarted).
func (st *replicaState) doomedForRecreate() (*corev1.Pod, error) {
	switch st.stage {
	case stageLost:
		return nil, nil
	case stageObserved:
		if st.pod != nil && st.pod.DeletionTimestamp == nil {
			return st.pod, nil
		}
		return nil, nil
	}
	return nil, fmt.Errorf("replica %s: recreate decided while %s", st.id, st.stage)
}

// recreateStarted commits a recreation whose delete the API server
// accepted (or that needed none): the replica waits for that instance to
// go, or is replaced at once when it was lost. It counts one restart
// unless the failure policy made it free.
func (st *replicaState) recreateStarted(now time.Time, counted bool) {
	st.deleting = false
	switch st.stage {
	case stageLost:
		st.stage, st.uid, st.lostUnseen = stageAbsent, "", false
	case stageAbsent:
		// The informer delivered the delete before the call returned.
	default:
		st.stage, st.expectSince = stageRemoving, now
	}
	st.nextAttempt = st.attempt + 1
	if counted {
		st.recreations++
	}
	st.restartDecided = ""
	st.keepRestarts()
}

// release gives back an instance for a gang retry once its delete landed
// (or it needed none): recreated at the same attempt, no restart counted.
func (st *replicaState) release(now time.Time) {
	st.deleting = false
	st.keepRestarts()
	switch st.stage {
	case stageCreated, stageObserved:
		st.stage, st.expectSince = stageRemoving, now
	case stageLost, stageVanished:
		// Its delete was delivered already, and the one sent now landed.
		st.stage, st.uid, st.pod = stageAbsent, "", nil
	}
	st.nextAttempt = st.attempt
}

// keepRestarts folds the in-place restarts of the instance going into
// restartsBefore, where they stay counted once it is gone (a whole-job
// restart does not undo a launcher's own failures), whatever its stage: the
// informer may have delivered its delete already. Taken out of st.last, they
// are folded once, and a next instance not seen yet brings none of them.
func (st *replicaState) keepRestarts() {
	st.restartsBefore += st.last.Restarts
	st.last.Restarts = 0
}

// restartsSoFar is this replica's share of the job's restarts before its
// current instance: recorded on each new pod, so that a later run of the
// step that re-attaches continues the count.
func (st *replicaState) restartsSoFar() int32 { return st.recreations + st.restartsBefore }

// expectationOverdue reports an open expectation older than timeout: the
// informer has not closed it, so a live read must.
func (st *replicaState) expectationOverdue(now time.Time, timeout time.Duration) bool {
	switch st.stage {
	case stageCreated, stageRemoving:
		return !st.expectSince.IsZero() && now.Sub(st.expectSince) >= timeout
	case stageVanished:
		return true
	}
	return false
}
