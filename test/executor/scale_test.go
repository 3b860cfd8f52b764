package executor_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/test/cluster"
)

// Four jobs of 128 replicas each, launched together and run to the end:
// no replica name ever has a second pod (nothing deletes any from outside),
// and no job counts a restart.
func TestFourJobsOf128ReplicasCreateEachReplicaOnce(t *testing.T) {
	c := cluster.Get(t)
	ns := c.Namespace(t)
	// The four default nodes hold 440 pods; these two make room for 512
	// (named after the namespace, so that -count=N adds two more each time).
	for i := range 2 {
		name := fmt.Sprintf("%s-node-%d", ns, i)
		if err := c.AddNode(context.Background(), name, cluster.NodeCapacity("64", "256Gi", 200, 0)); err != nil {
			t.Fatal(err)
		}
	}
	const jobs, workers = 4, 128
	var runs []*process
	var histories []*uidHistory
	for j := range jobs {
		name := fmt.Sprintf("scale-%d", j)
		histories = append(histories, watchUIDs(t, c, ns, name))
		job := newJob(name, v1alpha1.FrameworkTensorFlow).replicas(worker, workers, exitsAfter("20s", 0))
		runs = append(runs, startBinary(t, "run", "-f", writeFile(t, job.yaml(t)), "--kubeconfig", c.Kubeconfig, "-n", ns))
	}
	for j, p := range runs {
		if code := p.wait(t, 5*time.Minute); code != 0 {
			t.Errorf("job scale-%d exited %d; stderr:\n%s", j, code, p.stderr)
			continue
		}
		if r := readOutput(t, p.outputsDir, "restarts"); r != "0" {
			t.Errorf("job scale-%d: restarts %q, want 0", j, r)
		}
		if d := histories[j].duplicates(); len(d) > 0 {
			t.Errorf("job scale-%d: replicas with more than one pod: %v", j, d)
		}
		if n := histories[j].names(); n != workers {
			t.Errorf("job scale-%d: %d replica names seen, want %d", j, n, workers)
		}
	}
}
