package nodes_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/trainstep/trainstep/internal/testutil"
	"github.com/trainstep/trainstep/test/cluster"
)

// lostNodeSteps is how far the DDP jobs whose node is lost train at least. They train on
// past it until the test killed the node (UNTIL_FILE), so that they still train at the kill
// however long the elastic job beside them takes to start. From the kill on, the all-reduce
// of the survivor's rank waits on its dead peer; after the restart the ranks resume from the
// checkpoint and train to lostNodeSteps, or stop at once when they resume past it.
const lostNodeSteps = 3000

// checkRestartedOnTheSurvivor checks that the job was restarted once as a whole, for
// nothing against its backoffLimit, on the node that stayed up, and resumed from rank 0's
// checkpoint; it returns when the restart was logged.
func checkRestartedOnTheSurvivor(t *testing.T, o outcome, survivor string) time.Time {
	t.Helper()
	checkSucceededPast(t, o, lostNodeSteps)
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
// train with one rank on each node and an elastic job trains with one of its three workers
// there. Nothing tells the ranks on real-node that their peers are gone: the DDP ranks'
// all-reduce waits, the elastic ranks' collectives time out.
//
//   - The node lifecycle controller marks the node NotReady, taints it unreachable and marks
//     its pods not Ready once its Lease is a grace period old, while real-node stays Ready.
//   - The first DDP job runs with --node-lost-timeout 5s: once its pod on the lost node stays
//     not Ready for 5 s, trainstep counts its rank as lost to a disruption and restarts the
//     job as a whole without counting it against backoffLimit (the lost pod deleted by force:
//     no kubelet will confirm it), and the ranks resume from rank 0's checkpoint, both on
//     real-node.
//   - The second runs with --node-lost-timeout 10m, so only the Node object's deletion, as a
//     cloud provider's node controller deletes a machine that is gone, restarts it: once the
//     first job restarted the test deletes the Node, the pod garbage collector marks the
//     node's pods DisruptionTarget and deletes them by force, and trainstep restarts the job
//     the same way, for nothing.
//   - The elastic job (--node-lost-timeout 5s) shrinks: its survivors' agents re-form the
//     world without the dead machine and train on at world size 2, its minReplicas; trainstep
//     replaces the lost worker without counting a restart, and the replacement waits for
//     capacity (real-node's slots are taken, real-node-2 is down).
//   - Once both DDP jobs' restarted ranks are placed on real-node, real-node-2 boots
//     again: the elastic job's replacement is placed there and the ranks re-form the world
//     at 3 and finish, while the DDP jobs finish on real-node.
//
// The three jobs share the kill, the node lifecycle's grace period and the node's restart.
func TestRealNodesLostNodeRestartsTheJobsOnTheSurvivor(t *testing.T) {
	c := twoNodes(t)
	bothNodesUp(t, c)
	survivor, victim := cluster.RealNodeName, secondNode
	elastic := startElastic(t, c, survivor, victim)
	lost := newDDPUntil(t, c, lostNodeSteps, "All", "killed")
	deleted := newDDPUntil(t, c, lostNodeSteps, "All", "killed")
	lostRun := lost.start(t, 5*time.Second)
	deletedRun := deleted.start(t, 10*time.Minute)
	lost.waitTraining(t)
	deletedPods := deleted.waitTraining(t)
	elastic.waitTraining(t)
	// A pod of the victim that only the Node's deletion removes.
	var doomed corev1.Pod
	for _, p := range deletedPods {
		if p.Spec.NodeName == victim {
			doomed = p
		}
	}

	elastic.killedAt = len(elastic.r.stderr.String())
	if err := c.KillRealNode(victim); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	// Seen by the DDP jobs' ranks only once restarted: their survivors wait on the dead.
	lost.endTraining(t)
	deleted.endTraining(t)
	restarted := false
	t.Cleanup(func() {
		if restarted {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		if err := c.RestartRealNode(ctx, victim); err != nil {
			t.Errorf("bringing %s back for the tests after this one: %v", victim, err)
		}
	})
	t.Logf("killed %s while the DDP jobs train and the elastic job trains at world size 3 (its worker %d there)", victim, elastic.lostIndex)
	checkSeenLost(t, c, victim, survivor, doomed, killed)

	testutil.Eventually(t, nodeGrace+2*time.Minute, "the first job restarting", func() bool {
		return lostRun.log.FilterMessage("restarting the job").Len() > 0
	})
	t.Logf("the first job restarted %s after the kill", time.Since(killed).Round(100*time.Millisecond))
	if n := deletedRun.log.FilterMessage("restarting the job").Len(); n != 0 {
		t.Fatalf("the second job restarted before its node was deleted: %v", jobRestarts(outcome{log: deletedRun.log}))
	}
	// For the Node's deletion, the pod garbage collector and the node's restart.
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	// Every version of the doomed pod from before the deletion until it is gone, from a
	// watch: the pod is gone by the time a Get says so, and the condition with it.
	current, err := c.Client.CoreV1().Pods(deleted.ns).Get(ctx, doomed.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := c.Client.CoreV1().Pods(deleted.ns).Watch(ctx, metav1.ListOptions{
		FieldSelector:   fields.OneTermEqualSelector("metadata.name", doomed.Name).String(),
		ResourceVersion: current.ResourceVersion,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if err := c.DeleteNode(ctx, victim); err != nil {
		t.Fatal(err)
	}
	deletedAt := time.Now()
	checkDisruptedThenDeleted(t, w, doomed.Name)
	t.Logf("the pod garbage collector deleted %s %s after the Node", doomed.Name, time.Since(deletedAt).Round(100*time.Millisecond))

	elastic.waitShrunk(t, killed)
	// Both DDP jobs' restarted ranks are placed on the survivor before the victim returns,
	// where they could be placed otherwise.
	testutil.Eventually(t, 2*time.Minute, "the second job restarting", func() bool {
		return deletedRun.log.FilterMessage("restarting the job").Len() > 0
	})
	lost.waitRestartedOn(t, lostRun, survivor)
	deleted.waitRestartedOn(t, deletedRun, survivor)
	if err := c.RestartRealNode(ctx, victim); err != nil {
		t.Fatal(err)
	}
	restarted = true
	setElasticSlots(t, c, victim, 1)
	t.Logf("%s is back %s after the kill, with its slot", victim, time.Since(killed).Round(100*time.Millisecond))

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
	o = elastic.r.wait(t)
	t.Logf("the elastic job ended %s after the kill; trainstep's world sizes: %v", time.Since(killed).Round(100*time.Millisecond), worldSizes(o))
	t.Run("elastic", func(t *testing.T) { elastic.checkGrewBack(t, o, victim) })
}

// checkSeenLost waits until the killed node is seen as Kubernetes sees a lost machine —
// NotReady, tainted unreachable, its pod (one of pod's node) not Ready — and checks that it
// was so no sooner than the grace period after its last heartbeat, and that the other node
// stayed Ready.
func checkSeenLost(t *testing.T, c *cluster.Cluster, victim, survivor string, pod corev1.Pod, killed time.Time) {
	t.Helper()
	var node *corev1.Node
	testutil.Eventually(t, nodeGrace+time.Minute, victim+" NotReady, tainted unreachable, its pod not Ready", func(ctx context.Context) (bool, error) {
		var err error
		if node, err = c.Client.CoreV1().Nodes().Get(ctx, victim, metav1.GetOptions{}); err != nil {
			return false, err
		}
		p, err := c.Client.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		ready := readyCondition(node)
		return ready != nil && ready.Status == corev1.ConditionUnknown && hasTaint(node, corev1.TaintNodeUnreachable) &&
			podCondition(p, corev1.PodReady) == corev1.ConditionFalse, nil
	})
	t.Logf("%s seen lost %s after it was killed (grace period %s)", victim, time.Since(killed).Round(100*time.Millisecond), nodeGrace)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// The grace period runs from the node's last heartbeat, its Lease's last renewal before
	// the kill (up to a renewal interval earlier), not from the kill.
	lease, err := c.Client.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, victim, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if lease.Spec.RenewTime == nil || lease.Spec.RenewTime.After(killed) {
		t.Fatalf("%s's Lease renewed at %v, want a last renewal before the kill at %v", victim, lease.Spec.RenewTime, killed)
	}
	// Conditions keep whole seconds.
	if silence := readyCondition(node).LastTransitionTime.Sub(lease.Spec.RenewTime.Time); silence < nodeGrace-time.Second {
		t.Errorf("%s marked lost %s after its last heartbeat, before the grace period %s: not its silence", victim, silence, nodeGrace)
	}
	first, err := c.Client.CoreV1().Nodes().Get(ctx, survivor, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !nodeReady(first) {
		t.Errorf("%s is not Ready while %s is lost: %v", survivor, victim, readyCondition(first))
	}
}

// checkDisruptedThenDeleted follows the watch of one pod of a deleted node until the pod is
// deleted, and checks that the pod garbage collector marked it DisruptionTarget first.
func checkDisruptedThenDeleted(t *testing.T, w watch.Interface, name string) {
	t.Helper()
	var disrupted bool
	deadline := time.After(2 * time.Minute)
	for deleted := false; !deleted; {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatalf("the watch of pod %s ended before it was deleted", name)
			}
			if pod, isPod := ev.Object.(*corev1.Pod); isPod && pod.Name == name {
				disrupted = disrupted || podCondition(pod, corev1.DisruptionTarget) == corev1.ConditionTrue
				deleted = ev.Type == watch.Deleted
			}
		case <-deadline:
			t.Fatalf("pod %s of the deleted node is not deleted 2 minutes after the node", name)
		}
	}
	if !disrupted {
		t.Errorf("pod %s was deleted without a DisruptionTarget condition", name)
	}
}

// partitionSteps is how far the partitioned job trains at least, past its first checkpoint:
// it trains on until the test tells it the partition healed (UNTIL_FILE), however fast this
// machine trains, so that it trains through the node lifecycle's grace period and the
// partition that follows, and ends soon after.
const partitionSteps = 100

// TestRealNodesHealedPartitionCostsNothing stops the kubelet and containerd of the worker's
// node (SIGSTOP) while the job trains: the node goes NotReady and the worker's pod not Ready,
// while both ranks go on training. The partition heals (SIGCONT) before --node-lost-timeout:
// the job goes on with the same pods and ends with no restart at all.
func TestRealNodesHealedPartitionCostsNothing(t *testing.T) {
	c := twoNodes(t)
	bothNodesUp(t, c)
	d := newDDPUntil(t, c, partitionSteps, "None", "healed")
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
	// Rank 0, the master, is on the other node: its log still comes through.
	stepWhenNotReady := r.lastStep()
	time.Sleep(5 * time.Second)
	pods, err := d.pods(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for name, p := range pods {
		if p.Spec.NodeName != node && p.Status.Phase != corev1.PodRunning {
			t.Fatalf("%s is %s before the partition heals: the job did not train through the partition", name, p.Status.Phase)
		}
	}
	// Each step's all-reduce needs both ranks: rank 0's steps are both ranks'.
	if step := r.lastStep(); step <= stepWhenNotReady {
		t.Fatalf("rank 0 logged step %d when the worker's pod went not Ready and %d 5 s later: the ranks did not train through the partition", stepWhenNotReady, step)
	}
	if err := c.HealRealNode(node); err != nil {
		t.Fatal(err)
	}
	healed = true
	t.Logf("healed the partition of %s after %s; rank 0 trained from step %d to %d in its last 5 s", node, time.Since(partitioned).Round(100*time.Millisecond), stepWhenNotReady, r.lastStep())
	d.endTraining(t)
	o := r.wait(t)
	checkSucceededPast(t, o, partitionSteps)
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
