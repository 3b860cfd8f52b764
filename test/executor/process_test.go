package executor_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/trainstep/trainstep/internal/testutil"
	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/result"
	"github.com/trainstep/trainstep/test/cluster"
)

func TestSIGTERMDeletesEveryObjectAndSaysTerminated(t *testing.T) {
	t.Parallel()
	c := cluster.Get(t)
	ns := c.Namespace(t)
	job := newJob("sigterm", v1alpha1.FrameworkTensorFlow).replicas(ps, 2, nil).replicas(worker, 14, nil)

	p := startBinary(t, "run", "-f", writeFile(t, job.yaml(t)), "--kubeconfig", c.Kubeconfig, "-n", ns)
	waitRunning(t, c, ns, "sigterm", 16)
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	code := p.wait(t, time.Minute)

	if code != result.ExitTerminated {
		t.Errorf("exit code %d, want %d; stderr:\n%s", code, result.ExitTerminated, p.stderr)
	}
	if pods, svcs := listPods(t, c, ns, "sigterm"), listServices(t, c, ns, "sigterm"); len(pods)+len(svcs) != 0 {
		t.Errorf("after SIGTERM: %d pods and %d services remain", len(pods), len(svcs))
	}
	if b, _ := os.ReadFile(filepath.Join(p.outputsDir, "phase")); string(b) != "Terminated" {
		t.Errorf("phase output %q, want Terminated", b)
	}
}

// Argo signals a stopped step again within seconds (every reconciliation of
// the workflow), and a second signal ends trainstep at once: the deletes must
// have gone out by then, not wait for the replicas' log streams first.
func TestASecondSignalSoonAfterTheFirstLeavesNothing(t *testing.T) {
	t.Parallel()
	c := cluster.Get(t)
	ns := c.Namespace(t)
	job := newJob("twice", v1alpha1.FrameworkTensorFlow).replicas(ps, 2, nil).replicas(worker, 14, nil)

	p := startBinary(t, "run", "-f", writeFile(t, job.yaml(t)), "--kubeconfig", c.Kubeconfig, "-n", ns)
	waitRunning(t, c, ns, "twice", 16)
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second)
	_ = p.cmd.Process.Signal(syscall.SIGTERM) // it may have exited already
	if code := p.wait(t, time.Minute); code != result.ExitTerminated {
		t.Errorf("exit code %d, want %d; stderr:\n%s", code, result.ExitTerminated, p.stderr)
	}
	testutil.Eventually(t, time.Minute, "every pod and service of the job to go", func() (bool, error) {
		return len(listPods(t, c, ns, "twice"))+len(listServices(t, c, ns, "twice")) == 0, nil
	})
}

func TestSIGKILLedRunIsReattachedByTheNextOne(t *testing.T) {
	t.Parallel()
	c := cluster.Get(t)
	ns := c.Namespace(t)
	first, second := ownerPod(t, c, ns, "step-try-1"), ownerPod(t, c, ns, "step-try-2")
	job := newJob("reattach", v1alpha1.FrameworkTensorFlow).replicas(ps, 1, nil).replicas(worker, 3, nil)
	file := writeFile(t, job.yaml(t))
	args := func(owner *corev1.Pod) []string {
		return []string{"run", "-f", file, "--kubeconfig", c.Kubeconfig, "-n", ns, "--owner-pod", owner.Name, "--owner-uid", string(owner.UID)}
	}

	// Count live replica pods all along: never more than the spec's 4.
	var most atomic.Int32
	stopWatch := watchPodCount(t, c, ns, "reattach", &most)
	defer stopWatch()

	p1 := startBinary(t, append(args(first), "--pending-timeout", "1h")...)
	waitRunning(t, c, ns, "reattach", 4)
	before := livePods(t, c, ns, "reattach")
	_ = p1.cmd.Process.Kill()
	p1.wait(t, 10*time.Second)

	p2 := startBinary(t, args(second)...)
	testutil.Eventually(t, time.Minute, "owner references moved to the second step pod", func() (bool, error) {
		pods := livePods(t, c, ns, "reattach")
		for _, p := range pods {
			if len(p.OwnerReferences) != 1 || p.OwnerReferences[0].UID != second.UID {
				return false, nil
			}
		}
		return len(pods) == 4, nil
	})
	after := livePods(t, c, ns, "reattach")
	for name, pod := range before {
		if after[name].UID != pod.UID {
			t.Errorf("%s was replaced (uid %s → %s), want it re-attached", name, pod.UID, after[name].UID)
		}
	}
	patchAnnotations(t, c, ns, "reattach-worker-0", map[string]string{exitAfter: "0s", exitCode: "0"})
	if code := p2.wait(t, time.Minute); code != 0 {
		t.Errorf("the re-attached run exited %d; stderr:\n%s", code, p2.stderr)
	}
	if n := most.Load(); n > 4 {
		t.Errorf("saw %d live replica pods at once, the spec has 4", n)
	}
}

