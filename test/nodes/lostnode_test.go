package nodes_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/trainstep/trainstep/internal/testutil"
	"github.com/trainstep/trainstep/test/cluster"
)

// lostNodeSteps is how long the DDP jobs whose node is lost train: long enough that both
// jobs still train when the test kills the node, which it does once both wrote their first
// checkpoint (step 10). From the kill on, the all-reduce of the survivor's rank waits on its
// dead peer, so what is left is trained after the restart.
const lostNodeSteps = 3000

// checkRestartedOnTheSurvivor checks that the job was restarted once as a whole, for
// nothing against its backoffLimit, on the node that stayed up, and resumed from rank 0's
// checkpoint; it returns when the restart was logged.
func checkRestartedOnTheSurvivor(t *testing.T, o outcome, survivor string) time.Time {
	t.Helper()
	checkSucceeded(t, o, lostNodeSteps)
	restarts := o.log.FilterMessage("restarting the job").All()
	if len(restarts) != 1 || restarts[0].ContextMap()["counted"] != false {
		t.Fatalf("job restarts logged: %v, want one, not counted", jobRestarts(o))
	}
	for _, r := range o.res.Replicas {
		if r.Node != survivor {
			t.Errorf("%s %d ended on node %q, want the survivor %s", r.Type, r.Index, r.Node, survivor)
		}
	}
	if !strings.Contains(o.stderr.String(), "rank 0: resuming at step") {
		t.Errorf("rank 0 did not resume from its checkpoint; the replicas' log:\n%s", lastLines(o.stderr.String(), 40))
	}
	return restarts[0].Time
}

// TestRealNodesLostNodeRestartsTheJobsOnTheSurvivor kills real-node-2 while two DDP jobs
// train with one rank on each node. Nothing tells the ranks on real-node that their peers
// are gone: their all-reduce waits.
//
//   - The first job runs with --node-lost-timeout 5s. The node lifecycle controller marks the
//     lost node NotReady after its grace period and its pods not Ready; once the job's pod
//     stays so for 5 s, trainstep counts its rank as lost to a disruption and restarts the job
//     as a whole without counting it against backoffLimit (the lost pod deleted by force: no
//     kubelet will confirm it), and the ranks resume from rank 0's checkpoint, both on
//     real-node.
//   - The second runs with --node-lost-timeout 10m, so only the Node object's deletion, as a
//     cloud provider's node controller deletes a machine that is gone, restarts it: once the
//     first job restarted the test deletes the Node, the pod garbage collector marks the
//     node's pods DisruptionTarget and deletes them by force, and trainstep restarts the job
//     the same way, for nothing.
//
// The two share the kill, the node lifecycle's grace period and the restart of the node.
func TestRealNodesLostNodeRestartsTheJobsOnTheSurvivor(t *testing.T) {
	c := twoNodes(t)
	bothNodesUp(t, c)
	survivor, victim := cluster.RealNodeName, secondNode
	lost := newDDP(t, c, lostNodeSteps, "All")
	deleted := newDDP(t, c, lostNodeSteps, "All")
	lostRun := lost.start(t, 5*time.Second)
	deletedRun := deleted.start(t, 10*time.Minute)
	lost.waitTraining(t)
	deleted.waitTraining(t)
	if err := c.KillRealNode(victim); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	t.Logf("killed %s while both jobs train", victim)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		if err := c.RestartRealNode(ctx, victim); err != nil {
			t.Errorf("bringing %s back for the tests after this one: %v", victim, err)
		}
	})
	testutil.Eventually(t, nodeGrace+2*time.Minute, "the first job restarting", func() bool {
		return lostRun.log.FilterMessage("restarting the job").Len() > 0
	})
	t.Logf("the first job restarted %s after the kill", time.Since(killed).Round(100*time.Millisecond))
	if n := deletedRun.log.FilterMessage("restarting the job").Len(); n != 0 {
		t.Fatalf("the second job restarted before its node was deleted: %v", jobRestarts(outcome{log: deletedRun.log}))
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.DeleteNode(ctx, victim); err != nil {
		t.Fatal(err)
	}
	deletedAt := time.Now()

	o := lostRun.wait(t)
	t.Logf("the first job ended %s after the kill", time.Since(killed).Round(100*time.Millisecond))
	t.Run("node-lost-timeout", func(t *testing.T) {
		if restarted := checkRestartedOnTheSurvivor(t, o, survivor); restarted.After(deletedAt) {
			t.Errorf("restarted at %s, after the Node's deletion at %s: want the node-lost timeout's restart", restarted, deletedAt)
		}
	})
	o = deletedRun.wait(t)
	t.Logf("the second job ended %s after the Node was deleted", time.Since(deletedAt).Round(100*time.Millisecond))
	t.Run("node-deleted", func(t *testing.T) {
		if restarted := checkRestartedOnTheSurvivor(t, o, survivor); restarted.Before(deletedAt) {
			t.Errorf("restarted at %s, before the Node's deletion at %s", restarted, deletedAt)
		}
	})
}

