package executor_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/trainstep/trainstep/executor"
	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/result"
	"github.com/trainstep/trainstep/test/cluster"
)

// gpuPool adds tainted KWOK nodes labelled pool=name, named prefix-i, with
// the given GPUs each; they are removed when the test ends.
func gpuPool(t *testing.T, c *cluster.Cluster, pool, prefix string, gpus ...int64) []string {
	t.Helper()
	var names []string
	for i, n := range gpus {
		name := fmt.Sprintf("%s-%d", prefix, i)
		if err := c.AddNode(context.Background(), name, cluster.NodeCapacity("64", "256Gi", 110, n),
			cluster.WithNodeLabels(map[string]string{"pool": pool}),
			cluster.WithNodeTaints(corev1.Taint{Key: "pool", Value: pool, Effect: corev1.TaintEffectNoSchedule})); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Client.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{}) })
		names = append(names, name)
	}
	return names
}

// onGPUPool places every replica on the pool, one GPU each.
func onGPUPool(pool string) func(*v1alpha1.TrainJob) {
	return func(j *v1alpha1.TrainJob) {
		for _, spec := range j.Spec.ReplicaSpecs {
			ps := &spec.Template.Spec
			ps.NodeSelector = map[string]string{"pool": pool}
			ps.Tolerations = []corev1.Toleration{{Key: "pool", Operator: corev1.TolerationOpEqual, Value: pool, Effect: corev1.TaintEffectNoSchedule}}
			ps.Containers[0].Resources = corev1.ResourceRequirements{
				Requests: corev1.ResourceList{cluster.ResourceGPU: resource.MustParse("1")},
				Limits:   corev1.ResourceList{cluster.ResourceGPU: resource.MustParse("1")}}
		}
	}
}

// An elastic 4..32 job on a pool with room for 10 runs 10 workers while 22
// wait for capacity, well past --pending-timeout; once room for 32
// appears, all 32 run. When room falls below 4 (nodes cordoned, their
// workers evicted) for longer than --pending-timeout, the step ends
// Transient (exit 12) so that a retry of it tries later.
func TestElasticJobGrowsIntoAPoolAndEndsTransientBelowMinReplicas(t *testing.T) {
	t.Parallel()
	c := cluster.Get(t)
	ns := c.Namespace(t)
	pool := "elastic-" + ns[len(ns)-5:]
	first := gpuPool(t, c, pool, pool, 3, 7)
	job := newJob("grow", v1alpha1.FrameworkPyTorch).replicas(worker, 4, nil).
		with(func(j *v1alpha1.TrainJob) {
			lo, hi := int32(4), int32(32)
			j.Spec.ElasticPolicy = &v1alpha1.ElasticPolicy{MinReplicas: &lo, MaxReplicas: &hi}
		}).with(onGPUPool(pool))
	const pendingTimeout = 15 * time.Second
	log, record := recordLog()
	wait := startJob(t, c, ns, job.yaml(t), record, func(cfg *executor.Config) { cfg.PendingTimeout = pendingTimeout })
	ended := make(chan runOutcome, 1)
	go func() { ended <- wait() }()

	at := log.waitLine(t, 2*time.Minute, 0, "worker 10/32 running (elastic 4..32), 22 waiting for capacity")
	started := time.Now()
	if n := len(livePods(t, c, ns, "grow")); n != 32 {
		t.Fatalf("%d pods, want one for each of the 32 slots", n)
	}
	// Twice the pending timeout with workers unplaced: the job goes on.
	select {
	case out := <-ended:
		t.Fatalf("the job ended %s/%s (%s) while 10 of minReplicas 4 ran", out.res.Phase, out.res.Reason, out.res.Message)
	case <-time.After(2 * pendingTimeout):
	}
	if pods := livePods(t, c, ns, "grow"); len(pods) != 32 {
		t.Fatalf("after %s: %d pods, want the 32 still there", time.Since(started).Round(time.Second), len(pods))
	}

	// A node with room for the 22 others joins the pool, as one an
	// autoscaler adds.
	more := gpuPool(t, c, pool, pool+"-more", 22)
	at = log.waitLine(t, 2*time.Minute, at, "worker 32/32 running (elastic 4..32)")
	waitRunning(t, c, ns, "grow", 32)

	// Room falls to 3: every node but the 3-GPU one is cordoned and its
	// workers evicted. The replacements wait for capacity.
	for _, node := range append([]string{first[1]}, more...) {
		if _, err := c.Client.CoreV1().Nodes().Patch(context.Background(), node, types.MergePatchType, []byte(`{"spec":{"unschedulable":true}}`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range livePods(t, c, ns, "grow") {
		if p.Spec.NodeName == first[0] {
			continue
		}
		eviction := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: ns}}
		if err := c.Client.CoreV1().Pods(ns).EvictV1(context.Background(), eviction); err != nil {
			t.Fatalf("evicting %s: %v", p.Name, err)
		}
	}
	short := time.Now()
	log.waitLine(t, 2*time.Minute, at, "worker 3/32 running (elastic 4..32), 29 waiting for capacity")
	var out runOutcome
	select {
	case out = <-ended:
	case <-time.After(4 * time.Minute):
		t.Fatal("the run did not end within 4 minutes")
	}
	if out.res.Phase != result.PhaseTransient || out.res.Reason != result.ReasonPendingTimeout {
		t.Fatalf("phase %s/%s (%s), want Transient PendingTimeout", out.res.Phase, out.res.Reason, out.res.Message)
	}
	if waited := time.Since(short); waited < pendingTimeout {
		t.Errorf("the job ended %s after falling short, before the pending timeout %s", waited.Round(time.Second), pendingTimeout)
	}
	if out.res.Restarts != 0 {
		t.Errorf("restarts %d, want 0: evictions and waiting for capacity cost none", out.res.Restarts)
	}
	if code := out.res.Phase.ExitCode(); code != result.ExitTransient {
		t.Errorf("exit code %d, want %d", code, result.ExitTransient)
	}
}
