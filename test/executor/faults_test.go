package executor_test

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/trainstep/trainstep/internal/testutil"
	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/frameworks/tensorflow"
	"github.com/trainstep/trainstep/pkg/result"
	"github.com/trainstep/trainstep/test/cluster"
)

// uidHistory watches a job's pods and remembers, per pod name, every UID
// seen alive and the most instances alive at once.
type uidHistory struct {
	mu       sync.Mutex
	uids     map[string]map[types.UID]bool
	live     map[string]map[types.UID]bool
	mostLive map[string]int
}

func watchUIDs(t testing.TB, c *cluster.Cluster, ns, job string) *uidHistory {
	t.Helper()
	h := &uidHistory{uids: map[string]map[types.UID]bool{}, live: map[string]map[types.UID]bool{}, mostLive: map[string]int{}}
	// An informer, not a bare watch: it lists again after a dropped watch,
	// so no pod goes unseen under load.
	factory := informers.NewSharedInformerFactoryWithOptions(c.Client, 0, informers.WithNamespace(ns),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = v1alpha1.LabelJobName + "=" + job }))
	record := func(obj any, deleted bool) {
		if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj, deleted = tomb.Obj, true
		}
		pod, ok := obj.(*corev1.Pod)
		if !ok {
			return
		}
		h.mu.Lock()
		defer h.mu.Unlock()
		if h.uids[pod.Name] == nil {
			h.uids[pod.Name], h.live[pod.Name] = map[types.UID]bool{}, map[types.UID]bool{}
		}
		h.uids[pod.Name][pod.UID] = true
		if deleted || pod.DeletionTimestamp != nil {
			delete(h.live[pod.Name], pod.UID)
		} else {
			h.live[pod.Name][pod.UID] = true
		}
		h.mostLive[pod.Name] = max(h.mostLive[pod.Name], len(h.live[pod.Name]))
	}
	inf := factory.Core().V1().Pods().Informer()
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { record(obj, false) },
		UpdateFunc: func(_, obj any) { record(obj, false) },
		DeleteFunc: func(obj any) { record(obj, true) },
	}); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	factory.Start(stop)
	if !cache.WaitForCacheSync(stop, inf.HasSynced) {
		t.Fatal("the test's pod informer did not sync")
	}
	return h
}

// duplicates names every pod name that had more than one UID, or more than
// one live instance at a time.
func (h *uidHistory) duplicates() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for name, uids := range h.uids {
		if len(uids) > 1 || h.mostLive[name] > 1 {
			out = append(out, name)
		}
	}
	return out
}

func (h *uidHistory) names() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.uids)
}

func readOutput(t testing.TB, dir, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatalf("output %s: %v", name, err)
	}
	return string(b)
}

// A signal ends the run Terminated whenever it comes: during the preflight,
// while the informers sync, in the middle of the creation burst. Nothing of
// the job is left, as a live List shows.
func TestSIGTERMAtAnyMomentEndsTerminatedAndLeavesNothing(t *testing.T) {
	t.Parallel()
	c := cluster.Get(t)
	cases := []struct {
		name    string
		workers int32
		// signalAt says, for each request, whether to send SIGTERM now; the
		// request is held until the signal went.
		signalAt func(call cluster.Call) bool
	}{
		{"preflight", 4, func(call cluster.Call) bool { return call.Resource == "selfsubjectrulesreviews" }},
		{"informer sync", 4, func(call cluster.Call) bool { return call.Verb == "list" && call.Resource == "pods" }},
		// The create of TF_CONFIG's cluster ConfigMap lands after the signal.
		{"cluster ConfigMap", 4, func(call cluster.Call) bool { return call.Verb == "create" && call.Resource == "configmaps" }},
		{"creation burst", 256, func(call cluster.Call) bool {
			return call.Verb == "create" && call.Resource == "pods" && call.Count == 64
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ns := c.Namespace(t)
			proxy := c.FaultProxy(t)
			job := newJob("stop", v1alpha1.FrameworkTensorFlow).replicas(worker, tc.workers, nil)
			signalled, started := make(chan struct{}), make(chan struct{})
			var once sync.Once
			var p *process
			proxy.SetFault(func(_ *http.Request, call cluster.Call) cluster.Fault {
				if !tc.signalAt(call) {
					return cluster.Fault{}
				}
				<-started
				once.Do(func() {
					_ = p.cmd.Process.Signal(syscall.SIGTERM)
					close(signalled)
				})
				return cluster.Fault{Hold: signalled}
			})
			p = startBinary(t, "run", "-f", writeFile(t, job.yaml(t)), "--kubeconfig", proxy.Kubeconfig, "-n", ns)
			close(started)
			code := p.wait(t, 2*time.Minute)
			select {
			case <-signalled:
			default:
				t.Fatalf("the run ended (exit %d) before the moment to signal came; stderr:\n%s", code, p.stderr)
			}
			if code != result.ExitTerminated {
				t.Errorf("exit code %d, want %d", code, result.ExitTerminated)
			}
			if phase := readOutput(t, p.outputsDir, "phase"); phase != "Terminated" {
				t.Errorf("phase %q, want Terminated", phase)
			}
			if pods, svcs := listPods(t, c, ns, "stop"), listServices(t, c, ns, "stop"); len(pods)+len(svcs) != 0 {
				t.Errorf("a live List finds %d pods and %d services of the job", len(pods), len(svcs))
			}
			_, err := c.Client.CoreV1().ConfigMaps(ns).Get(context.Background(), tensorflow.ClusterConfigMapName("stop"), metav1.GetOptions{})
			if !apierrors.IsNotFound(err) {
				t.Errorf("the job's cluster ConfigMap: got error %v, want NotFound", err)
			}
			if n := proxy.Count("create", "pods"); tc.name == "creation burst" && (n < 64 || n >= 256) {
				t.Errorf("%d pod creates reached the proxy; the signal should have come in the middle of the burst", n)
			}
		})
	}
}

