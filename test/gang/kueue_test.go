package gang_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"

	"github.com/trainstep/trainstep/internal/testutil"
	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/gang"
	"github.com/trainstep/trainstep/pkg/result"
	"github.com/trainstep/trainstep/test/cluster"
)

// kueueLocalQueue is the LocalQueue kueueQueues makes in a test's namespace.
const kueueLocalQueue = "training"

// kueueQueues puts namespace ns under Kueue with a LocalQueue,
// kueueLocalQueue, of a ClusterQueue of its own whose nominal quota is gpus
// GPUs (and CPU to spare), which preempts lower-priority Workloads for
// higher ones.
func kueueQueues(t *testing.T, c *cluster.Cluster, ns string, gpus int64) {
	t.Helper()
	c.KueueManage(t, ns)
	dyn := dynamicClient(t, c)
	flavor := "flavor-" + ns
	objects := []struct {
		gvr schema.GroupVersionResource
		obj map[string]any
	}{
		{cluster.KueueResourceFlavors, map[string]any{
			"kind": "ResourceFlavor", "metadata": map[string]any{"name": flavor},
		}},
		{cluster.KueueClusterQueues, map[string]any{
			"kind": "ClusterQueue", "metadata": map[string]any{"name": ns},
			"spec": map[string]any{
				"namespaceSelector": map[string]any{"matchLabels": map[string]any{"kubernetes.io/metadata.name": ns}},
				"resourceGroups": []any{map[string]any{
					"coveredResources": []any{"cpu", string(cluster.ResourceGPU)},
					"flavors": []any{map[string]any{"name": flavor, "resources": []any{
						map[string]any{"name": "cpu", "nominalQuota": "100"},
						map[string]any{"name": string(cluster.ResourceGPU), "nominalQuota": fmt.Sprint(gpus)},
					}}},
				}},
				"preemption": map[string]any{"withinClusterQueue": "LowerPriority"},
			},
		}},
		{cluster.KueueLocalQueues, map[string]any{
			"kind": "LocalQueue", "metadata": map[string]any{"name": kueueLocalQueue, "namespace": ns},
			"spec": map[string]any{"clusterQueue": ns},
		}},
	}
	ctx := context.Background()
	for _, o := range objects {
		u := &unstructured.Unstructured{Object: o.obj}
		u.SetAPIVersion(o.gvr.GroupVersion().String())
		if _, err := dyn.Resource(o.gvr).Namespace(u.GetNamespace()).Create(ctx, u, metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating %s %s: %v", u.GetKind(), u.GetName(), err)
		}
	}
	// Kueue admits nothing to a ClusterQueue until it is active.
	testutil.Eventually(t, time.Minute, "ClusterQueue "+ns+" active", func() bool {
		cq, err := dyn.Resource(cluster.KueueClusterQueues).Get(ctx, ns, metav1.GetOptions{})
		if err != nil {
			return false
		}
		conds, _, _ := unstructured.NestedSlice(cq.Object, "status", "conditions")
		for _, cond := range conds {
			if m, ok := cond.(map[string]any); ok && m["type"] == "Active" && m["status"] == "True" {
				return true
			}
		}
		return false
	})
}

