package reconcile

import (
	"context"
	"fmt"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/frameworks"
	"github.com/trainstep/trainstep/pkg/gang"
	"github.com/trainstep/trainstep/pkg/policy"
)

// Why a whole-job attempt ended, as the next attempt's pods say it
// (v1alpha1.AnnotationRestartReason, TRAINSTEP_RESTART_REASON).
const (
	// RestartReasonDisruption: a preemption, an eviction, a drain, a lost
	// node: not the job's fault, and not counted against backoffLimit.
	RestartReasonDisruption = "disruption"
	// RestartReasonFailure: a rank failed; counted.
	RestartReasonFailure = "failure"
)

// jobRestart is a whole-job restart under way: every replica is stopped,
// then all are created again at the next job attempt. Touched only by the
// worker.
type jobRestart struct {
	// next is the job attempt the replicas are created at.
	next int
	why  string
	// counted says whether it costs a restart; committed once every delete
	// landed.
	counted, committed bool
	// recorded: the counted restart is in the ledger, ahead of its deletes.
	recorded bool
}

// startJobRestart records the policy's decision to restart the whole job.
func (c *Controller) startJobRestart(jr *policy.JobRestart) {
	c.restarting = &jobRestart{next: c.jobAttempt + 1, why: jr.Why, counted: jr.Counted}
	c.opts.Logger.Info("restarting the job", zap.Int("attempt", c.restarting.next+1), zap.String("cause", jr.Why), zap.Bool("counted", jr.Counted))
}

// continueJobRestart carries a whole-job restart on: it deletes, by UID,
// every instance not yet being deleted (a replica that exits meanwhile is
// collateral: it costs nothing), counts the restart once every delete
// landed, and once every instance is gone starts the next attempt (with a
// built-in gang, the whole group is admitted again). It reports whether
// the restart is still under way.
func (c *Controller) continueJobRestart(ctx context.Context) (bool, error) {
	r := c.restarting
	if !r.recorded {
		if err := c.recordJobRestart(ctx, r); err != nil {
			return true, err
		}
		r.recorded = true
	}
	var doomed []doomedInstance
	c.mu.Lock()
	for _, id := range c.order {
		st := c.replicas[id]
		switch st.stage {
		case stageLost:
			st.keepRestarts()
			st.stage, st.uid, st.lostUnseen = stageAbsent, "", false
		case stageCreated, stageObserved, stageVanished:
			st.deleteSent()
			doomed = append(doomed, doomedInstance{st: st, uid: st.uid, force: c.nodeLost(id)})
		case stageRemoving:
			// Deleted gracefully, then its node stopped answering (or it
			// had ended or never started and still waits for its
			// kubelet): the kubelet may never confirm, so the delete is
			// forced.
			if c.stranded(id.Type, st.pod) {
				doomed = append(doomed, doomedInstance{st: st, uid: st.uid, force: true})
			}
		}
	}
	c.mu.Unlock()
	if err := c.deleteAndRelease(ctx, doomed); err != nil {
		return true, fmt.Errorf("stopping the job's replicas for its restart: %w", err)
	}
	c.mu.Lock()
	gone := true
	for _, id := range c.order {
		gone = gone && c.replicas[id].stage == stageAbsent
	}
	c.mu.Unlock()
	if !r.committed {
		r.committed = true
		if r.counted {
			c.mu.Lock()
			c.restarts++
			c.jobRestarts++
			c.mu.Unlock()
		}
		c.event(corev1.EventTypeNormal, EventJobRestarted, "restarting the job (attempt %d): %s%s", r.next+1, r.why, countedNote(r.counted))
	}
	if !gone {
		return true, nil
	}
	c.jobAttempt, c.restarting = r.next, nil
	c.attemptReason = restartReason(r.counted)
	if c.opts.OnJobRestart != nil {
		c.opts.OnJobRestart(r.next, c.attemptReason)
	}
	if c.gang != nil {
		c.gang.state = gang.Start()
	}
	c.mu.Lock()
	c.launcher.newAttempt()
	c.mu.Unlock()
	c.opts.Logger.Info("every replica stopped; starting the job's next attempt", zap.Int("attempt", c.jobAttempt+1))
	return false, nil
}

