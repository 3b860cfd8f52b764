package reconcile

import (
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/frameworks"
	"github.com/trainstep/trainstep/pkg/gang"
	"github.com/trainstep/trainstep/pkg/policy"
)

// observe builds the policy's view of the job from the replicas' states,
// recomputing only the replicas whose pod changed since the last view.
// Replicas with an open expectation show as Pending (created, not yet
// delivered) or Missing (being removed, or gone pending a live check), so no
// decision is taken on them.
func (c *Controller) observe() policy.View {
	now := c.opts.Clock.Now()
	// The replicas' slice is reused from sync to sync: a view lives until
	// the next one, and View hands out copies.
	v := policy.View{Job: c.opts.Job, StartTime: c.startTime, Now: now, Replicas: c.viewReplicas[:0]}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.releaseHeldUnseen()
	v.Restarts = c.restarts
	if c.scaler != nil {
		v.WorkerTarget = c.scaler.target
	}
	for _, id := range c.order {
		st := c.replicas[id]
		r := policy.Replica{ReplicaID: id, Attempt: st.attempt, Phase: policy.PhaseMissing}
		switch st.stage {
		case stageCreated:
			r.Phase, r.PendingSince = policy.PhasePending, st.createdAt
		case stageObserved:
			if st.dirty {
				st.last, st.dirty = c.replicaFromPod(id, st, st.pod), false
			}
			st.noteBatchRead()
			r = st.last
			v.Restarts += r.Restarts
		case stageVanished:
			// Not yet confirmed gone: keep what was last seen.
			r = st.last
			v.Restarts += r.Restarts
		case stageLost:
			if st.removedAfterEnd() && (st.last.Phase == policy.PhaseFailed || st.last.Phase == policy.PhaseSucceeded) {
				// Removed after it ended (the pod garbage collector
				// deletes ended pods): the policy judges the end it saw,
				// as before the pod went. A worker an elastic job carried
				// on without is not brought back, nor counted, for it.
				r = st.last
				v.Restarts += r.Restarts
				break
			}
			// What was last seen tells why and when: a DisruptionTarget condition
			// set before the pod was removed. Its in-place restarts still
			// count until the recreation folds them into restartsBefore.
			r.Lost, r.Conditions, r.LostUnseen, r.FinishedAt = true, st.last.Conditions, st.lostUnseen, st.last.FinishedAt
			r.GoneBy = st.goneAt
			v.Restarts += st.last.Restarts
		}
		v.Restarts += st.restartsBefore
		r.EarlierRestarts = st.recreations + st.restartsBefore
		if st.restartDecided != "" && st.restartDecided == st.uid {
			r.RestartCounted = true
			v.Restarts++
		}
		v.Replicas = append(v.Replicas, r)
	}
	c.viewReplicas = v.Replicas
	c.observeElastic(&v)
	return v
}

// observeElastic keeps an elastic job's clock of running short of
// minReplicas, and gives each running worker the world size it runs in;
// called with the controller's mutex held.
func (c *Controller) observeElastic(v *policy.View) {
	e, ok := policy.ElasticOf(v)
	if !ok {
		return
	}
	c.elasticShortSince = policy.ElasticShortSince(c.elasticShortSince, v)
	v.ElasticShortSince = c.elasticShortSince
	for i := range v.Replicas {
		r := &v.Replicas[i]
		if r.Type != v1alpha1.ReplicaTypeWorker {
			continue
		}
		st := c.replicas[r.ReplicaID]
		if r.Phase == policy.PhaseRunning {
			st.worldSize = e.Running
		}
		r.WorldSize = st.worldSize
	}
}

