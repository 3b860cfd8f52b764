package executor_test

import (
	"context"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/trainstep/trainstep/executor"
	"github.com/trainstep/trainstep/internal/testutil"
	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/result"
	"github.com/trainstep/trainstep/test/cluster"
)

// The first three DELETEs of a replica being recreated get a 500: the
// delete is sent again until it lands, and the job goes on.
func TestA500OnARecreationsDeleteIsRetried(t *testing.T) {
	t.Parallel()
	c := cluster.Get(t)
	ns := c.Namespace(t)
	proxy := c.FaultProxy(t)
	var failed atomic.Int32
	var faultEnded atomic.Int64
	proxy.SetFault(func(_ *http.Request, call cluster.Call) cluster.Fault {
		if call.Verb == "delete" && call.Resource == "pods" && call.Name == "del500-worker-0" && failed.Load() < 3 {
			if failed.Add(1) == 3 {
				faultEnded.Store(time.Now().UnixNano())
			}
			return cluster.Fault{Status: http.StatusInternalServerError}
		}
		return cluster.Fault{}
	})
	job := newJob("del500", v1alpha1.FrameworkTensorFlow).replicas(ps, 1, nil).replicas(worker, 2, nil).
		restartPolicy(worker, v1alpha1.RestartPolicyExitCode)
	wait := startJob(t, c, ns, job.yaml(t), func(cfg *executor.Config) { cfg.Kubeconfig = proxy.Kubeconfig })
	waitRunning(t, c, ns, "del500", 3)
	first := livePods(t, c, ns, "del500")["del500-worker-0"]
	patchAnnotations(t, c, ns, "del500-worker-0", map[string]string{exitAfter: "0s", exitCode: "137"})
	testutil.Eventually(t, time.Minute, "worker-0 recreated after its deletes failed", func() (bool, error) {
		p, ok := livePods(t, c, ns, "del500")["del500-worker-0"]
		return ok && p.UID != first.UID && p.Status.Phase == corev1.PodRunning, nil
	})
	if took := time.Since(time.Unix(0, faultEnded.Load())); failed.Load() != 3 || took > 30*time.Second {
		t.Errorf("%d DELETEs failed; the replacement ran %s after the last one, want 3 and within 30 s", failed.Load(), took.Round(time.Second))
	}
	patchAnnotations(t, c, ns, "del500-worker-0", map[string]string{exitAfter: "0s", exitCode: "0"})
	out := wait()
	if out.res.Phase != result.PhaseSucceeded || out.res.Restarts != 1 {
		t.Fatalf("phase %s restarts %d (%s), want Succeeded with 1 restart", out.res.Phase, out.res.Restarts, out.res.Message)
	}
}

func createPodQuota(t *testing.T, c *cluster.Cluster, ns string, pods int64) {
	t.Helper()
	quota := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "team-a"},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: *resource.NewQuantity(pods, resource.DecimalSI)}}}
	if _, err := c.Client.CoreV1().ResourceQuotas(ns).Create(context.Background(), quota, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The quota admits nothing until the controller computed its usage.
	testutil.Eventually(t, 30*time.Second, "the quota's usage to be computed", func() (bool, error) {
		q, err := c.Client.CoreV1().ResourceQuotas(ns).Get(context.Background(), "team-a", metav1.GetOptions{})
		return err == nil && q.Status.Used != nil, err
	})
}

