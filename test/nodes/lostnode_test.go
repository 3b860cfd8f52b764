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

// lostNodeSteps is how long the DDP jobs whose node is lost train: long enough that rank
// 0 is still training when the node lifecycle controller gives up on the lost node.
const lostNodeSteps = 6000

// otherNode is the real node that is not name.
func otherNode(name string) string {
	if name == cluster.RealNodeName {
		return secondNode
	}
	return cluster.RealNodeName
}

// killWorkerNode kills the node of the job's worker while both ranks train and returns it; the
// node is restarted when the test ends.
func killWorkerNode(t *testing.T, d *testJob) string {
	t.Helper()
	victim := workerPod(t, d.waitTraining(t)).Spec.NodeName
	if err := d.c.KillRealNode(victim); err != nil {
		t.Fatal(err)
	}
	t.Logf("killed %s, the worker's node", victim)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		if err := d.c.RestartRealNode(ctx, victim); err != nil {
			t.Errorf("bringing %s back for the tests after this one: %v", victim, err)
		}
	})
	return victim
}

// checkRestartedOnTheSurvivor checks that the job was restarted once as a whole, for
// nothing against its backoffLimit, on the node that stayed up, and resumed from rank 0's
// checkpoint.
func checkRestartedOnTheSurvivor(t *testing.T, o outcome, survivor string) {
	t.Helper()
	checkSucceeded(t, o, lostNodeSteps)
	restarts := jobRestarts(o)
	if len(restarts) != 1 || restarts[0]["counted"] != false {
		t.Errorf("job restarts logged: %v, want one, not counted", restarts)
	}
	for _, r := range o.res.Replicas {
		if r.Node != survivor {
			t.Errorf("%s %d ended on node %q, want the survivor %s", r.Type, r.Index, r.Node, survivor)
		}
	}
	if !strings.Contains(o.stderr.String(), "rank 0: resuming at step") {
		t.Errorf("rank 0 did not resume from its checkpoint; the replicas' log:\n%s", lastLines(o.stderr.String(), 40))
	}
}

// TestRealNodesKilledNodeRestartsTheJobOnTheSurvivor kills the node of the worker of a DDP
// job while it trains. Nothing tells the master, on the other node, that its peer is gone:
// its all-reduce waits. The node lifecycle controller marks the lost node NotReady after its
// grace period and its pods not Ready; once the pods stay so for --node-lost-timeout,
// trainstep counts the worker as lost to a disruption, restarts the job as a whole without
// counting it against backoffLimit (the lost pod deleted by force: no kubelet will confirm
// it), and the ranks resume from rank 0's checkpoint, both on the surviving node.
func TestRealNodesKilledNodeRestartsTheJobOnTheSurvivor(t *testing.T) {
	c := twoNodes(t)
	d := newDDP(t, c, lostNodeSteps, "All")
	wait := d.start(t, 15*time.Second)
	victim := killWorkerNode(t, d)
	killed := time.Now()
	o := wait()
	t.Logf("the run ended %s after the kill", time.Since(killed).Round(100*time.Millisecond))
	checkRestartedOnTheSurvivor(t, o, otherNode(victim))
}

// TestRealNodesDeletedNodeRestartsTheJobOnTheSurvivor is the same with the lost node's Node
// object deleted at once, as a cloud provider's node controller does for a machine that is
// gone: the pod garbage collector marks the node's pods DisruptionTarget and deletes them by
// force. trainstep's node-lost timeout is long here, so the restart is what the deletion
// causes: a disruption, not counted.
func TestRealNodesDeletedNodeRestartsTheJobOnTheSurvivor(t *testing.T) {
	c := twoNodes(t)
	d := newDDP(t, c, lostNodeSteps, "All")
	wait := d.start(t, 10*time.Minute)
	victim := killWorkerNode(t, d)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.DeleteNode(ctx, victim); err != nil {
		t.Fatal(err)
	}
	deleted := time.Now()
	o := wait()
	t.Logf("the run ended %s after the Node was deleted", time.Since(deleted).Round(100*time.Millisecond))
	checkRestartedOnTheSurvivor(t, o, otherNode(victim))
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
	d := newDDP(t, c, partitionSteps, "None")
	wait := d.start(t, 90*time.Second)
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
	o := wait()
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