// Two runs of one job started together: one writes, the other waits for
// the lease; when the writer is killed, the other takes over within the
// lease's duration and re-attaches. No replica ever has two live pods.
func TestTwoRunsOfOneJobHaveOneWriter(t *testing.T) {
	t.Parallel()
	c := cluster.Get(t)
	ns := c.Namespace(t)
	owners := []*corev1.Pod{ownerPod(t, c, ns, "step-a"), ownerPod(t, c, ns, "step-b")}
	job := newJob("twin", v1alpha1.FrameworkTensorFlow).replicas(ps, 1, nil).replicas(worker, 3, nil)
	file := writeFile(t, job.yaml(t))
	history := watchUIDs(t, c, ns, "twin")
	const leaseDuration = 4 * time.Second
	var runs []*process
	for _, o := range owners {
		runs = append(runs, startBinary(t, "run", "-f", file, "--kubeconfig", c.Kubeconfig, "-n", ns,
			"--owner-pod", o.Name, "--owner-uid", string(o.UID), "--lease-duration", leaseDuration.String()))
	}
	waitRunning(t, c, ns, "twin", 4)
	holder := -1
	testutil.Eventually(t, 30*time.Second, "one run to hold the lease and the other to wait", func() (bool, error) {
		for i, p := range runs {
			if strings.Contains(p.stderr.String(), "holding the job's lease") && strings.Contains(runs[1-i].stderr.String(), "holds its lease; waiting") {
				holder = i
				return true, nil
			}
		}
		return false, nil
	})
	waiter := 1 - holder
	for _, p := range livePods(t, c, ns, "twin") {
		if len(p.OwnerReferences) != 1 || p.OwnerReferences[0].UID != owners[holder].UID {
			t.Errorf("%s is owned by %v; only the lease holder may create", p.Name, p.OwnerReferences)
		}
	}
	before := livePods(t, c, ns, "twin")
	_ = runs[holder].cmd.Process.Kill()
	runs[holder].wait(t, 10*time.Second)
	killed := time.Now()
	testutil.Eventually(t, leaseDuration+20*time.Second, "the waiting run to take over", func() (bool, error) {
		return strings.Contains(runs[waiter].stderr.String(), "holding the job's lease"), nil
	})
	if took := time.Since(killed); took > leaseDuration+5*time.Second {
		t.Errorf("took over %s after the kill; the lease lasts %s", took.Round(100*time.Millisecond), leaseDuration)
	}
	testutil.Eventually(t, time.Minute, "owner references moved to the new writer", func() (bool, error) {
		for _, p := range livePods(t, c, ns, "twin") {
			if len(p.OwnerReferences) != 1 || p.OwnerReferences[0].UID != owners[waiter].UID {
				return false, nil
			}
		}
		return true, nil
	})
	for name, pod := range livePods(t, c, ns, "twin") {
		if before[name].UID != pod.UID {
			t.Errorf("%s was replaced on take-over, want it re-attached", name)
		}
	}
	patchAnnotations(t, c, ns, "twin-worker-0", map[string]string{exitAfter: "0s", exitCode: "0"})
	if code := runs[waiter].wait(t, time.Minute); code != 0 {
		t.Errorf("the run that took over exited %d; stderr:\n%s", code, runs[waiter].stderr)
	}
	if d := history.duplicates(); len(d) > 0 {
		t.Errorf("replicas with more than one pod: %v", d)
	}
}

