package executor_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/trainstep/trainstep/executor"
	"github.com/trainstep/trainstep/internal/testutil"
	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/result"
	"github.com/trainstep/trainstep/test/cluster"
)

// A PyTorch DDP job of a master and 7 workers: when worker-3 is killed
// (exit 137, as by the OOM killer), every replica is stopped and created
// again at job attempt 1, and the job counts one restart.
func TestOneKilledRankRestartsTheWholeCollectiveJob(t *testing.T) {
	t.Parallel()
	c := cluster.Get(t)
	ns := c.Namespace(t)
	owner := ownerPod(t, c, ns, "step")
	job := newJob("ddp", v1alpha1.FrameworkPyTorch).replicas(v1alpha1.ReplicaTypeMaster, 1, nil).replicas(worker, 7, nil).
		restartPolicy(worker, v1alpha1.RestartPolicyExitCode).restartPolicy(v1alpha1.ReplicaTypeMaster, v1alpha1.RestartPolicyExitCode).
		with(func(j *v1alpha1.TrainJob) { limit := int32(1); j.Spec.RunPolicy.BackoffLimit = &limit })
	history := watchUIDs(t, c, ns, "ddp")
	wait := startJob(t, c, ns, job.yaml(t), func(cfg *executor.Config) { cfg.OwnerPod, cfg.OwnerUID = owner.Name, string(owner.UID) })
	waitRunning(t, c, ns, "ddp", 8)
	first := livePods(t, c, ns, "ddp")
	patchAnnotations(t, c, ns, "ddp-worker-3", map[string]string{exitAfter: "0s", exitCode: "137"})
	testutil.Eventually(t, time.Minute, "every replica running again at job attempt 1", func() (bool, error) {
		pods := livePods(t, c, ns, "ddp")
		for name, p := range pods {
			if p.UID == first[name].UID || p.Labels[v1alpha1.LabelJobAttempt] != "1" || p.Status.Phase != corev1.PodRunning {
				return false, nil
			}
		}
		return len(pods) == 8, nil
	})
	patchAnnotations(t, c, ns, "ddp-master-0", map[string]string{exitAfter: "0s", exitCode: "0"})
	out := wait()
	if out.res.Phase != result.PhaseSucceeded || out.res.Restarts != 1 {
		t.Fatalf("phase %s restarts %d (%s), want Succeeded with 1 restart", out.res.Phase, out.res.Restarts, out.res.Message)
	}
	for name, uids := range history.uids {
		if len(uids) != 2 {
			t.Errorf("%s had %d instances, want 2: each replica recreated once", name, len(uids))
		}
	}
	events, err := c.Client.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{FieldSelector: "reason=JobRestarted"})
	if err != nil {
		t.Fatal(err)
	}
	if len(events.Items) != 1 || !strings.Contains(events.Items[0].Message, "restarting the job (attempt 2): worker-3 exit 137") {
		t.Errorf("JobRestarted events %v, want one naming worker-3's exit 137", events.Items)
	}
}

// A rule that fails the job on exit code 42 ends it at once, though the
// replica's restart policy would retry it.
func TestAFailJobRuleEndsTheJobAtOnce(t *testing.T) {
	t.Parallel()
	c := cluster.Get(t)
	ns := c.Namespace(t)
	job := newJob("fail42", v1alpha1.FrameworkPyTorch).replicas(v1alpha1.ReplicaTypeMaster, 1, nil).replicas(worker, 3, nil).
		with(func(j *v1alpha1.TrainJob) {
			j.Spec.RunPolicy.FailurePolicy = &v1alpha1.FailurePolicy{Rules: []v1alpha1.FailurePolicyRule{{
				Action: v1alpha1.FailureActionFailJob, OnExitCodes: &v1alpha1.ExitCodesRequirement{Operator: v1alpha1.ExitCodesOpIn, Values: []int32{42}}}}}
		})
	wait := startJob(t, c, ns, job.yaml(t))
	waitRunning(t, c, ns, "fail42", 4)
	patchAnnotations(t, c, ns, "fail42-worker-1", map[string]string{exitAfter: "0s", exitCode: "42"})
	out := wait()
	if out.res.Phase != result.PhaseFailed || out.res.Reason != result.ReasonReplicaFailed || out.res.Restarts != 0 {
		t.Fatalf("phase %s reason %s restarts %d (%s), want Failed ReplicaFailed without a restart", out.res.Phase, out.res.Reason, out.res.Restarts, out.res.Message)
	}
	if !strings.Contains(out.res.Message, "Worker/1") || !strings.Contains(out.res.Message, "42") {
		t.Errorf("message %q does not name worker-1's exit 42", out.res.Message)
	}
}

