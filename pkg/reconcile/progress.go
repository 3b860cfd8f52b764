package reconcile

import (
	"fmt"
	"strings"
	"time"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/policy"
)

// Progress counts the job's replicas for the progress line and Argo's
// progress file.
type Progress struct {
	Types []TypeProgress
	// Active is how many replicas are running or done; Total how many there are.
	Active, Total int
	Restarts      int32
	// Waiting says what holds a replica back from being created ("" when
	// nothing does), e.g. an MPI launcher waiting for its workers.
	Waiting string
	// Elastic counts an elastic job's workers (nil for other jobs).
	Elastic *policy.Elastic
	// WorkerTarget is the workers elasticPolicy.metrics allow (0 without metrics).
	WorkerTarget int
	// Settling > 0: a replica failed and the decision waits at most this
	// long for a peer's earlier exit, the likelier cause (policy.Decision).
	Settling time.Duration
}

// TypeProgress counts one replica type.
type TypeProgress struct {
	Type                      v1alpha1.ReplicaType
	Running, Succeeded, Total int
	// CrashLooping are the replicas of this type whose container is down
	// between in-place restarts, in index order.
	CrashLooping []CrashLoop
}

// CrashLoop is one replica whose container exited and waits to be
// restarted in place (the kubelet's CrashLoopBackOff): its pod is Running,
// its container is not.
type CrashLoop struct {
	Index    int
	ExitCode int32 // the last exit code
	Restarts int32 // in-place restarts of the current pod
}

// crashLoopOf reports whether r is crash-looping: its pod runs, but its
// container exited with an error and, right now, waits to be restarted in
// place (from the first failure on: the kubelet's back-off starts there).
func crashLoopOf(r policy.Replica) (CrashLoop, bool) {
	down := r.WaitingReason != "" || !r.FinishedAt.IsZero()
	if r.Phase != policy.PhaseRunning || r.ExitCode == nil || *r.ExitCode == 0 || !down {
		return CrashLoop{}, false
	}
	return CrashLoop{Index: r.Index, ExitCode: *r.ExitCode, Restarts: r.Restarts}, true
}

// ProgressOf counts a view.
func ProgressOf(v *policy.View) Progress {
	p := Progress{Restarts: v.Restarts}
	index := map[v1alpha1.ReplicaType]int{}
	for _, r := range v.Replicas {
		i, ok := index[r.Type]
		if !ok {
			i = len(p.Types)
			index[r.Type] = i
			p.Types = append(p.Types, TypeProgress{Type: r.Type})
		}
		tp := &p.Types[i]
		tp.Total++
		p.Total++
		if loop, ok := crashLoopOf(r); ok {
			tp.CrashLooping = append(tp.CrashLooping, loop)
			continue
		}
		switch r.Phase {
		case policy.PhaseRunning:
			tp.Running++
			p.Active++
		case policy.PhaseSucceeded:
			tp.Succeeded++
			p.Active++
		}
	}
	if e, ok := policy.ElasticOf(v); ok {
		p.Elastic = &e
	}
	return p
}

// String renders "worker 3/4 running, ps 1/1 running, restarts 1"; crash-
// looping replicas as "worker 1/2 running, 1 crash-looping (worker-1 exit
// 132, 5 restarts)"; an
// elastic job's workers as "worker 3/8 running (elastic 2..8), 5 waiting
// for capacity", with "metrics' target 4" when elasticPolicy.metrics decide
// how many may run.
func (p Progress) String() string {
	parts := make([]string, 0, len(p.Types)+3)
	for _, t := range p.Types {
		s := fmt.Sprintf("%s %d/%d running", strings.ToLower(string(t.Type)), t.Running, t.Total)
		elastic := p.Elastic != nil && t.Type == v1alpha1.ReplicaTypeWorker
		if elastic {
			s += fmt.Sprintf(" (elastic %d..%d)", p.Elastic.Min, p.Elastic.Max)
		}
		if t.Succeeded > 0 {
			s += fmt.Sprintf(" (%d succeeded)", t.Succeeded)
		}
		if n := len(t.CrashLooping); n > 0 {
			loops := make([]string, n)
			for i, l := range t.CrashLooping {
				loops[i] = fmt.Sprintf("%s-%d exit %d, %d restarts", strings.ToLower(string(t.Type)), l.Index, l.ExitCode, l.Restarts)
			}
			s += fmt.Sprintf(", %d crash-looping (%s)", n, strings.Join(loops, "; "))
		}
		if elastic && p.WorkerTarget > 0 {
			s += fmt.Sprintf(", metrics' target %d", p.WorkerTarget)
		}
		if elastic && p.Elastic.WaitingForCapacity > 0 {
			s += fmt.Sprintf(", %d waiting for capacity", p.Elastic.WaitingForCapacity)
		}
		parts = append(parts, s)
	}
	if p.Waiting != "" {
		parts = append(parts, p.Waiting)
	}
	if p.Settling > 0 {
		parts = append(parts, fmt.Sprintf("a replica failed: waiting up to %s for a peer's earlier exit before restarting the job", p.Settling.Round(time.Second)))
	}
	parts = append(parts, fmt.Sprintf("restarts %d", p.Restarts))
	return strings.Join(parts, ", ")
}