// A run killed in the middle of its creation burst leaves some replicas
// created and some not; the next run of the job creates only the missing
// ones, keeps every live pod, and counts no restart.
func TestSIGKILLDuringTheCreationBurstThenRerunCreatesEachReplicaOnce(t *testing.T) {
	t.Parallel()
	c := cluster.Get(t)
	ns := c.Namespace(t)
	owners := []*corev1.Pod{ownerPod(t, c, ns, "step-1"), ownerPod(t, c, ns, "step-2")}
	const workers = 128
	job := newJob("burst", v1alpha1.FrameworkTensorFlow).replicas(ps, 1, nil).replicas(worker, workers, nil)
	file := writeFile(t, job.yaml(t))
	history := watchUIDs(t, c, ns, "burst")
	proxy := c.FaultProxy(t)
	var once sync.Once
	var first *process
	started := make(chan struct{})
	// The kill waits, at the 40th create, until a pod exists: creates
	// still unanswered when the process dies are cancelled, and on a busy
	// machine none of the first 39 may have landed yet.
	someCreated := func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		pods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: v1alpha1.LabelJobName + "=burst"})
		return err == nil && len(pods.Items) > 0
	}
	proxy.SetFault(func(_ *http.Request, call cluster.Call) cluster.Fault {
		if call.Verb == "create" && call.Resource == "pods" && call.Count == 40 {
			<-started
			for deadline := time.Now().Add(30 * time.Second); !someCreated() && time.Now().Before(deadline); {
				time.Sleep(20 * time.Millisecond)
			}
			once.Do(func() { _ = first.cmd.Process.Kill() })
		}
		return cluster.Fault{}
	})
	args := func(o *corev1.Pod, kubeconfig string) []string {
		return []string{"run", "-f", file, "--kubeconfig", kubeconfig, "-n", ns, "--owner-pod", o.Name, "--owner-uid", string(o.UID), "--lease-duration", "2s"}
	}
	first = startBinary(t, args(owners[0], proxy.Kubeconfig)...)
	close(started)
	first.wait(t, time.Minute)
	time.Sleep(time.Second) // creates in flight at the kill land
	before := livePods(t, c, ns, "burst")
	if len(before) == 0 || len(before) >= workers+1 {
		t.Fatalf("%d of %d pods exist after the kill; the kill should have come in the middle of the burst", len(before), workers+1)
	}
	t.Logf("%d of %d pods existed when the first run was killed", len(before), workers+1)

	second := startBinary(t, args(owners[1], c.Kubeconfig)...)
	waitRunning(t, c, ns, "burst", workers+1)
	after := livePods(t, c, ns, "burst")
	for name, pod := range before {
		if after[name].UID != pod.UID {
			t.Errorf("%s was replaced by the second run, want it kept", name)
		}
	}
	patchAnnotations(t, c, ns, "burst-worker-0", map[string]string{exitAfter: "0s", exitCode: "0"})
	if code := second.wait(t, 2*time.Minute); code != 0 {
		t.Fatalf("second run exited %d; stderr:\n%s", code, second.stderr)
	}
	if r := readOutput(t, second.outputsDir, "restarts"); r != "0" {
		t.Errorf("restarts %q, want 0", r)
	}
	if d := history.duplicates(); len(d) > 0 {
		t.Errorf("replicas with more than one pod: %v", d)
	}
	if n := history.names(); n != workers+1 {
		t.Errorf("%d pod names seen, want %d", n, workers+1)
	}
}

