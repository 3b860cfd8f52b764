package gang_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/trainstep/trainstep/executor"
	"github.com/trainstep/trainstep/internal/testutil"
	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/gang"
	"github.com/trainstep/trainstep/pkg/result"
	"github.com/trainstep/trainstep/test/cluster"
)

// realGang is a gang kind whose scheduler runs on the test cluster.
type realGang struct {
	kind      v1alpha1.GangKind
	podGroups schema.GroupVersionResource
	// start starts the scheduler when kube-scheduler is not it.
	start func(t *testing.T, c *cluster.Cluster)
	// queue, when set, is the queue every job names; prepare makes it in
	// namespace ns, with room for gpus GPUs, before any job starts.
	queue   string
	prepare func(t *testing.T, c *cluster.Cluster, ns string, gpus int64)
	// says is what trainstep's message on a gang that cannot fit has of
	// the scheduler's.
	says []string
	// joined checks, while job runs, that its pods point at its PodGroup.
	joined func(t *testing.T, dyn dynamic.Interface, ns, job string)
}

var realGangs = []realGang{
	// kube-scheduler 1.37's GangScheduling plugin: the PodGroup's
	// PodGroupInitiallyScheduled condition, e.g. "Unschedulable: minCount
	// (3) cannot be satisfied: 2 scheduled, 0 remaining, …".
	{kind: v1alpha1.GangKubernetes, podGroups: gang.KubernetesPodGroups,
		says: []string{"the scheduler says: Unschedulable: minCount (3) cannot be satisfied"}, joined: checkJoinedTheirGroup},
	// The coscheduling plugin rejects the group in PostFilter: a pod's
	// PodScheduled message, e.g. "0/1 nodes are available: 1 optimistic
	// rejection in PostFilter.".
	{kind: v1alpha1.GangSchedulerPlugins, podGroups: gang.SchedulerPluginsPodGroups,
		start: func(t *testing.T, c *cluster.Cluster) { c.StartSchedulerPlugins(t) },
		says:  []string{"the scheduler says: ", "PostFilter"}},
	// Kueue admits a pod group as a whole within its ClusterQueue's quota,
	// which the tests set to the pool's GPUs; its Workload, named after the
	// group, stands for the PodGroup. A group over the quota stays pending,
	// and the Workload's QuotaReserved condition says why, e.g. "couldn't
	// assign flavors to pod set …: insufficient quota for nvidia.com/gpu in
	// flavor …".
	{kind: v1alpha1.GangKueue, podGroups: cluster.KueueWorkloads,
		start: func(t *testing.T, c *cluster.Cluster) { c.StartKueue(t) },
		queue: kueueLocalQueue, prepare: kueueQueues,
		says: []string{"Kueue says: ", "insufficient quota for nvidia.com/gpu"}},
}

// policy is the scheduling policy of a job of this gang kind.
func (g realGang) policy(timeoutSeconds int32) *v1alpha1.SchedulingPolicy {
	return &v1alpha1.SchedulingPolicy{Gang: g.kind, Queue: g.queue, ScheduleTimeoutSeconds: ptr.To(timeoutSeconds)}
}

// setUp starts g's scheduler when kube-scheduler is not it, and gives a
// test a namespace and a pool of n nodes of gpus GPUs each; with a queue,
// its quota is the pool's GPUs.
func (g realGang) setUp(t *testing.T, c *cluster.Cluster, pool string, n int, gpus int64) string {
	t.Helper()
	if g.start != nil {
		g.start(t, c)
	}
	ns := c.Namespace(t)
	addPool(t, c, pool, n, gpus)
	if g.prepare != nil {
		g.prepare(t, c, ns, int64(n)*gpus)
	}
	return ns
}