// replicaFromPod reads one replica's state from its pod.
func (c *Controller) replicaFromPod(id policy.ReplicaID, st *replicaState, pod *corev1.Pod) policy.Replica {
	r := policy.Replica{ReplicaID: id, Attempt: attemptOf(pod, st.attempt), Node: pod.Spec.NodeName, DisruptedAt: disruptedAt(pod)}
	main := c.mainContainerStatus(id.Type, pod)
	r.Restarts = inPlaceRestarts(pod)
	if pod.UID == st.uid {
		r.Restarts -= min(st.collateral, r.Restarts)
	}
	switch pod.Status.Phase {
	case corev1.PodRunning:
		r.Phase = policy.PhaseRunning
	case corev1.PodSucceeded:
		r.Phase = policy.PhaseSucceeded
	case corev1.PodFailed:
		r.Phase = policy.PhaseFailed
		// Evicted or preempted: no container exit to blame. It ended when
		// it was marked for removal, so that an earlier peer's failure
		// stays the first end.
		if main == nil || main.State.Terminated == nil {
			r.Phase, r.Lost, r.FinishedAt = policy.PhaseMissing, true, r.DisruptedAt
		}
	default:
		r.Phase = policy.PhasePending
		r.PendingSince = pod.CreationTimestamp.Time
		r.Unschedulable = unschedulable(pod)
	}
	if gang.KueueStopped(pod) || gang.KueueGated(pod) {
		// Kueue's eviction is its preemption: a disruption, as Kubernetes'
		// own preemption says with DisruptionTarget; so is its stop of a
		// group whose Workload went. A pod Kueue still
		// gates never ran: if it goes (Kueue removes what it takes for
		// excess pods of a group), that is no failure of the job either.
		r.Conditions = append(r.Conditions, string(v1alpha1.PodConditionDisruptionTarget))
	}
	for _, cond := range pod.Status.Conditions {
		if cond.Status == corev1.ConditionTrue {
			r.Conditions = append(r.Conditions, string(cond.Type))
		}
	}
	if r.Phase == policy.PhaseRunning {
		r.NodeNotReadySince = nodeNotReadySince(pod, main)
		c.disruptedByDrain(&r)
	}
	if main != nil {
		if t := main.State.Terminated; t != nil {
			code := t.ExitCode
			r.ExitCode = &code
			r.TerminationMessage = t.Message
			r.FinishedAt = t.FinishedAt.Time
		} else if t := main.LastTerminationState.Terminated; t != nil {
			code := t.ExitCode
			r.ExitCode = &code
		}
		if w := main.State.Waiting; w != nil {
			r.WaitingReason = w.Reason
		}
	}
	if r.WaitingReason != st.waitingFor {
		st.waitingFor, st.waitingSince = r.WaitingReason, c.opts.Clock.Now()
	}
	if r.WaitingReason != "" {
		r.WaitingSince = st.waitingSince
	}
	return r
}

// mainContainerStatus finds the status of the replica's main container.
func (c *Controller) mainContainerStatus(t v1alpha1.ReplicaType, pod *corev1.Pod) *corev1.ContainerStatus {
	name := ""
	if main := frameworks.MainContainer(c.opts.Job, t); main != nil {
		name = main.Name
	}
	for i := range pod.Status.ContainerStatuses {
		if pod.Status.ContainerStatuses[i].Name == name {
			return &pod.Status.ContainerStatuses[i]
		}
	}
	if len(pod.Status.ContainerStatuses) > 0 {
		return &pod.Status.ContainerStatuses[0]
	}
	return nil
}

func unschedulable(pod *corev1.Pod) bool {
	for _, cond := range pod.Status.Conditions {
		if cond.Type == corev1.PodScheduled && cond.Status == corev1.ConditionFalse && cond.Reason == corev1.PodReasonUnschedulable {
			return true
		}
	}
	return false
}

// hasReadinessProbe reports whether the named container has one (the cache
// keeps only its presence).
func hasReadinessProbe(pod *corev1.Pod, container string) bool {
	for _, c := range pod.Spec.Containers {
		if c.Name == container {
			return c.ReadinessProbe != nil
		}
	}
	return false
}

// nodeNotReadySince is when a running pod's node stopped answering (zero
// while it answers): only the node lifecycle controller makes a pod whose
// main container runs, and which has no readiness probe, NotReady.
func nodeNotReadySince(pod *corev1.Pod, main *corev1.ContainerStatus) time.Time {
	if pod.Status.Phase != corev1.PodRunning || main == nil || main.State.Running == nil || hasReadinessProbe(pod, main.Name) {
		return time.Time{}
	}
	for _, cond := range pod.Status.Conditions {
		if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionFalse {
			return cond.LastTransitionTime.Time
		}
	}
	return time.Time{}
}

// nodeNotReadySince is nodeNotReadySince for a replica of type t.
func (c *Controller) nodeNotReadySince(t v1alpha1.ReplicaType, pod *corev1.Pod) time.Time {
	return nodeNotReadySince(pod, c.mainContainerStatus(t, pod))
}

// disruptedAt is when pod was marked for removal by a disruption (its
// DisruptionTarget condition, or Kueue's stop of an evicted pod group,
// which Kueue removes as a whole), zero when it was not.
func disruptedAt(pod *corev1.Pod) time.Time {
	for _, cond := range pod.Status.Conditions {
		if cond.Status != corev1.ConditionTrue {
			continue
		}
		if cond.Type == v1alpha1.PodConditionDisruptionTarget || cond.Type == gang.KueueStoppedCondition && gang.KueueStopped(pod) {
			return cond.LastTransitionTime.Time
		}
	}
	return time.Time{}
}