// A ResourceQuota with room for 3 of a 4-pod job: trainstep waits and
// says for what; raised after 10 s, the job runs and succeeds. Not raised,
// the step ends Transient (QuotaExceeded) at --pending-timeout and leaves
// what it created for a retry.
func TestAFullQuotaIsWaitedOn(t *testing.T) {
	t.Parallel()
	c := cluster.Get(t)
	t.Run("raised", func(t *testing.T) {
		t.Parallel()
		ns := c.Namespace(t)
		owner := ownerPod(t, c, ns, "step") // events go on the step pod, which counts against the quota too
		createPodQuota(t, c, ns, 4)
		job := newJob("quota", v1alpha1.FrameworkTensorFlow).replicas(ps, 1, nil).replicas(worker, 3, nil)
		core, logs := observer.New(zap.InfoLevel)
		wait := startJob(t, c, ns, job.yaml(t), func(cfg *executor.Config) {
			cfg.Logger, cfg.OwnerPod, cfg.OwnerUID = zap.New(core), owner.Name, string(owner.UID)
		})
		var event *corev1.Event
		testutil.Eventually(t, time.Minute, "a FailedCreate event naming the quota", func() (bool, error) {
			events, err := c.Client.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{FieldSelector: "reason=FailedCreate"})
			if err != nil || len(events.Items) == 0 {
				return false, err
			}
			event = &events.Items[0]
			return true, nil
		})
		if event.Type != corev1.EventTypeWarning || !strings.Contains(event.Message, "waiting for quota") || !strings.Contains(event.Message, "exceeded quota: team-a") {
			t.Errorf("event %s %q, want a Warning naming the quota", event.Type, event.Message)
		}
		time.Sleep(10 * time.Second) // the quota's owner raises it later
		if _, err := c.Client.CoreV1().ResourceQuotas(ns).Patch(context.Background(), "team-a", types.MergePatchType,
			[]byte(`{"spec":{"hard":{"pods":"10"}}}`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		waitRunning(t, c, ns, "quota", 4)
		patchAnnotations(t, c, ns, "quota-worker-0", map[string]string{exitAfter: "0s", exitCode: "0"})
		out := wait()
		if out.res.Phase != result.PhaseSucceeded || out.res.Restarts != 0 {
			t.Fatalf("phase %s restarts %d (%s), want Succeeded with no restart", out.res.Phase, out.res.Restarts, out.res.Message)
		}
		if logs.FilterMessageSnippet("waiting for quota: exceeded quota: team-a").Len() == 0 {
			t.Errorf("no progress line says the job waits for the quota")
		}
	})
	t.Run("not raised", func(t *testing.T) {
		t.Parallel()
		ns := c.Namespace(t)
		createPodQuota(t, c, ns, 3)
		job := newJob("noroom", v1alpha1.FrameworkTensorFlow).replicas(ps, 1, nil).replicas(worker, 3, nil)
		start := time.Now()
		out := runJob(t, c, ns, job.yaml(t), func(cfg *executor.Config) { cfg.PendingTimeout = 15 * time.Second })
		if out.res.Phase != result.PhaseTransient || out.res.Reason != result.ReasonQuotaExceeded || out.res.Phase.ExitCode() != result.ExitTransient {
			t.Fatalf("phase %s reason %s (%s), want Transient QuotaExceeded", out.res.Phase, out.res.Reason, out.res.Message)
		}
		if took := time.Since(start); took > 45*time.Second {
			t.Errorf("ended %s after the start, want about the 15 s pending timeout", took.Round(time.Second))
		}
		if n := len(livePods(t, c, ns, "noroom")); n != 3 {
			t.Errorf("%d pods left, want the 3 the quota admitted, kept for a retry", n)
		}
		if got := out.output(t, "reason"); got != result.ReasonQuotaExceeded {
			t.Errorf("reason output %q", got)
		}
	})
}

// Run A is cut off from the API server; run B takes the Lease and
// re-attaches; A is stopped and its API server comes back: A deletes
// nothing of B's, exits 13 and says why.
func TestARunThatLostItsLeaseDeletesNothingWhenStopped(t *testing.T) {
	t.Parallel()
	c := cluster.Get(t)
	ns := c.Namespace(t)
	owners := []*corev1.Pod{ownerPod(t, c, ns, "step-a"), ownerPod(t, c, ns, "step-b")}
	job := newJob("fence", v1alpha1.FrameworkTensorFlow).replicas(ps, 1, nil).replicas(worker, 3, nil)
	file := writeFile(t, job.yaml(t))
	proxy := c.FaultProxy(t)
	args := func(o *corev1.Pod, kubeconfig string) []string {
		return []string{"run", "-f", file, "--kubeconfig", kubeconfig, "-n", ns, "--owner-pod", o.Name, "--owner-uid", string(o.UID),
			"--lease-duration", "3s", "--api-timeout", "5m", "--termination-grace", "20s"}
	}
	a := startBinary(t, args(owners[0], proxy.Kubeconfig)...)
	waitRunning(t, c, ns, "fence", 4)
	proxy.Down()
	b := startBinary(t, args(owners[1], c.Kubeconfig)...)
	testutil.Eventually(t, time.Minute, "run B to take the job over", func() (bool, error) {
		pods := livePods(t, c, ns, "fence")
		for _, p := range pods {
			if len(p.OwnerReferences) != 1 || p.OwnerReferences[0].UID != owners[1].UID {
				return false, nil
			}
		}
		return len(pods) == 4 && strings.Contains(b.stderr.String(), "holding the job's lease"), nil
	})
	before := livePods(t, c, ns, "fence")
	if err := a.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	proxy.Up(t)
	if code := a.wait(t, time.Minute); code != result.ExitTerminated {
		t.Fatalf("run A exited %d, want %d; stderr:\n%s", code, result.ExitTerminated, a.stderr)
	}
	if msg := readOutput(t, a.outputsDir, "phase"); msg != string(result.PhaseTerminated) {
		t.Errorf("run A's phase %q", msg)
	}
	if !strings.Contains(a.stdout.String(), "another run of the job took it over") || !strings.Contains(a.stdout.String(), "nothing was deleted") {
		t.Errorf("run A's result does not say why it deleted nothing: %s", a.stdout)
	}
	after := livePods(t, c, ns, "fence")
	for name, pod := range before {
		if after[name].UID != pod.UID {
			t.Errorf("%s: uid %s → %s; run A must not touch run B's pods", name, pod.UID, after[name].UID)
		}
	}
	if n := proxy.Count("delete", "pods"); n != 0 {
		t.Errorf("run A sent %d pod DELETEs", n)
	}
	patchAnnotations(t, c, ns, "fence-worker-0", map[string]string{exitAfter: "0s", exitCode: "0"})
	if code := b.wait(t, time.Minute); code != 0 {
		t.Errorf("run B exited %d; stderr:\n%s", code, b.stderr)
	}
}

// Every DELETE answered 503 for 5 s while a stopped run tears down: the
// deletes are sent again and everything goes within the grace period. When
// the faults outlast it, the outputs name what is left, as a live List
// shows it.
func TestA503StormDuringTeardown(t *testing.T) {
	t.Parallel()
	c := cluster.Get(t)
	for _, tc := range []struct {
		name   string
		faults time.Duration
		grace  time.Duration
	}{
		{"shorter than the grace period", 5 * time.Second, 30 * time.Second},
		{"longer than the grace period", time.Hour, 8 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ns := c.Namespace(t)
			proxy := c.FaultProxy(t)
			job := newJob("storm503", v1alpha1.FrameworkTensorFlow).replicas(ps, 1, nil).replicas(worker, 3, nil)
			signals := make(chan os.Signal, 1)
			wait := startJob(t, c, ns, job.yaml(t), func(cfg *executor.Config) {
				cfg.Kubeconfig, cfg.Signals, cfg.TerminationGrace = proxy.Kubeconfig, signals, tc.grace
			})
			waitRunning(t, c, ns, "storm503", 4)
			until := time.Now().Add(tc.faults)
			proxy.SetFault(func(_ *http.Request, call cluster.Call) cluster.Fault {
				if call.Verb == "delete" && time.Now().Before(until) {
					return cluster.Fault{Status: http.StatusServiceUnavailable}
				}
				return cluster.Fault{}
			})
			stopped := time.Now()
			signals <- syscall.SIGTERM
			out := wait()
			if out.res.Phase != result.PhaseTerminated {
				t.Fatalf("phase %s (%s), want Terminated", out.res.Phase, out.res.Message)
			}
			pods, svcs := listPods(t, c, ns, "storm503"), listServices(t, c, ns, "storm503")
			if tc.faults < tc.grace {
				if len(pods)+len(svcs) != 0 || !strings.Contains(out.res.Message, "every object of the job was deleted") {
					t.Errorf("%d pods and %d services left, message %q; want none and the outputs saying so", len(pods), len(svcs), out.res.Message)
				}
				if took := time.Since(stopped); took > tc.grace {
					t.Errorf("the teardown took %s, longer than the %s grace", took.Round(time.Second), tc.grace)
				}
				return
			}
			if strings.Contains(out.res.Message, "every object of the job was deleted") || !strings.Contains(out.res.Message, "still there when the teardown ended") {
				t.Errorf("message %q, want it to name what is left", out.res.Message)
			}
			for _, p := range pods {
				if !strings.Contains(out.res.Message, "pod/"+p.Name) {
					t.Errorf("pod %s is left but not named in %q", p.Name, out.res.Message)
				}
			}
			if len(pods) == 0 {
				t.Error("no pod is left although every delete failed")
			}
		})
	}
}