// Two jobs that cannot both fit, under a gang scheduler: it places one
// job's pods all together, the other job's pods stay Pending (bound to
// nothing) until the first ends, then run. A watch over the namespace
// records every bind: each job's binds come in one burst, and the second
// job's first bind follows the first job's last.
func TestRealGangStartsOneJobAllTogetherThenTheOther(t *testing.T) {
	c := cluster.Get(t)
	dyn := dynamicClient(t, c)
	for _, g := range realGangs {
		t.Run(string(g.kind), func(t *testing.T) {
			pool := "real-" + string(g.kind)
			ns := g.setUp(t, c, pool, deadlockNodes, deadlockGPUs)
			binds := watchBinds(t, c, ns)
			jobs := []string{"job-a", "job-b"}
			runs := map[string]*run{}
			for _, name := range jobs {
				job := gpuJob(name, pool, deadlockReplicas, g.policy(150))
				// Every pod goes at the end, so the PodGroup does too: Kubernetes'
				// PodGroup protection keeps a group while any pod points at it.
				job.Spec.RunPolicy.CleanPodPolicy = ptr.To(v1alpha1.CleanPodPolicyAll)
				runs[name] = startRun(t, c, ns, job, slowCreates)
			}
			for _, job := range jobs {
				testutil.Eventually(t, time.Minute, "the PodGroup of "+job, func() bool {
					_, err := dyn.Resource(g.podGroups).Namespace(ns).Get(context.Background(), job, metav1.GetOptions{})
					return err == nil
				})
			}
			var order []string
			deadline := time.Now().Add(3 * time.Minute)
			for len(order) < 2 && time.Now().Before(deadline) {
				for _, job := range jobs {
					pods := jobPods(t, c, ns, job)
					if countPods(pods, running) == deadlockReplicas && !contains(order, job) {
						t.Logf("%s has all %d pods running: %s", job, deadlockReplicas, names(pods))
						order = append(order, job)
						if len(order) == 1 && g.joined != nil {
							g.joined(t, dyn, ns, job)
						}
						exitAll(t, c, ns, job)
					}
				}
				time.Sleep(100 * time.Millisecond)
			}
			if len(order) != 2 {
				t.Fatalf("only %v got all their pods running", order)
			}
			for _, job := range jobs {
				res := runs[job].wait(t)
				if res.Phase != result.PhaseSucceeded || res.Restarts != 0 {
					t.Errorf("%s ended %s/%s with %d restarts: %s", job, res.Phase, res.Reason, res.Restarts, res.Message)
				}
			}
			first, second := binds.of(order[0]), binds.of(order[1])
			for job, b := range map[string][]bind{order[0]: first, order[1]: second} {
				if len(b) != deadlockReplicas {
					t.Fatalf("%s: %d binds seen, want %d", job, len(b), deadlockReplicas)
				}
				// The scheduler binds a placed group's pods in parallel: a partial
				// set exists only while those binds land, never while it waits.
				burst := b[len(b)-1].at.Sub(b[0].at)
				t.Logf("%s: %d pods bound within %s", job, len(b), burst.Round(time.Millisecond))
				if burst > 3*time.Second {
					t.Errorf("%s held some but not all of its pods bound for %s", job, burst.Round(time.Millisecond))
				}
			}
			if second[0].seq < first[len(first)-1].seq {
				t.Errorf("%s got a pod bound (event %d) before %s had all of its own (event %d): the gangs overlapped",
					order[1], second[0].seq, order[0], first[len(first)-1].seq)
			}
			for _, job := range jobs {
				testutil.Eventually(t, 10*time.Second, "the PodGroup of "+job+" removed", func() bool {
					_, err := dyn.Resource(g.podGroups).Namespace(ns).Get(context.Background(), job, metav1.GetOptions{})
					return apierrors.IsNotFound(err)
				})
			}
		})
	}
}

