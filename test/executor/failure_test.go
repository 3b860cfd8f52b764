package executor_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/result"
	"github.com/trainstep/trainstep/test/cluster"
)

// A failing replica whose log is not streamed (the ps, under the default
// --logs leaders) still shows its last lines, read from the kubelet.
func TestAFailedReplicasLastLinesReachStderr(t *testing.T) {
	t.Parallel()
	c := cluster.Get(t)
	ns := c.Namespace(t)
	var lines strings.Builder
	for i := 1; i <= 30; i++ {
		fmt.Fprintf(&lines, "ps line %d\n", i)
	}
	c.SetLogs(t, ns, "tail-ps-0", "tensorflow", lines.String())
	job := newJob("tail", v1alpha1.FrameworkTensorFlow).replicas(ps, 1, exitsAfter("2s", 3)).replicas(worker, 1, nil)

	out := runJob(t, c, ns, job.yaml(t))

	if out.res.Phase != result.PhaseFailed {
		t.Fatalf("phase %s (%s), want Failed", out.res.Phase, out.res.Message)
	}
	stderr := out.stderr.String()
	if !strings.Contains(stderr, "[ps-0] ps line 30\n") || !strings.Contains(stderr, "[ps-0] ps line 11\n") {
		t.Errorf("the failed ps's last lines are missing from stderr:\n%s", stderr)
	}
	if strings.Contains(stderr, "[ps-0] ps line 10\n") {
		t.Errorf("more than the last 20 lines were printed:\n%s", stderr)
	}
	var replicas []result.ReplicaStatus
	if err := json.Unmarshal([]byte(out.output(t, "replicas.json")), &replicas); err != nil {
		t.Fatal(err)
	}
	phases := map[string]string{}
	for _, r := range replicas {
		phases[r.Type] = r.Phase
	}
	if phases["PS"] != "Failed" || phases["Worker"] != result.ReplicaPhaseStopped {
		t.Errorf("replicas.json phases %v, want PS Failed and the worker trainstep deleted Stopped", phases)
	}
}

// A replica recreated twice says so in replicas.json: per-replica restarts
// add up to the job's, and the worker trainstep deleted at the end is Stopped.
func TestReplicasJSONCountsEachReplicasRecreations(t *testing.T) {
	t.Parallel()
	c := cluster.Get(t)
	ns := c.Namespace(t)
	// Every evaluator instance dies with 137 one second after it runs.
	job := newJob("recreated", v1alpha1.FrameworkTensorFlow).replicas(worker, 1, nil).
		replicas(evaluator, 1, exitsAfter("1s", 137)).restartPolicy(evaluator, v1alpha1.RestartPolicyExitCode).
		with(func(j *v1alpha1.TrainJob) { two := int32(2); j.Spec.RunPolicy.BackoffLimit = &two })

	out := runJob(t, c, ns, job.yaml(t))

	if out.res.Reason != result.ReasonBackoffLimitExceeded || out.res.Restarts != 2 {
		t.Fatalf("reason %s with %d restarts (%s), want BackoffLimitExceeded after 2", out.res.Reason, out.res.Restarts, out.res.Message)
	}
	var replicas []result.ReplicaStatus
	if err := json.Unmarshal([]byte(out.output(t, "replicas.json")), &replicas); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, r := range replicas {
		got[r.Type] = fmt.Sprintf("%s, restarts %d", r.Phase, r.Restarts)
	}
	want := map[string]string{"Evaluator": "Failed, restarts 2", "Worker": "Stopped, restarts 0"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("replicas.json = %v, want %v", got, want)
	}
}
