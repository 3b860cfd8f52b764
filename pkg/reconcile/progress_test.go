package reconcile

import (
	"testing"
	"time"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/policy"
)

// A replica whose container is down between in-place restarts is not
// running: the progress line names it with its last exit code and restarts.
func TestProgressNamesCrashLoopingReplicas(t *testing.T) {
	code := func(c int32) *int32 { return &c }
	running := func(i int) policy.Replica {
		return policy.Replica{ReplicaID: policy.ReplicaID{Type: "Worker", Index: i}, Phase: policy.PhaseRunning}
	}
	backOff := running(1)
	backOff.Restarts, backOff.ExitCode, backOff.WaitingReason = 5, code(132), "CrashLoopBackOff"
	justExited := running(2)
	justExited.Restarts, justExited.ExitCode, justExited.FinishedAt = 1, code(1), time.Unix(100, 0)
	recovered := running(3) // restarted once, running again
	recovered.Restarts, recovered.ExitCode = 1, code(1)
	firstFailure := running(4) // the kubelet's first back-off: no restart yet
	firstFailure.ExitCode, firstFailure.WaitingReason = code(137), "CrashLoopBackOff"
	sidecarRuns := running(5) // the main container succeeded, a sidecar still runs
	sidecarRuns.ExitCode, sidecarRuns.FinishedAt = code(0), time.Unix(100, 0)
	launcher := policy.Replica{ReplicaID: policy.ReplicaID{Type: "Launcher"}, Phase: policy.PhaseRunning}

	job := &v1alpha1.TrainJob{Spec: v1alpha1.TrainJobSpec{Framework: v1alpha1.FrameworkMPI}}
	v := &policy.View{Job: job, Replicas: []policy.Replica{launcher, running(0), backOff, justExited, recovered, firstFailure, sidecarRuns}, Restarts: 7}
	p := ProgressOf(v)

	want := "launcher 1/1 running, worker 3/6 running, 3 crash-looping (worker-1 exit 132, 5 restarts; worker-2 exit 1, 1 restarts; worker-4 exit 137, 0 restarts), restarts 7"
	if got := p.String(); got != want {
		t.Errorf("progress = %q\nwant       %q", got, want)
	}
	if p.Active != 4 || p.Total != 7 {
		t.Errorf("active %d of %d, want 4 of 7", p.Active, p.Total)
	}
}

// While a failure waits for a peer's earlier exit, the progress line says
// so with the bound.
func TestProgressSaysAFailureWaitsForItsPeers(t *testing.T) {
	job := &v1alpha1.TrainJob{Spec: v1alpha1.TrainJobSpec{Framework: v1alpha1.FrameworkPyTorch}}
	p := ProgressOf(&policy.View{Job: job, Replicas: []policy.Replica{
		{ReplicaID: policy.ReplicaID{Type: "Worker", Index: 0}, Phase: policy.PhaseRunning},
	}})
	p.Settling = 9400 * time.Millisecond
	want := "worker 1/1 running, a replica failed: waiting up to 9s for a peer's earlier exit before restarting the job, restarts 0"
	if got := p.String(); got != want {
		t.Errorf("progress = %q\nwant       %q", got, want)
	}
}
