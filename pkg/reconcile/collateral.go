package reconcile

import (
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
)

// An MPI launcher is retried in place (its own failure: mpirun not reaching
// workers still starting), but in a job that restarts as a whole its workers
// restart with the job. mpirun fails whenever a worker goes, so the
// launcher's in-place restarts that come after a worker of its job attempt
// ended are collateral: the worker's end is what the job's restart counts
// (or what the failure policy makes free), once.

// collateralRestarts reports whether st's in-place restarts may be
// collateral of its peers' ends: the launcher of an MPI job whose workers
// restart with the job.
func (c *Controller) collateralRestarts(st *replicaState) bool {
	job := c.opts.Job
	return st.id.Type == v1alpha1.ReplicaTypeLauncher && job.Spec.Framework == v1alpha1.FrameworkMPI &&
		!v1alpha1.RestartsWithJob(job, v1alpha1.ReplicaTypeLauncher) && v1alpha1.RestartsWithJob(job, v1alpha1.ReplicaTypeWorker)
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
		c.collateralBefore(st, pod)
		return
	}
	if !c.collateralRestarts(st) {
		return
	}
	var before int32
	if st.pod != nil && st.pod.UID == pod.UID {
		before = inPlaceRestarts(st.pod)
	}
	if grew := inPlaceRestarts(pod) - before; grew > 0 && c.workerEnded() {
		st.collateral += grew
		st.collateralAt = c.lastExitOf(st.id.Type, pod)
	}
}

// collateralBefore judges, as a worker's end is seen, the launcher's last
// in-place restart, seen before it: the kubelets report each pod on their
// own, so mpirun's failure may reach the API server before the end of the
// worker it followed. It is collateral when it came at or after the
// worker's end (whole seconds, as pod times go).
func (c *Controller) collateralBefore(worker *replicaState, pod *corev1.Pod) {
	probe := *worker
	probe.pod, probe.stage = pod, stageObserved
	_, ended := c.workerEndedAt(&probe)
	for _, st := range c.replicas {
		if !c.collateralRestarts(st) || st.pod == nil || st.pod.UID != st.uid {
			continue
		}
		exited := c.lastExitOf(st.id.Type, st.pod)
		if exited.IsZero() || exited.Equal(st.collateralAt) || st.collateral >= inPlaceRestarts(st.pod) {
			continue
		}
		if ended.IsZero() || !exited.Truncate(time.Second).Before(ended.Truncate(time.Second)) {
			st.collateral++
			st.collateralAt, st.dirty = exited, true
		}
	}
}

// lastExitOf is when the main container of pod last exited before its
// current run, zero when it has not.
func (c *Controller) lastExitOf(t v1alpha1.ReplicaType, pod *corev1.Pod) time.Time {
	if main := c.mainContainerStatus(t, pod); main != nil && main.LastTerminationState.Terminated != nil {
		return main.LastTerminationState.Terminated.FinishedAt.Time
	}
	return time.Time{}
}

// workerEnded reports whether a worker's current instance ended, is lost
// or is being removed (a whole-job restart removes them all); called with
// the controller's mutex held.
func (c *Controller) workerEnded() bool {
	for _, id := range c.order {
		if id.Type == v1alpha1.ReplicaTypeWorker {
			if ended, _ := c.workerEndedAt(c.replicas[id]); ended {
				return true
			}
		}
	}
	return false
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

// collateralWhileAway judges, as a run re-attaches, the adopted launcher's
// in-place restarts: when its last one came at or after the end of a worker
// that ended while no step watched (whole seconds, as pod times go), or such
// a worker is gone and its end unknown, none of them count. The pod keeps
// no time of the earlier ones, and a launcher that crash-loops while a
// worker is gone restarts many times; a failure of its own before the
// worker's end goes uncounted with them. Called with the controller's
// mutex held.
func (c *Controller) collateralWhileAway() {
	var launcher *replicaState
	for _, st := range c.replicas {
		if c.collateralRestarts(st) && st.stage == stageObserved && st.pod != nil {
			launcher = st
		}
	}
	if launcher == nil || inPlaceRestarts(launcher.pod) == 0 || !c.workerEnded() {
		return
	}
	main := c.mainContainerStatus(launcher.id.Type, launcher.pod)
	if main == nil || main.LastTerminationState.Terminated == nil {
		return
	}
	exited := main.LastTerminationState.Terminated.FinishedAt.Time.Truncate(time.Second)
	for _, id := range c.order {
		st := c.replicas[id]
		if id.Type != v1alpha1.ReplicaTypeWorker {
			continue
		}
		ended, at := c.workerEndedAt(st)
		if ended && (at.IsZero() || !exited.Before(at.Truncate(time.Second))) {
			launcher.collateral = inPlaceRestarts(launcher.pod)
			return
		}
	}
}

// workerEndedAt reports whether worker st's current instance ended, is lost
// or is being removed, and when it ended: its container's exit, else when it
// was marked for removal; zero when unknown (gone without trace).
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
	pod := st.pod
	if pod == nil {
		return true, time.Time{}
	}
	if main := c.mainContainerStatus(st.id.Type, pod); main != nil && main.State.Terminated != nil {
		return true, main.State.Terminated.FinishedAt.Time
	}
	if at := disruptedAt(pod); !at.IsZero() {
		return true, at
	}
	if pod.DeletionTimestamp != nil {
		return true, pod.DeletionTimestamp.Time
	}
	return true, time.Time{}
}