// A gang that can never fit: its pods stay Pending, bound to nothing, while
// the scheduler says why; at scheduleTimeoutSeconds the run ends Transient
// (exit 12) Unschedulable with that message and leaves nothing. It runs as
// deploy/'s ServiceAccount: the Role is enough.
func TestRealGangThatCanNeverFitEndsUnschedulableAndLeavesNothing(t *testing.T) {
	c := cluster.Get(t)
	dyn := dynamicClient(t, c)
	for _, g := range realGangs {
		t.Run(string(g.kind), func(t *testing.T) {
			pool := "toosmall-" + string(g.kind)
			ns := g.setUp(t, c, pool, 1, 2)
			kubeconfig := applyDeploy(t, c, ns)
			const timeout = 5
			job := gpuJob("big", pool, 3, g.policy(timeout))
			binds := watchBinds(t, c, ns)
			started := time.Now()
			res := startRun(t, c, ns, job, func(cfg *executor.Config) { cfg.Kubeconfig = kubeconfig }).wait(t)
			took := time.Since(started)
			t.Logf("ended after %s: %s/%s: %s", took.Round(time.Millisecond), res.Phase, res.Reason, res.Message)
			if res.Phase != result.PhaseTransient || res.Reason != result.ReasonUnschedulable || res.Phase.ExitCode() != 12 {
				t.Fatalf("got %s/%s (exit %d), want Transient/Unschedulable (exit 12)", res.Phase, res.Reason, res.Phase.ExitCode())
			}
			if took > (timeout+30)*time.Second {
				t.Errorf("took %s, more than scheduleTimeoutSeconds + 30s", took.Round(time.Second))
			}
			for _, says := range g.says {
				if !strings.Contains(res.Message, says) {
					t.Errorf("message %q does not pass on the scheduler's gang message (%q)", res.Message, says)
				}
			}
			if b := binds.of("big"); len(b) != 0 {
				t.Errorf("%d of the gang's pods were bound, want none", len(b))
			}
			pods, err := c.Client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: v1alpha1.LabelJobName + "=big"})
			if err != nil {
				t.Fatal(err)
			}
			svcs, err := c.Client.CoreV1().Services(ns).List(context.Background(), metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if len(pods.Items) != 0 || len(svcs.Items) != 0 {
				t.Errorf("left behind %d pods and %d services", len(pods.Items), len(svcs.Items))
			}
			testutil.Eventually(t, 10*time.Second, "the PodGroup removed", func() bool {
				list, err := dyn.Resource(g.podGroups).Namespace(ns).List(context.Background(), metav1.ListOptions{})
				return err == nil && len(list.Items) == 0
			})
		})
	}
}

// checkJoinedTheirGroup reads job's PodGroup and pods as the API server holds
// them: the typed Pod of trainstep's k8s.io/api has no schedulingGroup.
func checkJoinedTheirGroup(t *testing.T, dyn dynamic.Interface, ns, job string) {
	t.Helper()
	ctx := context.Background()
	pg, err := dyn.Resource(gang.KubernetesPodGroups).Namespace(ns).Get(ctx, job, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n, _, _ := unstructured.NestedInt64(pg.Object, "spec", "schedulingPolicy", "gang", "minCount"); n != deadlockReplicas {
		t.Errorf("PodGroup %s minCount %d, want %d", job, n, deadlockReplicas)
	}
	if pg.GetLabels()[v1alpha1.LabelJobName] != job {
		t.Errorf("PodGroup %s labels %v", job, pg.GetLabels())
	}
	pods, err := dyn.Resource(corev1.SchemeGroupVersion.WithResource("pods")).Namespace(ns).List(ctx,
		metav1.ListOptions{LabelSelector: v1alpha1.LabelJobName + "=" + job})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if g, _, _ := unstructured.NestedString(p.Object, "spec", "schedulingGroup", "podGroupName"); g != job {
			t.Errorf("pod %s: spec.schedulingGroup.podGroupName %q, want %s", p.GetName(), g, job)
		}
	}
}

// bind is one pod of a job seen bound to a node for the first time, at
// position seq in the namespace's watch.
type bind struct {
	pod string
	seq int
	at  time.Time
}

// bindLog records, from a watch of a namespace's pods, each pod's first bind.
type bindLog struct {
	mu    sync.Mutex
	seen  map[string]bool // pod UIDs already bound
	binds map[string][]bind
}