// A job that ended by itself is torn down within --cleanup-timeout, not
// the grace period of a stopped step: every DELETE answered 503 for longer
// than the grace period still leaves nothing behind. A signal during that
// teardown leaves it the grace period, and the outputs name what is left.
func TestTheTeardownOfAnEndedJobOutlastsTheGracePeriod(t *testing.T) {
	t.Parallel()
	c := cluster.Get(t)
	const grace = 3 * time.Second
	for _, tc := range []struct {
		name   string
		faults time.Duration
		signal bool
	}{
		{"deletes failing three times the grace", 3 * grace, false},
		{"a signal during the teardown", time.Hour, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ns := c.Namespace(t)
			proxy := c.FaultProxy(t)
			all := v1alpha1.CleanPodPolicyAll
			job := newJob("ended", v1alpha1.FrameworkTensorFlow).replicas(ps, 1, nil).replicas(worker, 3, nil).
				with(func(j *v1alpha1.TrainJob) { j.Spec.RunPolicy.CleanPodPolicy = &all })
			signals := make(chan os.Signal, 1)
			wait := startJob(t, c, ns, job.yaml(t), func(cfg *executor.Config) {
				cfg.Kubeconfig, cfg.Signals = proxy.Kubeconfig, signals
				cfg.TerminationGrace, cfg.CleanupTimeout = grace, 2*time.Minute
			})
			waitRunning(t, c, ns, "ended", 4)
			var faultsFrom time.Time
			var mu sync.Mutex
			proxy.SetFault(func(_ *http.Request, call cluster.Call) cluster.Fault {
				mu.Lock()
				defer mu.Unlock()
				if call.Verb != "delete" {
					return cluster.Fault{}
				}
				if faultsFrom.IsZero() {
					faultsFrom = time.Now()
				}
				if time.Since(faultsFrom) < tc.faults {
					return cluster.Fault{Status: http.StatusServiceUnavailable}
				}
				return cluster.Fault{}
			})
			patchAnnotations(t, c, ns, "ended-worker-0", map[string]string{exitAfter: "0s", exitCode: "0"})
			var signalled time.Time
			if tc.signal {
				testutil.Eventually(t, time.Minute, "the teardown's first DELETE", func() (bool, error) {
					return proxy.Count("delete", "pods")+proxy.Count("delete", "services") > 0, nil
				})
				signalled = time.Now()
				signals <- syscall.SIGTERM
			}
			out := wait()
			if out.res.Phase != result.PhaseSucceeded {
				t.Fatalf("phase %s (%s), want Succeeded: the job ended before any signal", out.res.Phase, out.res.Message)
			}
			pods, svcs := listPods(t, c, ns, "ended"), listServices(t, c, ns, "ended")
			if !tc.signal {
				if len(pods)+len(svcs) != 0 || strings.Contains(out.res.Message, "still there") {
					t.Errorf("%d pods and %d services left, message %q; want none", len(pods), len(svcs), out.res.Message)
				}
				mu.Lock()
				failedFor := time.Since(faultsFrom)
				mu.Unlock()
				if failedFor < tc.faults {
					t.Errorf("the run ended %s after the first DELETE, before the deletes could land (%s)", failedFor.Round(time.Second), tc.faults)
				}
				return
			}
			if took := time.Since(signalled); took > grace+5*time.Second {
				t.Errorf("the teardown went on %s after the signal; the grace period is %s", took.Round(time.Second), grace)
			}
			if len(pods) == 0 || !strings.Contains(out.res.Message, "still there when the teardown ended") {
				t.Errorf("%d pods left, message %q; want pods left and named", len(pods), out.res.Message)
			}
			for _, p := range pods {
				if !strings.Contains(out.res.Message, "pod/"+p.Name) {
					t.Errorf("pod %s is left but not named in %q", p.Name, out.res.Message)
				}
			}
		})
	}
}