// recordJobRestart writes a whole-job restart into the ledger before any
// of its deletes. Counted or not, the next attempt is recorded, also by a
// run that re-attached to a restart under way: a run that re-attaches
// before any of its pods exists must not start the old one again. So are
// the restarts each replica carries, its current instance's in-place ones
// included (an MPI launcher's own failures): until the next attempt's pods
// carry them, they would live only in this run.
func (c *Controller) recordJobRestart(ctx context.Context, r *jobRestart) error {
	entries := map[policy.ReplicaID]ledgerEntry{}
	c.mu.Lock()
	restarts := c.jobRestarts
	if r.counted && !r.committed {
		restarts++
	}
	for _, id := range c.order {
		st := c.replicas[id]
		if carried := st.restartsSoFar() + st.last.Restarts; carried > 0 {
			entries[id] = c.replicaEntry(st, carried)
		}
	}
	c.mu.Unlock()
	return c.recordCounted(ctx, &jobLedgerEntry{Attempt: r.next, Restarts: restarts}, entries)
}

// restartReason is why a whole-job attempt ended: a counted restart is a
// failure, a free one a disruption.
func restartReason(counted bool) string {
	if counted {
		return RestartReasonFailure
	}
	return RestartReasonDisruption
}

func countedNote(counted bool) string {
	if counted {
		return ""
	}
	return " (not counted against backoffLimit)"
}

// nodeLost reports whether replica id's node stopped answering past the
// node-lost timeout, in the view the last decision came from.
func (c *Controller) nodeLost(id policy.ReplicaID) bool {
	r := c.view.Replica(id)
	return r != nil && policy.NodeLost(r, c.view.Now, c.opts.Timeouts.NodeLost)
}

// terminatingGrace is how long the kubelet has to remove a finished pod,
// or one bound to it that never started, being deleted before the delete
// is forced: nothing of it runs.
const terminatingGrace = 10 * time.Second

// stranded reports whether p, a pod of replica type t being deleted, waits
// on a kubelet that will not finish it: its node stopped answering past the
// node-lost timeout while it ran, or nothing of it runs (idle) and its
// kubelet left it terminatingGrace, since a node that stopped answering
// never marks such a pod NotReady.
func (c *Controller) stranded(t v1alpha1.ReplicaType, p *corev1.Pod) bool {
	if p == nil || p.DeletionTimestamp == nil {
		return false
	}
	if idle(p) && c.opts.Clock.Since(p.DeletionTimestamp.Time) >= terminatingGrace {
		return true
	}
	since := c.nodeNotReadySince(t, p)
	return !since.IsZero() && c.opts.Timeouts.NodeLost > 0 && c.opts.Clock.Since(since) >= c.opts.Timeouts.NodeLost
}

// idle reports whether nothing of pod runs on its node: it ended, or it
// was bound but never started.
func idle(p *corev1.Pod) bool {
	switch p.Status.Phase {
	case corev1.PodSucceeded, corev1.PodFailed:
		return true
	case corev1.PodPending:
		return p.Spec.NodeName != ""
	}
	return false
}

// nextNodeLost is when the node of a replica being deleted counts as lost,
// or an idle one's delete is forced (0 when none is waited on).
func (c *Controller) nextNodeLost() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	var next time.Duration
	for _, id := range c.order {
		st := c.replicas[id]
		if st.stage != stageRemoving || st.pod == nil {
			continue
		}
		if since := c.nodeNotReadySince(id.Type, st.pod); !since.IsZero() && c.opts.Timeouts.NodeLost > 0 {
			next = sooner(next, max(c.opts.Timeouts.NodeLost-c.opts.Clock.Since(since), time.Millisecond))
		}
		if p := st.pod; p.DeletionTimestamp != nil && idle(p) {
			next = sooner(next, max(terminatingGrace-c.opts.Clock.Since(p.DeletionTimestamp.Time), time.Millisecond))
		}
	}
	return next
}

// confirmUndelivered reads live, before a job that restarts as a whole
// decides on a rank's failure, every rank whose create the informer has not
// delivered. Such a rank may have run and gone already: a broken watch's
// relist lists no pod the cache never held, so no tombstone says it went,
// and the failure, a peer's that followed it, would be taken for the
// cause. Gone, it is a loss no run saw, as a relist's tombstone is. So
// are they read while the MPI launcher's restarts are held for them
// (heldUnseen): mpirun's failure may have followed one of them.
func (c *Controller) confirmUndelivered(ctx context.Context) error {
	job := c.opts.Job
	if c.restarting != nil {
		return nil // no rank is judged while the job restarts
	}
	c.mu.Lock()
	launcher := c.collateralLauncher()
	failed := launcher != nil && launcher.heldUnseen > 0
	for _, id := range c.order {
		st := c.replicas[id]
		if st.stage == stageObserved && st.pod != nil && st.pod.Status.Phase == corev1.PodFailed && frameworks.RestartsWithJob(job, id.Type) {
			failed = true
			break
		}
	}
	c.mu.Unlock()
	if !failed {
		return nil
	}
	return c.confirmLive(ctx, func(st *replicaState) bool {
		return st.stage == stageCreated && frameworks.RestartsWithJob(job, st.id.Type)
	})
}
