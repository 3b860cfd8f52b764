package gang_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"

	"github.com/trainstep/trainstep/executor"
	"github.com/trainstep/trainstep/internal/testutil"
	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/result"
	"github.com/trainstep/trainstep/test/cluster"
)

// quotaGangs are the gang kinds a ResourceQuota is shared under: the
// built-in gang's gated pods count against it as much as the pods
// Kubernetes' PodGroup or Kueue hold.
var quotaGangs = []struct {
	kind    v1alpha1.GangKind
	start   func(t *testing.T, c *cluster.Cluster)
	queue   string
	prepare func(t *testing.T, c *cluster.Cluster, ns string, gpus int64)
}{
	{kind: v1alpha1.GangBuiltin},
	{kind: v1alpha1.GangKubernetes},
	{kind: v1alpha1.GangKueue, start: func(t *testing.T, c *cluster.Cluster) { c.StartKueue(t) }, queue: kueueLocalQueue, prepare: kueueQueues},
}

// Two gangs under a ResourceQuota with room for one of them, their creates
// interleaved (each job's pods one at a time, 5 per second): the quota
// admits some pods of each and refuses the rest, and each job would hold
// its part and wait for room the other holds until --pending-timeout. A
// gang the quota refuses in part gives its pods back and tries again
// later, so one job is whole first, runs and ends, then the other: both
// succeed, neither with a pod bound while the rest of its gang was missing.
func TestGangsUnderAQuotaForOneTakeTurns(t *testing.T) {
	c := cluster.Get(t)
	const replicas = 3
	for _, g := range quotaGangs {
		t.Run(string(g.kind), func(t *testing.T) {
			if g.start != nil {
				g.start(t, c)
			}
			ns := c.Namespace(t)
			pool := "quota-" + string(g.kind)
			addPool(t, c, pool, 1, 2*replicas) // room on the nodes for both
			gpuQuota(t, c, ns, replicas)       // the quota for one
			if g.prepare != nil {
				g.prepare(t, c, ns, 2*replicas) // Kueue's own quota for both: only the ResourceQuota binds
			}
			pods := watchGangs(t, c, ns, replicas)
			jobs := []string{"job-a", "job-b"}
			runs := map[string]*run{}
			for _, name := range jobs {
				sp := &v1alpha1.SchedulingPolicy{Gang: g.kind, Queue: g.queue, ScheduleTimeoutSeconds: ptr.To[int32](150)}
				runs[name] = startRun(t, c, ns, gpuJob(name, pool, replicas, sp), slowCreates,
					func(cfg *executor.Config) { cfg.PendingTimeout = 90 * time.Second })
			}
			// Each job, once every pod of it runs, is told to end; the other
			// then takes the quota.
			var order []string
			for len(order) < len(jobs) {
				testutil.Eventually(t, 2*time.Minute, fmt.Sprintf("a job after %v running whole", order), func() bool {
					for _, job := range jobs {
						if !contains(order, job) && countPods(jobPods(t, c, ns, job), running) == replicas {
							order = append(order, job)
							exitAll(t, c, ns, job)
							return true
						}
					}
					return false
				})
			}
			for _, job := range jobs {
				res := runs[job].wait(t)
				if res.Phase != result.PhaseSucceeded || res.Restarts != 0 {
					t.Errorf("%s ended %s/%s with %d restarts: %s", job, res.Phase, res.Reason, res.Restarts, res.Message)
				}
				made, half := pods.of(job)
				if half != "" {
					t.Errorf("%s: %s", job, half)
				}
				t.Logf("%s: %d pods made for %d replicas", job, made, replicas)
			}
		})
	}
}

// gpuQuota puts a ResourceQuota of gpus GPUs on ns and waits until it counts.
func gpuQuota(t *testing.T, c *cluster.Cluster, ns string, gpus int64) {
	t.Helper()
	quota := &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Name: "gpus"},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{
			corev1.ResourceName("requests." + string(cluster.ResourceGPU)): *resource.NewQuantity(gpus, resource.DecimalSI),
		}},
	}
	ctx := context.Background()
	if _, err := c.Client.CoreV1().ResourceQuotas(ns).Create(ctx, quota, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, time.Minute, "the ResourceQuota counted", func() bool {
		q, err := c.Client.CoreV1().ResourceQuotas(ns).Get(ctx, quota.Name, metav1.GetOptions{})
		return err == nil && q.Status.Hard != nil
	})
}

// gangWatch follows a namespace's pods by job: every pod made, and each
// bind checked against the job's live pods at that moment.
type gangWatch struct {
	replicas int
	mu       sync.Mutex
	live     map[string]map[types.UID]bool // by job, pods not being deleted
	made     map[string]map[types.UID]bool
	half     map[string]string
	seen     map[types.UID]bool // bound
}

func watchGangs(t *testing.T, c *cluster.Cluster, ns string, replicas int) *gangWatch {
	t.Helper()
	w := &gangWatch{replicas: replicas, live: map[string]map[types.UID]bool{}, made: map[string]map[types.UID]bool{}, half: map[string]string{}, seen: map[types.UID]bool{}}
	watchPods(t, c, ns, func(_ int, ev watch.Event, pod *corev1.Pod) {
		job := pod.Labels[v1alpha1.LabelJobName]
		if job == "" {
			return
		}
		w.mu.Lock()
		defer w.mu.Unlock()
		if w.live[job] == nil {
			w.live[job], w.made[job] = map[types.UID]bool{}, map[types.UID]bool{}
		}
		w.made[job][pod.UID] = true
		if ev.Type == watch.Deleted || pod.DeletionTimestamp != nil {
			delete(w.live[job], pod.UID)
			return
		}
		w.live[job][pod.UID] = true
		if pod.Spec.NodeName != "" && !w.seen[pod.UID] {
			w.seen[pod.UID] = true
			if n := len(w.live[job]); n < w.replicas && w.half[job] == "" {
				w.half[job] = fmt.Sprintf("%s bound while %d of its job's pods existed", pod.Name, n)
			}
		}
	})
	return w
}

// of says how many pods of job were made in all, and whether one was bound
// while fewer than the gang's pods lived.
func (w *gangWatch) of(job string) (int, string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.made[job]), w.half[job]
}