// The API server going away for 10 s while a 16-replica job runs changes
// nothing: the job succeeds with the pods it had. Away past --api-timeout,
// the run ends Transient and leaves the replicas to the next run, which
// re-attaches to them.
func TestAPIServerOutage(t *testing.T) {
	t.Parallel()
	c := cluster.Get(t)
	t.Run("ridden out", func(t *testing.T) {
		ns := c.Namespace(t)
		proxy := c.FaultProxy(t)
		job := newJob("outage", v1alpha1.FrameworkTensorFlow).replicas(ps, 2, nil).replicas(worker, 14, nil)
		history := watchUIDs(t, c, ns, "outage")
		p := startBinary(t, "run", "-f", writeFile(t, job.yaml(t)), "--kubeconfig", proxy.Kubeconfig, "-n", ns, "--api-timeout", "60s")
		waitRunning(t, c, ns, "outage", 16)
		proxy.Down()
		time.Sleep(10 * time.Second)
		proxy.Up(t)
		patchAnnotations(t, c, ns, "outage-worker-0", map[string]string{exitAfter: "0s", exitCode: "0"})
		if code := p.wait(t, 2*time.Minute); code != 0 {
			t.Fatalf("exit %d after the outage, want 0; stderr:\n%s", code, p.stderr)
		}
		if n := proxy.Count("create", "pods") - proxy.DryRuns("create", "pods"); n != 16 {
			t.Errorf("%d pod creates, want 16", n)
		}
		if d := history.duplicates(); len(d) > 0 {
			t.Errorf("replicas with more than one pod: %v", d)
		}
	})
	t.Run("past the API timeout", func(t *testing.T) {
		ns := c.Namespace(t)
		proxy := c.FaultProxy(t)
		job := newJob("longoutage", v1alpha1.FrameworkTensorFlow).replicas(worker, 4, nil)
		file := writeFile(t, job.yaml(t))
		p := startBinary(t, "run", "-f", file, "--kubeconfig", proxy.Kubeconfig, "-n", ns, "--api-timeout", "5s", "--lease-duration", "3s")
		waitRunning(t, c, ns, "longoutage", 4)
		before := livePods(t, c, ns, "longoutage")
		proxy.Down()
		code := p.wait(t, time.Minute)
		if code != result.ExitTransient {
			t.Fatalf("exit %d while the API server is away, want %d; stderr:\n%s", code, result.ExitTransient, p.stderr)
		}
		proxy.Up(t)
		next := startBinary(t, "run", "-f", file, "--kubeconfig", c.Kubeconfig, "-n", ns, "--lease-duration", "3s")
		testutil.Eventually(t, time.Minute, "the next run to re-attach", func() (bool, error) {
			return strings.Contains(next.stderr.String(), "re-attached"), nil
		})
		for name, pod := range livePods(t, c, ns, "longoutage") {
			if before[name].UID != pod.UID {
				t.Errorf("%s was replaced, want it re-attached", name)
			}
		}
		patchAnnotations(t, c, ns, "longoutage-worker-0", map[string]string{exitAfter: "0s", exitCode: "0"})
		if code := next.wait(t, time.Minute); code != 0 {
			t.Errorf("the next run exited %d; stderr:\n%s", code, next.stderr)
		}
	})
}

// Throttling (429) and conflicts (409) during the launch slow it down but
// never make it create a replica twice.
func TestThrottlingAndConflictsDuringLaunchCreateNoDuplicate(t *testing.T) {
	t.Parallel()
	c := cluster.Get(t)
	ns := c.Namespace(t)
	proxy := c.FaultProxy(t)
	const workers = 48
	job := newJob("storm", v1alpha1.FrameworkTensorFlow).replicas(ps, 1, nil).replicas(worker, workers, nil)
	history := watchUIDs(t, c, ns, "storm")
	var mu sync.Mutex
	injected := map[int]int{}
	proxy.SetFault(func(_ *http.Request, call cluster.Call) cluster.Fault {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case call.Verb == "create" && call.Resource == "pods" && call.Count%5 == 1:
			// The pod is created, the answer is lost: AlreadyExists on the retry.
			injected[http.StatusConflict]++
			return cluster.Fault{Status: http.StatusConflict, ForwardFirst: true}
		case call.Verb == "create" && call.Count%3 == 0:
			injected[http.StatusTooManyRequests]++
			return cluster.Fault{Status: http.StatusTooManyRequests}
		case call.Verb == "patch" && call.Count%4 == 0:
			injected[http.StatusConflict]++
			return cluster.Fault{Status: http.StatusConflict}
		}
		return cluster.Fault{}
	})
	p := startBinary(t, "run", "-f", writeFile(t, job.yaml(t)), "--kubeconfig", proxy.Kubeconfig, "-n", ns)
	waitRunning(t, c, ns, "storm", workers+1)
	proxy.SetFault(nil)
	patchAnnotations(t, c, ns, "storm-worker-0", map[string]string{exitAfter: "0s", exitCode: "0"})
	if code := p.wait(t, 2*time.Minute); code != 0 {
		t.Fatalf("exit %d, want 0; stderr:\n%s", code, p.stderr)
	}
	n := workers + 1
	if creates := proxy.Count("create", "pods"); creates > 2*n+10 {
		t.Errorf("%d pod creates for %d replicas, want at most %d", creates, n, 2*n+10)
	}
	mu.Lock()
	t.Logf("injected: %v; pod creates %d", injected, proxy.Count("create", "pods"))
	if injected[http.StatusTooManyRequests] == 0 || injected[http.StatusConflict] == 0 {
		t.Errorf("the storm injected %v; want both 429s and 409s", injected)
	}
	mu.Unlock()
	if d := history.duplicates(); len(d) > 0 {
		t.Errorf("replicas with more than one pod: %v", d)
	}
	if r := readOutput(t, p.outputsDir, "restarts"); r != "0" {
		t.Errorf("restarts %q, want 0", r)
	}
}
