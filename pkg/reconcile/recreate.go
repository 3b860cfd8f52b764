package reconcile

import (
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"

	"github.com/trainstep/trainstep/pkg/policy"
)

// recreation is one replica's replacement the policy decided.
type recreation struct {
	st *replicaState
	// doomed is the instance to delete (nil: it is lost, or already going).
	doomed *corev1.Pod
	cause  string
}

// planRecreations lists the replacements that may start now and the
// ledger entries they need written first. A counted restart counts from
// here on (restartDecided), and a free one still carries the instance's
// in-place restarts to its replacement, which a quota may keep from being
// created before this run ends.
func (c *Controller) planRecreations(ids []policy.ReplicaID, counted bool) ([]recreation, map[policy.ReplicaID]ledgerEntry) {
	var plans []recreation
	entries := map[policy.ReplicaID]ledgerEntry{}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, id := range ids {
		st := c.replicas[id]
		doomed, err := st.doomedForRecreate()
		if err != nil {
			// The view this decision came from is stale: decide again.
			c.opts.Logger.Debug("skipping a recreation", zap.Error(err))
			continue
		}
		cause := "it ended"
		if r := c.view.Replica(id); r != nil {
			cause = describeEnd(*r)
		}
		if doomed != nil {
			st.deleteSent()
		}
		plans = append(plans, recreation{st: st, doomed: doomed, cause: cause})
		if counted || st.last.Restarts > 0 {
			restarts := st.restartsSoFar() + st.last.Restarts
			if counted {
				st.restartDecided = st.uid
				restarts++
			}
			entries[id] = c.replicaEntry(st, restarts)
		}
	}
	return plans, entries
}

// recreationsNotSent takes back the deletes of recreations whose ledger
// entries could not be written: nothing was sent.
func (c *Controller) recreationsNotSent(plans []recreation) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range plans {
		p.st.deleteFailed()
	}
}

// recreationsSent commits the recreations whose deletes landed (errs[i]
// nil), counts them when counted, and says so. It reports whether one of
// them is replaced at once (its instance was already gone).
func (c *Controller) recreationsSent(plans []recreation, errs []error, counted bool) (replaceNow bool) {
	now := c.opts.Clock.Now()
	var started []recreation
	c.mu.Lock()
	for i, p := range plans {
		if errs[i] != nil {
			p.st.deleteFailed()
			continue
		}
		p.st.recreateStarted(now, counted)
		if counted {
			c.restarts++
		}
		replaceNow = replaceNow || p.st.stage == stageAbsent
		started = append(started, p)
	}
	c.mu.Unlock()
	for _, p := range started {
		c.event(corev1.EventTypeNormal, EventRestarted, "recreating replica %s (attempt %d): %s%s", p.st.id, p.st.nextAttempt, p.cause, countedNote(counted))
		c.opts.Logger.Info("recreating replica", zap.Stringer("replica", p.st.id), zap.Int("attempt", p.st.nextAttempt), zap.String("cause", p.cause))
	}
	return replaceNow
}