// Kueue's queueing, not the nodes, serialises two jobs: the pool has room
// for both, the ClusterQueue's quota for one. The second waits, its pods
// created but held by Kueue's admission gate (bound to nothing), until the
// first ends; then Kueue admits it as a whole and it runs. Both succeed
// without a restart.
func TestRealGangKueueQueuesJobsBeyondItsQuota(t *testing.T) {
	c := cluster.Get(t)
	c.StartKueue(t)
	ns := c.Namespace(t)
	const pool, replicas = "kueue-queue", 3
	addPool(t, c, pool, 2, replicas) // room for both jobs
	kueueQueues(t, c, ns, replicas)  // quota for one
	binds := watchBinds(t, c, ns)
	sp := &v1alpha1.SchedulingPolicy{Gang: v1alpha1.GangKueue, Queue: kueueLocalQueue, ScheduleTimeoutSeconds: ptr.To[int32](150)}
	first := startRun(t, c, ns, gpuJob("first", pool, replicas, sp), slowCreates)
	testutil.Eventually(t, time.Minute, "first running", func() bool {
		return countPods(jobPods(t, c, ns, "first"), running) == replicas
	})
	second := startRun(t, c, ns, gpuJob("second", pool, replicas, sp))
	testutil.Eventually(t, time.Minute, "second's pods created, held by Kueue", func() bool {
		pods := jobPods(t, c, ns, "second")
		return len(pods) == replicas && countPods(pods, kueueGated) == replicas
	})
	// The Workload says why it waits; the pods stay gated meanwhile.
	dyn := dynamicClient(t, c)
	testutil.Eventually(t, 30*time.Second, "second's Workload pending on quota", func() bool {
		wl, err := dyn.Resource(cluster.KueueWorkloads).Namespace(ns).Get(context.Background(), "second", metav1.GetOptions{})
		return err == nil && gang.KueueWorkloadSays(wl) != ""
	})
	if b := binds.of("second"); len(b) != 0 {
		t.Fatalf("second got %d pods bound while first held the quota", len(b))
	}
	firstDone := time.Now()
	exitAll(t, c, ns, "first")
	if res := first.wait(t); res.Phase != result.PhaseSucceeded || res.Restarts != 0 {
		t.Fatalf("first ended %s/%s with %d restarts: %s", res.Phase, res.Reason, res.Restarts, res.Message)
	}
	testutil.Eventually(t, time.Minute, "second running", func() bool {
		return countPods(jobPods(t, c, ns, "second"), running) == replicas
	})
	exitAll(t, c, ns, "second")
	if res := second.wait(t); res.Phase != result.PhaseSucceeded || res.Restarts != 0 {
		t.Fatalf("second ended %s/%s with %d restarts: %s", res.Phase, res.Reason, res.Restarts, res.Message)
	}
	b := binds.of("second")
	if len(b) != replicas {
		t.Fatalf("second: %d binds seen, want %d", len(b), replicas)
	}
	if last := binds.of("first"); b[0].seq < last[len(last)-1].seq || b[0].at.Before(firstDone) {
		t.Errorf("second got a pod bound before first ended")
	}
	t.Logf("second: %d pods bound within %s, %s after first was told to exit",
		len(b), b[len(b)-1].at.Sub(b[0].at).Round(time.Millisecond), b[0].at.Sub(firstDone).Round(time.Millisecond))
}