func (l *bindLog) of(job string) []bind {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]bind(nil), l.binds[job]...)
}

// watchBinds watches ns's pods until the test ends.
func watchBinds(t *testing.T, c *cluster.Cluster, ns string) *bindLog {
	t.Helper()
	l := &bindLog{seen: map[string]bool{}, binds: map[string][]bind{}}
	watchPods(t, c, ns, func(seq int, ev watch.Event, pod *corev1.Pod) {
		if ev.Type == watch.Deleted || pod.Spec.NodeName == "" {
			return
		}
		l.mu.Lock()
		defer l.mu.Unlock()
		if !l.seen[string(pod.UID)] {
			l.seen[string(pod.UID)] = true
			job := pod.Labels[v1alpha1.LabelJobName]
			l.binds[job] = append(l.binds[job], bind{pod: pod.Name, seq: seq, at: time.Now()})
		}
	})
	return l
}

// watchPods hands each event of a watch of ns's pods, with its position in
// the watch, to seen, until the test ends.
func watchPods(t *testing.T, c *cluster.Cluster, ns string, seen func(seq int, ev watch.Event, pod *corev1.Pod)) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w, err := c.Client.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		seq := 0
		for ev := range w.ResultChan() {
			seq++
			if pod, ok := ev.Object.(*corev1.Pod); ok && ev.Type != watch.Error {
				seen(seq, ev, pod)
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		w.Stop()
		<-done
	})
}

func dynamicClient(t *testing.T, c *cluster.Cluster) dynamic.Interface {
	t.Helper()
	dyn, err := dynamic.NewForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	return dyn
}

