package executor

import (
	"path/filepath"
	"testing"

	"github.com/trainstep/trainstep/pkg/result"
	"github.com/trainstep/trainstep/pkg/spec"
)

// restartedJob is a PyTorch job that restarts as a whole: its one worker
// (RANK 1: the master is rank 0) fails with a retryable code on the first
// two attempts.
const restartedJob = `
apiVersion: trainstep.dev/v1alpha1
kind: TrainJob
metadata: {name: restarted}
spec:
  framework: pytorch
  replicaSpecs:
    Master:
      restartPolicy: ExitCode
      template:
        spec:
          containers: [{name: pytorch, image: none, command: [sh, -c, 'while [ "$(cat "$COUNT" 2>/dev/null)" != 3 ]; do sleep 0.1; done']}]
    Worker:
      restartPolicy: ExitCode
      retryableExitCodes: [75]
      template:
        spec:
          containers:
          - name: pytorch
            image: none
            command: [sh, -c, 'n=$(cat "$COUNT" 2>/dev/null || echo 0); n=$((n+1)); echo $n > "$COUNT"; if [ $n -le 2 ]; then exit 75; fi']
`

// Restarts are reported once and agree: each replica start logs the job's
// attempt, a replica whose framework rank is not its index says its rank,
// and the restarts output counts what the log counted.
func TestRestartsAreLoggedWithTheJobsAttemptAndTheRank(t *testing.T) {
	count := filepath.Join(t.TempDir(), "count")
	r := runLocally(t, t.Context(), []byte(restartedJob), spec.Options{Envs: []string{"COUNT=" + count}}, watchLog())
	if r.res.Phase != result.PhaseSucceeded {
		t.Fatalf("phase %s (%v)\n%s", r.res.Phase, r.err, r.stderr)
	}
	var masterAttempts []int64
	for _, e := range r.logs.FilterMessage("replica started").All() {
		fields := e.ContextMap()
		switch fields["replica"] {
		case "Master/0":
			masterAttempts = append(masterAttempts, fields["attempt"].(int64))
			if _, ok := fields["rank"]; ok {
				t.Errorf("Master/0 logged rank %v, which is its index", fields["rank"])
			}
		case "Worker/0":
			if fields["rank"] != "1" {
				t.Errorf("Worker/0 started with rank %v, want 1 (the master is rank 0)", fields["rank"])
			}
		}
	}
	if len(masterAttempts) != 3 || masterAttempts[0] != 0 || masterAttempts[1] != 1 || masterAttempts[2] != 2 {
		t.Errorf("Master/0 started at job attempts %v, want [0 1 2]", masterAttempts)
	}
	// Each failure waited for a peer's earlier exit before the job restarted, and said so.
	if n := r.logs.FilterMessageSnippet("a replica failed: waiting up to 10s for a peer's earlier exit").Len(); n != 2 {
		t.Errorf("%d log lines about waiting for a peer's earlier exit, want one per failure (2)", n)
	}
	if got := r.output(t, "restarts"); got != "2" {
		t.Errorf("restarts output %s, want 2", got)
	}
	if r.logs.FilterMessageSnippet("spec.runPolicy.backoffLimit is unset").Len() != 1 {
		t.Errorf("no warning that the job's restarts are unbounded")
	}
}
