package executor

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/trainstep/trainstep/pkg/result"
	"github.com/trainstep/trainstep/pkg/spec"
)

// workersOnlyPyTorchJob has two workers and neither a Master nor an
// elasticPolicy. Worker 0 finishes at once, writing what it was given;
// worker 1 two seconds later.
const workersOnlyPyTorchJob = `apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata: {name: ddp-workers}
spec:
  pytorchReplicaSpecs:
    Worker:
      replicas: 2
      template:
        spec:
          containers:
          - name: pytorch
            image: none
            command: [sh, -c, 'if [ "$TRAINSTEP_REPLICA_INDEX" = 1 ]; then sleep 2; fi; printf "{\"nnodes\": \"$PET_NNODES\", \"master\": \"${MASTER_ADDR:-none}\"}" > "$TRAINSTEP_TERMINATION_MESSAGE_PATH"']
`

// Without a Master, Training Operator v1.9 (UpdateJobStatus in
// pytorchjob_controller.go) ends a static PyTorchJob when every worker
// succeeded, not when worker 0 did: the job waits for worker 1 instead of
// stopping it, and worker 0's termination message is the metrics.
func TestWorkersOnlyPyTorchJobSucceedsWhenEveryWorkerDid(t *testing.T) {
	r := runLocally(t, t.Context(), []byte(workersOnlyPyTorchJob), spec.Options{}, watchLog())
	if r.res.Phase != result.PhaseSucceeded {
		t.Fatalf("phase %s (%v)\n%s", r.res.Phase, r.err, r.stderr)
	}
	if r.took < 2*time.Second {
		t.Errorf("the job ended after %s, before worker 1 finished", r.took)
	}
	var replicas []result.ReplicaStatus
	if err := json.Unmarshal([]byte(r.output(t, "replicas.json")), &replicas); err != nil {
		t.Fatal(err)
	}
	var phases []string
	for _, rs := range replicas {
		phases = append(phases, fmt.Sprintf("%s/%d %s", rs.Type, rs.Index, rs.Phase))
	}
	if diff := cmp.Diff([]string{"Worker/0 Succeeded", "Worker/1 Succeeded"}, phases); diff != "" {
		t.Errorf("replicas.json phases (-want +got):\n%s", diff)
	}
	if diff := sameJSON(t, `{"nnodes": "2", "master": "none"}`, r.output(t, "metrics.json")); diff != "" {
		t.Errorf("metrics.json is not worker 0's message (-want +got):\n%s", diff)
	}
}