// watchPodCount records the most live pods of job seen at any moment.
func watchPodCount(t testing.TB, c *cluster.Cluster, ns, job string, most *atomic.Int32) func() {
	ctx, cancel := context.WithCancel(context.Background())
	w, err := c.Client.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{LabelSelector: v1alpha1.LabelJobName + "=" + job})
	if err != nil {
		t.Fatal(err)
	}
	live := map[types.UID]bool{}
	go func() {
		for ev := range w.ResultChan() {
			pod, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			if ev.Type == watch.Deleted || pod.DeletionTimestamp != nil {
				delete(live, pod.UID)
			} else {
				live[pod.UID] = true
			}
			if n := int32(len(live)); n > most.Load() {
				most.Store(n)
			}
		}
	}()
	return func() { cancel(); w.Stop() }
}

func TestDeletingTheOwnerPodGarbageCollectsTheReplicas(t *testing.T) {
	t.Parallel()
	c := cluster.Get(t)
	ns := c.Namespace(t)
	owner := ownerPod(t, c, ns, "step")
	job := newJob("gc", v1alpha1.FrameworkTensorFlow).replicas(ps, 1, nil).replicas(worker, 2, nil)

	p := startBinary(t, "run", "-f", writeFile(t, job.yaml(t)), "--kubeconfig", c.Kubeconfig, "-n", ns,
		"--owner-pod", owner.Name, "--owner-uid", string(owner.UID))
	waitRunning(t, c, ns, "gc", 3)
	// The step container dies with its pod; nothing of trainstep cleans up.
	_ = p.cmd.Process.Kill()
	p.wait(t, 10*time.Second)
	if err := c.Client.CoreV1().Pods(ns).Delete(context.Background(), owner.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 90*time.Second, "the garbage collector to remove every replica and service", func() (bool, error) {
		return len(listPods(t, c, ns, "gc")) == 0 && len(listServices(t, c, ns, "gc")) == 0, nil
	})
}

func TestUnreachableAPIServerIsTransientAfterTheAPITimeout(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there any more
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: gone, cluster: {server: "https://%s", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: abc}}]
contexts: [{name: gone, context: {cluster: gone, user: u, namespace: default}}]
current-context: gone
`, addr)), 0o600); err != nil {
		t.Fatal(err)
	}
	job := newJob("unreachable", v1alpha1.FrameworkTensorFlow).replicas(worker, 1, nil)

	start := time.Now()
	p := startBinary(t, "run", "-f", writeFile(t, job.yaml(t)), "--kubeconfig", kubeconfig, "--api-timeout", "3s")
	code := p.wait(t, time.Minute)

	if code != result.ExitTransient {
		t.Errorf("exit code %d, want %d; stderr:\n%s", code, result.ExitTransient, p.stderr)
	}
	if elapsed := time.Since(start); elapsed < 3*time.Second {
		t.Errorf("gave up after %s, before --api-timeout", elapsed)
	}
	if !strings.Contains(p.stderr.String(), "did not answer") {
		t.Errorf("stderr does not say the API server did not answer:\n%s", p.stderr)
	}
}
