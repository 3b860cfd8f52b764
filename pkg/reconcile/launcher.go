package reconcile

import (
	"strconv"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/frameworks"
	"github.com/trainstep/trainstep/pkg/policy"
)

// launcherGate holds an MPI launcher back until every worker pod is Running
// and Ready (launcherCreationPolicy: WaitForWorkersReady): mpirun reaches
// the workers by DNS names that resolve only once their pods have an
// address, and Ready is the MPI Operator's test that they have and run.
// As in the MPI Operator, the gate is checked only until the launcher is
// first created: a restart of the launcher or a replacement of a worker
// later does not hold the launcher again. A whole-job restart starts every
// replica afresh, so each job attempt's launcher waits for its workers.
type launcherGate struct {
	launcher *replicaState
	workers  []*replicaState
	open     bool
	// ready is how many workers were Ready at the last look.
	ready int
	// told is the state last logged: 0 nothing, 1 held, 2 open.
	told int
}

// newLauncherGate returns nil unless the job waits for its workers.
func newLauncherGate(job *v1alpha1.TrainJob, replicas map[policy.ReplicaID]*replicaState, order []policy.ReplicaID) *launcherGate {
	held, awaited, ok := frameworks.HeldUntilReady(job)
	if !ok {
		return nil
	}
	g := &launcherGate{}
	for _, id := range order {
		switch id.Type {
		case held:
			g.launcher = replicas[id]
		case awaited:
			g.workers = append(g.workers, replicas[id])
		}
	}
	if g.launcher == nil {
		return nil
	}
	return g
}

// adopted opens the gate when the launcher's running pod was adopted from an
// earlier attempt of the job. A launcher of that attempt that failed is
// replaced as a new one: it waits for the workers like the first.
func (g *launcherGate) adopted(st *replicaState) {
	if g != nil && st == g.launcher {
		g.open = true
	}
}

// newAttempt closes the gate for the job's next attempt, whose workers are
// new; called with the controller's mutex held.
func (g *launcherGate) newAttempt() {
	if g != nil {
		g.open, g.ready, g.told = false, 0, 0
	}
}

// holds reports whether st may not be created now; called with the
// controller's mutex held. It opens the gate for good once every worker is
// Ready.
func (g *launcherGate) holds(st *replicaState) bool {
	if g == nil || g.open || st != g.launcher {
		return false
	}
	g.ready = 0
	for _, w := range g.workers {
		if w.stage == stageObserved && podReady(w.pod) {
			g.ready++
		}
	}
	g.open = g.ready == len(g.workers)
	return !g.open
}

// announceLauncher logs when the launcher becomes held, and logs and
// records an event when it is released; called with the controller's mutex
// held.
func (c *Controller) announceLauncher() {
	g := c.launcher
	if g == nil {
		return
	}
	switch {
	case !g.open && g.told == 0:
		g.told = 1
		c.opts.Logger.Info("launcher waits until every worker is Ready (launcherCreationPolicy: WaitForWorkersReady)",
			zap.Int("workers", len(g.workers)))
	case g.open && g.told == 1:
		g.told = 2
		c.event(corev1.EventTypeNormal, EventWorkersReady, "all %d workers are Ready; creating the launcher", len(g.workers))
		c.opts.Logger.Info("every worker is Ready; creating the launcher", zap.Int("workers", len(g.workers)))
	}
}

// waiting describes the held launcher for the progress line, "" when it is
// not held.
func (g *launcherGate) waiting() string {
	if g == nil || g.open {
		return ""
	}
	return "launcher waits for workers Ready (" + strconv.Itoa(g.ready) + "/" + strconv.Itoa(len(g.workers)) + ")"
}

// podReady is the MPI Operator's test of a worker: Running, with its Ready
// condition True.
func podReady(pod *corev1.Pod) bool {
	if pod == nil || pod.Status.Phase != corev1.PodRunning || pod.DeletionTimestamp != nil {
		return false
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