// partitionSteps is how long the partitioned job trains: past the node lifecycle's grace
// period and the partition that follows (about a minute at the 5 ms a step two ranks took on
// this machine's two busy cores).
const partitionSteps = 12000

// TestRealNodesHealedPartitionCostsNothing stops the kubelet and containerd of the worker's
// node (SIGSTOP) while the job trains: the node goes NotReady and the worker's pod not Ready,
// while both ranks go on training. The partition heals (SIGCONT) before --node-lost-timeout:
// the job goes on with the same pods and ends with no restart at all.
func TestRealNodesHealedPartitionCostsNothing(t *testing.T) {
	c := twoNodes(t)
	bothNodesUp(t, c)
	d := newDDP(t, c, partitionSteps, "None")
	r := d.start(t, 90*time.Second)
	before := d.waitTraining(t)
	worker := workerPod(t, before)
	node := worker.Spec.NodeName
	if err := c.PartitionRealNode(node); err != nil {
		t.Fatal(err)
	}
	healed := false
	t.Cleanup(func() {
		if !healed {
			_ = c.HealRealNode(node)
		}
	})
	partitioned := time.Now()
	testutil.Eventually(t, nodeGrace+time.Minute, "the worker's pod not Ready while its node is partitioned", func(ctx context.Context) (bool, error) {
		pod, err := c.Client.CoreV1().Pods(d.ns).Get(ctx, worker.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return podCondition(pod, corev1.PodReady) == corev1.ConditionFalse, nil
	})
	t.Logf("the worker's pod is not Ready %s into the partition of %s", time.Since(partitioned).Round(100*time.Millisecond), node)
	time.Sleep(5 * time.Second)
	pods, err := d.pods(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for name, p := range pods {
		if p.Spec.NodeName != node && p.Status.Phase != corev1.PodRunning {
			t.Fatalf("%s is %s before the partition heals: the job did not train through the partition (raise partitionSteps)", name, p.Status.Phase)
		}
	}
	if err := c.HealRealNode(node); err != nil {
		t.Fatal(err)
	}
	healed = true
	t.Logf("healed the partition of %s after %s", node, time.Since(partitioned).Round(100*time.Millisecond))
	o := r.wait(t)
	checkSucceeded(t, o, partitionSteps)
	if restarts := jobRestarts(o); len(restarts) != 0 {
		t.Errorf("job restarts logged: %v, want none", restarts)
	}
	after, err := d.pods(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for name, p := range before {
		if after[name].UID != p.UID {
			t.Errorf("pod %s was replaced (uid %s, then %s), want the same pod throughout", name, p.UID, after[name].UID)
		}
	}
}

func podCondition(pod *corev1.Pod, t corev1.PodConditionType) corev1.ConditionStatus {
	for _, cond := range pod.Status.Conditions {
		if cond.Type == t {
			return cond.Status
		}
	}
	return ""
}