// backoffLimit holds across runs of the step: a job that used its 2
// restarts, whose step was killed, fails at the next failure.
func TestBackoffLimitHoldsAcrossAKilledStep(t *testing.T) {
	t.Parallel()
	c := cluster.Get(t)
	ns := c.Namespace(t)
	owners := []*corev1.Pod{ownerPod(t, c, ns, "step-1"), ownerPod(t, c, ns, "step-2")}
	two := int32(2)
	job := newJob("limit", v1alpha1.FrameworkTensorFlow).replicas(ps, 1, nil).replicas(worker, 2, nil).
		restartPolicy(worker, v1alpha1.RestartPolicyExitCode).
		with(func(j *v1alpha1.TrainJob) { j.Spec.RunPolicy.BackoffLimit = &two })
	file := writeFile(t, job.yaml(t))
	args := func(o *corev1.Pod) []string {
		return []string{"run", "-f", file, "--kubeconfig", c.Kubeconfig, "-n", ns, "--owner-pod", o.Name, "--owner-uid", string(o.UID), "--lease-duration", "3s"}
	}
	first := startBinary(t, args(owners[0])...)
	waitRunning(t, c, ns, "limit", 3)
	for attempt := 1; attempt <= 2; attempt++ {
		patchAnnotations(t, c, ns, "limit-worker-1", map[string]string{exitAfter: "0s", exitCode: "137"})
		testutil.Eventually(t, time.Minute, "worker-1 recreated", func() (bool, error) {
			p, ok := livePods(t, c, ns, "limit")["limit-worker-1"]
			return ok && p.Labels[v1alpha1.LabelAttempt] == strconv.Itoa(attempt) && p.Status.Phase == corev1.PodRunning, nil
		})
	}
	_ = first.cmd.Process.Kill()
	first.wait(t, 10*time.Second)
	second := startBinary(t, args(owners[1])...)
	testutil.Eventually(t, time.Minute, "the second run to re-attach", func() (bool, error) {
		return strings.Contains(second.stderr.String(), "re-attached"), nil
	})
	patchAnnotations(t, c, ns, "limit-worker-1", map[string]string{exitAfter: "0s", exitCode: "137"})
	if code := second.wait(t, time.Minute); code != result.ExitFailed {
		t.Fatalf("second run exited %d, want %d; stderr:\n%s", code, result.ExitFailed, second.stderr)
	}
	if reason := readOutput(t, second.outputsDir, "reason"); reason != result.ReasonBackoffLimitExceeded {
		t.Errorf("reason %q, want %s", reason, result.ReasonBackoffLimitExceeded)
	}
	if r := readOutput(t, second.outputsDir, "restarts"); r != "2" {
		t.Errorf("restarts %q, want the 2 the first run used", r)
	}
}

