package executor

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/trainstep/trainstep/pkg/logs"
	"github.com/trainstep/trainstep/pkg/result"
	"github.com/trainstep/trainstep/pkg/spec"
)

// paddleJob is a Kubeflow PaddleJob whose replicas run the demo trainer,
// the stand-in for `python -m paddle.distributed.launch` where Paddle is
// not installed: it reads the env Training Operator gives a PaddleJob and
// rendezvouses over PADDLE_MASTER.
func paddleJob(name string, masters, workers int) []byte {
	replica := func(rt string, n int) string {
		return fmt.Sprintf(`    %s:
      replicas: %d
      template:
        spec:
          containers:
          - {name: paddle, image: trainstep, command: [demo-trainer, --steps=120, --step-delay=2ms]}
`, rt, n)
	}
	manifest := "apiVersion: kubeflow.org/v1\nkind: PaddleJob\nmetadata: {name: " + name + "}\nspec:\n  runPolicy: {cleanPodPolicy: All}\n  paddleReplicaSpecs:\n"
	if masters > 0 {
		manifest += replica("Master", masters)
	}
	return []byte(manifest + replica("Worker", workers))
}

var paddleNode = regexp.MustCompile(`(?m)^\[([a-z]+-\d+)\] paddle job (\S+): (\S+) node of (\d+), rendezvous at 127\.0\.0\.1:(\d+)$`)

// A PaddleJob runs on this machine in both modes: every node reads
// Training Operator's env, one hosts the rendezvous at PADDLE_MASTER (the
// host replica's own port on this machine), the others find it there, all
// train one model, and the job's metrics come from the replica that
// decides its success.
func TestLocalPaddleJobRendezvousesOverPaddleMaster(t *testing.T) {
	buildCommands(t, "demo-trainer")
	for _, tc := range []struct {
		name             string
		masters, workers int
		roles            map[string]string // replica prefix ⇒ role
		leader           string
	}{
		{"collective", 0, 3, map[string]string{"worker": "collective"}, "worker-0"},
		{"parameter-server mode", 1, 2, map[string]string{"master": "server", "worker": "trainer"}, "master-0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runLocallyMode(t, t.Context(), paddleJob("paddle-demo", tc.masters, tc.workers), spec.Options{}, watchLog(), logs.ModeAll)
			if r.err != nil || r.res.Phase != result.PhaseSucceeded {
				t.Fatalf("phase %s, error %v\n%s", r.res.Phase, r.err, r.stderr)
			}
			out := r.stderr.String()
			nodes := paddleNode.FindAllStringSubmatch(out, -1)
			if len(nodes) != tc.masters+tc.workers {
				t.Fatalf("%d nodes read Paddle's env, want %d:\n%s", len(nodes), tc.masters+tc.workers, out)
			}
			ports := map[string]bool{}
			for _, n := range nodes {
				prefix, _, _ := strings.Cut(n[1], "-")
				if n[2] != "paddle-demo" || n[3] != tc.roles[prefix] || n[4] != fmt.Sprint(tc.masters+tc.workers) {
					t.Errorf("[%s] read job %s, role %s, %s nodes; want paddle-demo, %s, %d", n[1], n[2], n[3], n[4], tc.roles[prefix], tc.masters+tc.workers)
				}
				ports[n[5]] = true
			}
			if len(ports) != 1 {
				t.Errorf("the nodes were told %d rendezvous addresses, want one: %v", len(ports), ports)
			}
			if hosts := strings.Count(out, "hosting the rendezvous at 127.0.0.1:"); hosts != 1 {
				t.Errorf("%d nodes hosted the rendezvous, want one", hosts)
			}
			tr := trainingOf(t, tc.leader, out)
			if tr.finalLoss >= 0.01*tr.firstLoss {
				t.Errorf("final loss %g is not below 1%% of the first loss %g", tr.finalLoss, tr.firstLoss)
			}
			if diff := sameJSON(t, tr.metrics, r.output(t, "metrics.json")); diff != "" {
				t.Errorf("metrics.json differs from what %s wrote (-trainer +metrics.json):\n%s", tc.leader, diff)
			}
		})
	}
}
