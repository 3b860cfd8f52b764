package controlplane_test

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/trainstep/trainstep/executor"
	"github.com/trainstep/trainstep/pkg/result"
	"github.com/trainstep/trainstep/test/cluster"
)

// kube-apiserver killed under a running job and started again 5 s later:
// every connection and watch breaks, every informer relists, the Lease is
// taken back. The run ends as it would have, no replica recreated, nothing
// left, within the API timeout of when it would have ended.
func TestAPIServerRestartUnderARunningJob(t *testing.T) {
	c := cluster.Get(t)
	ns := c.Namespace(t)
	const job, workFor = "running", 30 * time.Second
	history := recordPods(t, c, ns, job)
	cfg := config(t, c, ns, psJob(t, job, 2, workFor), "")
	wait := start(t, cfg)
	waitRunning(t, c, ns, job, 3)
	c.RestartAPIServer(t, 5*time.Second)
	o := wait()
	checkEnded(t, c, ns, job, cfg, o, result.PhaseSucceeded, result.ReasonSucceeded, "0")
	if d := history.duplicates(); len(d) > 0 {
		t.Errorf("replicas recreated: %v", d)
	}
	if bound := workFor + apiTimeout + time.Minute; o.took > bound {
		t.Errorf("the run took %s, more than %s", o.took.Round(time.Second), bound)
	}
}

// kube-apiserver killed as the job's first pod is created, while the other
// creates are in flight, and started again 3 s later: every replica is
// created once (a create whose answer was lost is adopted, not repeated)
// and the job succeeds.
func TestAPIServerRestartDuringALaunch(t *testing.T) {
	c := cluster.Get(t)
	ns := c.Namespace(t)
	const job, workers = "launch", 12
	history := recordPods(t, c, ns, job)
	cfg := config(t, c, ns, psJob(t, job, workers, 20*time.Second), "")
	wait := start(t, cfg)
	deadline := time.Now().Add(time.Minute)
	for history.count() == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	c.RestartAPIServer(t, 3*time.Second)
	o := wait()
	checkEnded(t, c, ns, job, cfg, o, result.PhaseSucceeded, result.ReasonSucceeded, "0")
	if d := history.duplicates(); len(d) > 0 {
		t.Errorf("replicas created twice: %v", d)
	}
	if n := history.count(); n != workers+1 {
		t.Errorf("%d pods created, want %d", n, workers+1)
	}
}

// kube-apiserver killed while the teardown deletes the job (its first
// delete, the job-wide Service's, landed) and started again 5 s later: the
// teardown sends its deletes again and confirms with a List that nothing
// is left.
func TestAPIServerRestartDuringATeardown(t *testing.T) {
	c := cluster.Get(t)
	ns := c.Namespace(t)
	const job = "teardown"
	cfg := config(t, c, ns, psJob(t, job, 8, 15*time.Second), "")
	wait := start(t, cfg)
	waitRunning(t, c, ns, job, 9)
	waitGone(t, c, ns, "services", job, 2*time.Minute)
	c.RestartAPIServer(t, 5*time.Second)
	o := wait()
	checkEnded(t, c, ns, job, cfg, o, result.PhaseSucceeded, result.ReasonSucceeded, "0")
}

// kube-apiserver away past the API timeout: the run ends Transient
// (APIServerUnreachable, exit 12) and keeps the replicas for its retry. The
// retry, another step pod, re-attaches while every owner patch it sends is
// answered 503 for 5 s — longer than one write's in-place retries — and
// goes on once they land: the job succeeds from the same replicas, now the
// retry's, with nothing left. (Such errors ended the retry Failed, exit
// 10, every replica left running.)
func TestAPIServerAwayPastTheAPITimeoutLeavesTheJobToTheRetry(t *testing.T) {
	c := cluster.Get(t)
	ns := c.Namespace(t)
	const job = "away"
	history := recordPods(t, c, ns, job)
	manifest := psJob(t, job, 2, 60*time.Second)
	cfg := config(t, c, ns, manifest, "")
	cfg.APITimeout = 10 * time.Second
	owned(t, c, ns, &cfg, "step-1")
	wait := start(t, cfg)
	waitRunning(t, c, ns, job, 3)
	c.KillAPIServer(t)
	first := wait()
	c.StartAPIServer(t)
	if first.res.Phase != result.PhaseTransient || first.res.Reason != result.ReasonAPIUnreachable {
		t.Fatalf("the run ended %s/%s (%s), want Transient/%s", first.res.Phase, first.res.Reason, first.res.Message, result.ReasonAPIUnreachable)
	}
	t.Logf("kube-apiserver away: the run ended Transient %s after it started", first.took.Round(100*time.Millisecond))
	if first.took > time.Minute {
		t.Errorf("the run took %s to give up, with --api-timeout %s", first.took.Round(time.Second), cfg.APITimeout)
	}
	if left := jobObjects(t, c, ns, job); len(left) < 3 {
		t.Fatalf("left for the retry: %v, want the replicas and their objects", left)
	}
	// The pod patches are refused for 5 s from the first one.
	proxy := c.FaultProxy(t)
	var refused atomic.Int32
	var mu sync.Mutex
	var firstPatch time.Time
	proxy.SetFault(func(_ *http.Request, call cluster.Call) cluster.Fault {
		if call.Verb != "patch" || call.Resource != "pods" {
			return cluster.Fault{}
		}
		mu.Lock()
		defer mu.Unlock()
		if firstPatch.IsZero() {
			firstPatch = time.Now()
		}
		if time.Since(firstPatch) < 5*time.Second {
			refused.Add(1)
			return cluster.Fault{Status: http.StatusServiceUnavailable}
		}
		return cluster.Fault{}
	})
	retry := config(t, c, ns, manifest, proxy.Kubeconfig)
	owned(t, c, ns, &retry, "step-2")
	o := start(t, retry)()
	checkEnded(t, c, ns, job, retry, o, result.PhaseSucceeded, result.ReasonSucceeded, "0")
	if refused.Load() == 0 {
		t.Error("no owner patch of the re-attach was refused: the test did not run its case")
	}
	if d := history.duplicates(); len(d) > 0 {
		t.Errorf("replicas recreated: %v", d)
	}
}

// owned makes cfg's run owned by a pod named name, standing for its step
// pod, as the template passes --owner-pod and --owner-uid.
func owned(t testing.TB, c *cluster.Cluster, ns string, cfg *executor.Config, name string) {
	t.Helper()
	pod, err := c.Client.CoreV1().Pods(ns).Create(context.Background(), &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "trainstep:test"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating the step pod %s: %v", name, err)
	}
	cfg.OwnerPod, cfg.OwnerUID = pod.Name, string(pod.UID)
}