// A replica's node stops answering (its pods not Ready while running, the
// node tainted unreachable, as the node lifecycle controller leaves them): past
// --node-lost-timeout the replica counts as lost to a disruption, its pod
// is removed at once (its kubelet cannot confirm a graceful delete), the
// job restarts on the remaining nodes, and it costs no restart.
func TestALostNodeRestartsTheJobOnTheRemainingNodes(t *testing.T) {
	t.Parallel()
	c := cluster.Get(t)
	ns := c.Namespace(t)
	pool := "lost-" + ns[len(ns)-5:]
	ctx := context.Background()
	for i := 0; i < 3; i++ {
		name := fmt.Sprintf("%s-%d", pool, i)
		if err := c.AddNode(ctx, name, cluster.NodeCapacity("8", "32Gi", 110, 2),
			cluster.WithNodeLabels(map[string]string{"pool": pool}),
			cluster.WithNodeTaints(corev1.Taint{Key: "pool", Value: pool, Effect: corev1.TaintEffectNoSchedule})); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Client.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{}) })
	}
	onPool := func(j *v1alpha1.TrainJob) {
		for _, spec := range j.Spec.ReplicaSpecs {
			ps := &spec.Template.Spec
			ps.NodeSelector = map[string]string{"pool": pool}
			ps.Tolerations = []corev1.Toleration{{Key: "pool", Operator: corev1.TolerationOpEqual, Value: pool, Effect: corev1.TaintEffectNoSchedule}}
			ps.Containers[0].Resources = corev1.ResourceRequirements{
				Requests: corev1.ResourceList{cluster.ResourceGPU: resource.MustParse("1")},
				Limits:   corev1.ResourceList{cluster.ResourceGPU: resource.MustParse("1")}}
		}
		limit := int32(0)
		j.Spec.RunPolicy.BackoffLimit = &limit
	}
	job := newJob("lostnode", v1alpha1.FrameworkPyTorch).replicas(v1alpha1.ReplicaTypeMaster, 1, nil).replicas(worker, 3, nil).with(onPool)
	const nodeLost = 10 * time.Second
	wait := startJob(t, c, ns, job.yaml(t), func(cfg *executor.Config) { cfg.NodeLostTimeout = nodeLost })
	waitRunning(t, c, ns, "lostnode", 4)
	victim := livePods(t, c, ns, "lostnode")["lostnode-worker-0"].Spec.NodeName
	if err := c.LoseNode(ctx, victim); err != nil {
		t.Fatal(err)
	}
	var notReady time.Time
	testutil.Eventually(t, 2*time.Minute, "worker-0's pod marked not Ready", func() (bool, error) {
		p := livePods(t, c, ns, "lostnode")["lostnode-worker-0"]
		for _, cond := range p.Status.Conditions {
			if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionFalse {
				notReady = time.Now()
				return true, nil
			}
		}
		return false, nil
	})
	testutil.Eventually(t, nodeLost+30*time.Second, "the job restarted on the remaining nodes", func() (bool, error) {
		pods := livePods(t, c, ns, "lostnode")
		for _, p := range pods {
			if p.Labels[v1alpha1.LabelJobAttempt] != "1" || p.Status.Phase != corev1.PodRunning || p.Spec.NodeName == victim {
				return false, nil
			}
		}
		return len(pods) == 4, nil
	})
	t.Logf("the job restarted %s after worker-0 went not Ready", time.Since(notReady).Round(time.Second))
	patchAnnotations(t, c, ns, "lostnode-master-0", map[string]string{exitAfter: "0s", exitCode: "0"})
	out := wait()
	if out.res.Phase != result.PhaseSucceeded || out.res.Restarts != 0 {
		t.Fatalf("phase %s restarts %d (%s), want Succeeded with no restart (backoffLimit 0)", out.res.Phase, out.res.Restarts, out.res.Message)
	}
}