// applyDeploy creates deploy/'s ServiceAccount, Role and RoleBinding in ns
// and returns a kubeconfig of that ServiceAccount.
func applyDeploy(t *testing.T, c *cluster.Cluster, ns string) string {
	t.Helper()
	var sa corev1.ServiceAccount
	var role rbacv1.Role
	var binding rbacv1.RoleBinding
	for file, into := range map[string]any{"serviceaccount.yaml": &sa, "role.yaml": &role, "rolebinding.yaml": &binding} {
		data, err := os.ReadFile(filepath.Join("..", "..", "deploy", file))
		if err != nil {
			t.Fatal(err)
		}
		if err := yaml.UnmarshalStrict(data, into); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
	}
	ctx := context.Background()
	if _, err := c.Client.CoreV1().ServiceAccounts(ns).Create(ctx, &sa, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Client.RbacV1().Roles(ns).Create(ctx, &role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding.Subjects[0].Namespace = ns
	if _, err := c.Client.RbacV1().RoleBindings(ns).Create(ctx, &binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return c.KubeconfigForToken(t, c.ServiceAccountToken(t, ns, sa.Name), ns)
}

// A high-priority gang job arrives while a low-priority gang job fills the
// pool: the scheduler preempts some of the low job's pods for room, and the
// low job goes as a whole — its next attempt waits, all of it Pending, as
// one gang, until the high job ended, then runs. Under the default failure
// rules the preemption costs it no restart.
func TestRealGangHigherPriorityJobPreemptsTheLowerAsAWhole(t *testing.T) {
	c := cluster.Get(t)
	priorityClass(t, c, "real-gang-low", 100)
	priorityClass(t, c, "real-gang-high", 1000)
	for _, g := range realGangs {
		t.Run(string(g.kind), func(t *testing.T) {
			pool := "prio-" + string(g.kind)
			ns := g.setUp(t, c, pool, 1, 4)
			binds := watchBinds(t, c, ns)
			// Kueue preempts by evicting a Workload, not by the scheduler's
			// Preempted event.
			evictions := watchKueueEvictions(t, c, ns)
			lowJob := gpuJob("low", pool, 4, &v1alpha1.SchedulingPolicy{Gang: g.kind, Queue: g.queue, PriorityClass: "real-gang-low", ScheduleTimeoutSeconds: ptr.To[int32](600)})
			lowJob.Spec.RunPolicy.CleanPodPolicy = ptr.To(v1alpha1.CleanPodPolicyAll)
			low := startRun(t, c, ns, lowJob)
			testutil.Eventually(t, time.Minute, "4 running pods of the low job", func() bool { return countPods(jobPods(t, c, ns, "low"), running) == 4 })
			highJob := gpuJob("high", pool, 2, &v1alpha1.SchedulingPolicy{Gang: g.kind, Queue: g.queue, PriorityClass: "real-gang-high"})
			highJob.Spec.RunPolicy.CleanPodPolicy = ptr.To(v1alpha1.CleanPodPolicyAll)
			high := startRun(t, c, ns, highJob)
			testutil.Eventually(t, 2*time.Minute, "2 running pods of the high job", func() bool { return countPods(jobPods(t, c, ns, "high"), running) == 2 })
			// Every replica of the low job recreated at a later attempt and
			// held by the gang: none bound while only 2 of its 4 fit.
			testutil.Eventually(t, time.Minute, "the low job's next attempt, all of it waiting", func() bool {
				pods := jobPods(t, c, ns, "low")
				return len(pods) == 4 && countPods(pods, func(p *corev1.Pod) bool {
					return p.Labels[v1alpha1.LabelJobAttempt] == "0" || p.Spec.NodeName != ""
				}) == 0
			})
			rebindsBefore := len(binds.of("low"))
			exitAll(t, c, ns, "high")
			if res := high.wait(t); res.Phase != result.PhaseSucceeded {
				t.Fatalf("high ended %s/%s: %s", res.Phase, res.Reason, res.Message)
			}
			// The schedulers place the group again as soon as the high
			// job's pods end (scheduler-plugins on its controller's PodGroup
			// update); a minute leaves room for a loaded machine.
			highEnded := time.Now()
			testutil.Eventually(t, time.Minute, "4 running pods of the low job again", func() bool { return countPods(jobPods(t, c, ns, "low"), running) == 4 })
			t.Logf("the low job ran again %s after the high job ended", time.Since(highEnded).Round(100*time.Millisecond))
			exitAll(t, c, ns, "low")
			res := low.wait(t)
			preempted, again := preemptions(t, c, ns, "low")
			if res.Phase != result.PhaseSucceeded || res.Restarts > int32(again) {
				t.Errorf("low ended %s/%s with %d restarts, want Succeeded with 0 (a preemption is not the job's fault; %d pods preempted again by name): %s",
					res.Phase, res.Reason, res.Restarts, again, res.Message)
			}
			preempted += len(evictions.of("low"))
			if preempted == 0 {
				t.Error("no pod of the low job was preempted (no Preempted event, no Kueue eviction): the test did not do what it claims")
			}
			lowBinds, highBinds := binds.of("low"), binds.of("high")
			// Under Kueue too the next attempt runs once: it is a pod group,
			// and a Workload, of its own, which the garbage collector leaves
			// alone when it removes the evicted attempt's.
			if rebindsBefore != 4 || len(lowBinds) != 8 {
				t.Fatalf("low job: %d binds before the high job ended, %d in all; want 4 and 8 (the first attempt's, then the next one's)", rebindsBefore, len(lowBinds))
			}
			// The next attempt binds its 4 pods as a group.
			burst := lowBinds[7].at.Sub(lowBinds[4].at)
			t.Logf("%d of the low job's pods preempted; its next attempt: 4 pods bound within %s, after the high job's %d binds", preempted, burst.Round(time.Millisecond), len(highBinds))
			if burst > 3*time.Second {
				t.Errorf("the low job's next attempt held some but not all of its pods bound for %s", burst.Round(time.Millisecond))
			}
			if len(highBinds) == 0 || lowBinds[4].seq < highBinds[len(highBinds)-1].seq {
				t.Errorf("the low job's next attempt got a pod bound before the high job had all of its own")
			}
		})
	}
}