// A job Kueue preempts: a higher-priority job arrives in the same full
// ClusterQueue, Kueue evicts the lower one's Workload and deletes its pods
// (condition TerminationTarget, reason WorkloadEvictedDueToPreempted). trainstep takes
// that as a disruption — the default failure rule ignores it — recreates
// the job's pods as a group, which Kueue queues again and admits once the
// higher job ended. Both succeed; the preempted job has no restart counted.
func TestRealGangKueuePreemptedJobIsRecreatedAsAGroup(t *testing.T) {
	c := cluster.Get(t)
	c.StartKueue(t)
	ns := c.Namespace(t)
	const pool, replicas = "kueue-preempt", 3
	addPool(t, c, pool, 1, replicas)
	kueueQueues(t, c, ns, replicas)
	low, high := ns+"-low", ns+"-high"
	priorityClass(t, c, low, 100)
	priorityClass(t, c, high, 1000)
	evicted := watchKueueEvictions(t, c, ns)
	binds := watchBinds(t, c, ns)
	policy := func(priority string) *v1alpha1.SchedulingPolicy {
		return &v1alpha1.SchedulingPolicy{Gang: v1alpha1.GangKueue, Queue: kueueLocalQueue,
			PriorityClass: priority, ScheduleTimeoutSeconds: ptr.To[int32](150)}
	}
	lowRun := startRun(t, c, ns, gpuJob("low", pool, replicas, policy(low)))
	testutil.Eventually(t, time.Minute, "low running", func() bool {
		return countPods(jobPods(t, c, ns, "low"), running) == replicas
	})
	firstPods := jobPods(t, c, ns, "low")
	highRun := startRun(t, c, ns, gpuJob("high", pool, replicas, policy(high)))
	testutil.Eventually(t, time.Minute, "high running", func() bool {
		return countPods(jobPods(t, c, ns, "high"), running) == replicas
	})
	// Kueue marks low's pods evicted one by one; trainstep stops every rank
	// on the first mark, so Kueue may find the others gone before it marks them.
	testutil.Eventually(t, 30*time.Second, "Kueue to evict low", func() bool {
		return len(evicted.of("low")) >= 1
	})
	// low's pods were evicted by Kueue, and trainstep made new ones, which
	// Kueue holds while high has the quota.
	testutil.Eventually(t, time.Minute, "low recreated, held by Kueue", func() bool {
		pods := jobPods(t, c, ns, "low")
		return len(pods) == replicas && countPods(pods, kueueGated) == replicas && !sharesUID(pods, firstPods)
	})
	// The next attempt is a group, and a Workload, of its own; the evicted
	// attempt's Workload goes with its pods.
	for _, p := range jobPods(t, c, ns, "low") {
		if g := p.Labels[gang.KueuePodGroupLabel]; g != "low.1" {
			t.Errorf("%s: pod group %q, want low.1", p.Name, g)
		}
	}
	workloads := dynamicClient(t, c).Resource(cluster.KueueWorkloads).Namespace(ns)
	testutil.Eventually(t, time.Minute, "the evicted attempt's Workload gone, the next one's there", func() bool {
		_, errOld := workloads.Get(context.Background(), "low", metav1.GetOptions{})
		_, errNew := workloads.Get(context.Background(), "low.1", metav1.GetOptions{})
		return apierrors.IsNotFound(errOld) && errNew == nil
	})
	exitAll(t, c, ns, "high")
	if res := highRun.wait(t); res.Phase != result.PhaseSucceeded || res.Restarts != 0 {
		t.Fatalf("high ended %s/%s with %d restarts: %s", res.Phase, res.Reason, res.Restarts, res.Message)
	}
	testutil.Eventually(t, time.Minute, "low running again", func() bool {
		return countPods(jobPods(t, c, ns, "low"), running) == replicas
	})
	exitAll(t, c, ns, "low")
	res := lowRun.wait(t)
	t.Logf("low ended %s/%s with %d restarts: %s", res.Phase, res.Reason, res.Restarts, res.Message)
	if res.Phase != result.PhaseSucceeded || res.Restarts != 0 {
		t.Fatalf("low ended %s/%s with %d restarts, want Succeeded with none (an eviction is a disruption): %s",
			res.Phase, res.Reason, res.Restarts, res.Message)
	}
	// Two generations of low, each bound all together.
	b := binds.of("low")
	if len(b) != 2*replicas {
		t.Fatalf("low: %d binds seen, want %d (two generations)", len(b), 2*replicas)
	}
	for gen := range 2 {
		g := b[gen*replicas : (gen+1)*replicas]
		if burst := g[len(g)-1].at.Sub(g[0].at); burst > 3*time.Second {
			t.Errorf("low's generation %d held some but not all of its pods bound for %s", gen+1, burst.Round(time.Millisecond))
		}
	}
}

// kueueGated is a pod Kueue's admission gate still holds.
func kueueGated(p *corev1.Pod) bool {
	for _, g := range p.Spec.SchedulingGates {
		if g.Name == gang.KueueAdmissionGate {
			return p.Spec.NodeName == ""
		}
	}
	return false
}

func sharesUID(a, b []corev1.Pod) bool {
	for _, x := range a {
		for _, y := range b {
			if x.UID == y.UID {
				return true
			}
		}
	}
	return false
}

// evictionLog records, from a watch of a namespace's pods, each pod Kueue
// stopped because it evicted its group.
type evictionLog struct {
	mu   sync.Mutex
	pods map[string][]string // job → pod UIDs
}

func (l *evictionLog) of(job string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.pods[job]...)
}

func watchKueueEvictions(t *testing.T, c *cluster.Cluster, ns string) *evictionLog {
	t.Helper()
	l := &evictionLog{pods: map[string][]string{}}
	seen := map[string]bool{}
	watchPods(t, c, ns, func(_ int, _ watch.Event, pod *corev1.Pod) {
		if seen[string(pod.UID)] || !gang.KueueEvicted(pod) {
			return
		}
		seen[string(pod.UID)] = true
		l.mu.Lock()
		defer l.mu.Unlock()
		job := pod.Labels[v1alpha1.LabelJobName]
		l.pods[job] = append(l.pods[job], string(pod.UID))
	})
	return l
}