// A panic in the reconciler: exit 10 (Failed, InternalError), outputs and
// the result line written once, nothing of the job left.
func TestAPanicInTheReconcilerIsReportedAndTornDown(t *testing.T) {
	t.Parallel()
	c := cluster.Get(t)
	ns := c.Namespace(t)
	job := newJob("panic", v1alpha1.FrameworkTensorFlow).replicas(ps, 1, nil).replicas(worker, 2, nil)
	var armed atomic.Bool
	wait := startJob(t, c, ns, job.yaml(t), func(cfg *executor.Config) {
		cfg.BeforeSync = func() {
			if armed.Load() {
				panic("injected by the test")
			}
		}
	})
	waitRunning(t, c, ns, "panic", 3)
	armed.Store(true)
	patchAnnotations(t, c, ns, "panic-worker-1", map[string]string{"touch": "1"}) // any change makes a sync
	out := wait()
	if out.res.Phase != result.PhaseFailed || out.res.Reason != result.ReasonInternalError || out.res.Phase.ExitCode() != result.ExitFailed {
		t.Fatalf("phase %s reason %s (%s), want Failed InternalError", out.res.Phase, out.res.Reason, out.res.Message)
	}
	if !strings.Contains(out.res.Message, "injected by the test") {
		t.Errorf("message %q does not carry the panic", out.res.Message)
	}
	if lines := strings.Count(strings.TrimSpace(out.stdout.String()), "\n") + 1; lines != 1 {
		t.Errorf("%d result lines on stdout, want 1:\n%s", lines, out.stdout)
	}
	if got := out.output(t, "reason"); got != result.ReasonInternalError {
		t.Errorf("reason output %q", got)
	}
	if n := len(listPods(t, c, ns, "panic")) + len(listServices(t, c, ns, "panic")); n != 0 {
		t.Errorf("%d objects left after the panic's teardown", n)
	}
}
