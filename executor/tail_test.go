package executor

import (
	"strings"
	"testing"

	"github.com/trainstep/trainstep/pkg/logs"
	"github.com/trainstep/trainstep/pkg/result"
	"github.com/trainstep/trainstep/pkg/spec"
)

// failingFollowerJob: Worker/1, not a leader, prints 30 lines and fails;
// Worker/0 (the leader) runs until it is stopped.
const failingFollowerJob = `
apiVersion: trainstep.dev/v1alpha1
kind: TrainJob
metadata: {name: follower}
spec:
  framework: tensorflow
  replicaSpecs:
    Worker:
      replicas: 2
      template:
        spec:
          containers:
          - name: tensorflow
            image: none
            command: [sh, -c, 'if [ "$TRAINSTEP_REPLICA_INDEX" = 0 ]; then echo ready; exec sleep 60; fi; sleep 0.5; for i in $(seq 1 30); do echo "line $i"; done; echo "Traceback: out of memory" >&2; exit 3']
`

// The last lines of a failed replica reach stderr under every log mode,
// although only the leaders' (or no) logs are streamed.
func TestAFailedReplicasLastLinesAreShownInEveryLogMode(t *testing.T) {
	for _, mode := range []logs.Mode{logs.ModeLeaders, logs.ModeNone} {
		t.Run(string(mode), func(t *testing.T) {
			r := runLocallyMode(t, t.Context(), []byte(failingFollowerJob), spec.Options{}, watchLog(), mode)
			if r.res.Phase != result.PhaseFailed {
				t.Fatalf("phase %s (%v), want Failed", r.res.Phase, r.err)
			}
			out := r.stderr.String()
			for _, want := range []string{"[worker-1] line 30\n", "[worker-1] Traceback: out of memory\n", "[worker-1] line 12\n"} {
				if !strings.Contains(out, want) {
					t.Errorf("stderr lacks %q:\n%s", want, out)
				}
			}
			if strings.Contains(out, "[worker-1] line 11\n") {
				t.Errorf("stderr has more than the last %d lines:\n%s", logs.FailedTailLines, out)
			}
			if strings.Contains(out, "[worker-0]") != (mode == logs.ModeLeaders) {
				t.Errorf("worker 0's log under --logs %s:\n%s", mode, out)
			}
		})
	}
}
