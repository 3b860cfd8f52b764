package executor_test

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/trainstep/trainstep/pkg/result"
	"github.com/trainstep/trainstep/test/cluster"
)

// A TFJob that leaves cleanPodPolicy unset keeps nothing running once its
// step ended: the operator's default None would keep the parameter server
// (and its GPUs) until someone deleted the TFJob, which in a workflow
// nobody does. The run says so when it starts. The job succeeds when both
// workers have (AllWorkers): under the default policy worker 0's success
// ends it, and a worker 1 still running then is rightly deleted.
func TestKubeflowTFJobWithoutCleanPodPolicyLeavesNoRunningPod(t *testing.T) {
	t.Parallel()
	c := cluster.Get(t)
	ns := c.Namespace(t)
	manifest := fmt.Sprintf(`apiVersion: kubeflow.org/v1
kind: TFJob
metadata: {name: tfps}
spec:
  successPolicy: AllWorkers
  tfReplicaSpecs:
    PS:
      replicas: 1
      template:
        spec:
          containers: [{name: tensorflow, image: registry.example/train:1, command: [python, ps.py]}]
    Worker:
      replicas: 2
      template:
        metadata:
          annotations: {%q: 2s, %q: "0"}
        spec:
          containers: [{name: tensorflow, image: registry.example/train:1, command: [python, train.py]}]
`, exitAfter, exitCode)
	log, record := recordLog()

	out := runJob(t, c, ns, []byte(manifest), record)

	if out.err != nil || out.res.Phase != result.PhaseSucceeded {
		t.Fatalf("run: phase %s (%s), err %v; stderr:\n%s", out.res.Phase, out.res.Message, out.err, out.stderr)
	}
	if log.find(0, "spec.runPolicy.backoffLimit is unset", "restarted without end") < 0 {
		t.Errorf("the run did not warn that its restarts are unbounded; it logged:\n%s", log.messages(0))
	}
	if log.find(0, "spec.runPolicy.cleanPodPolicy is unset", "are deleted (Running)") < 0 {
		t.Errorf("the run did not say what an unset cleanPodPolicy does; it logged:\n%s", log.messages(0))
	}
	for _, p := range listPods(t, c, ns, "tfps") {
		if p.DeletionTimestamp == nil && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			t.Errorf("pod %s is %s after the step ended, want it deleted", p.Name, p.Status.Phase)
		}
	}
	if pods := livePods(t, c, ns, "tfps"); len(pods) != 2 {
		t.Errorf("after the run: pods %v, want only the two succeeded workers", keys(pods))
	}
	for _, svc := range listServices(t, c, ns, "tfps") {
		if svc.Name == "tfps-ps-0" {
			t.Errorf("the PS Service survived its pod")
		}
	}
}

// An MPIJob without backoffLimit whose launcher keeps failing stops where
// MPI Operator's launcher Job would, after 6 restarts, instead of running
// mpirun again and again; the outputs agree on the count.
func TestKubeflowMPIJobWithoutBackoffLimitStopsAfterSixRestarts(t *testing.T) {
	t.Parallel()
	c := cluster.Get(t)
	ns := c.Namespace(t)
	manifest := fmt.Sprintf(`apiVersion: kubeflow.org/v2beta1
kind: MPIJob
metadata: {name: crashing}
spec:
  mpiReplicaSpecs:
    Launcher:
      replicas: 1
      template:
        metadata:
          annotations: {%q: 1s, %q: "132"}
        spec:
          containers: [{name: launcher, image: registry.example/mpi:1, command: [mpirun, python, train.py]}]
    Worker:
      replicas: 2
      template:
        spec:
          containers: [{name: worker, image: registry.example/mpi:1}]
`, exitAfter, exitCode)

	out := runJob(t, c, ns, []byte(manifest))

	if out.res.Phase != result.PhaseFailed || out.res.Reason != result.ReasonBackoffLimitExceeded {
		t.Fatalf("phase %s, reason %s (%s), want Failed BackoffLimitExceeded; stderr:\n%s", out.res.Phase, out.res.Reason, out.res.Message, out.stderr)
	}
	// The message and the restarts output count the same restarts.
	restarts := out.output(t, "restarts")
	if want := "the job restarted " + restarts + " times, more than backoffLimit=6"; restarts != "7" || out.res.Message != want {
		t.Errorf("restarts output %q and message %q, want 7 and %q", restarts, out.res.Message, want)
	}
}
