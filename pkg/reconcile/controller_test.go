package reconcile

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/trainstep/trainstep/internal/testutil"
	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/frameworks"
	"github.com/trainstep/trainstep/pkg/policy"
	"github.com/trainstep/trainstep/pkg/render"
)

const ns = "team"

// testOwnerID is the owner identity of the tests' jobs: their objects'
// trainstep.dev/identity label.
const testOwnerID = "0wner1dent1ty"

// waitTimeout bounds every wait on the controller: it acts within milliseconds.
const waitTimeout = 10 * time.Second

func tfJob(policyName v1alpha1.RestartPolicy) *v1alpha1.TrainJob {
	two, one := int32(2), int32(1)
	container := corev1.PodSpec{Containers: []corev1.Container{{Name: "tensorflow", Image: "train:1"}}}
	job := &v1alpha1.TrainJob{
		ObjectMeta: metav1.ObjectMeta{Name: "mnist", Namespace: ns},
		Spec: v1alpha1.TrainJobSpec{Framework: v1alpha1.FrameworkTensorFlow, ReplicaSpecs: map[v1alpha1.ReplicaType]*v1alpha1.ReplicaSpec{
			v1alpha1.ReplicaTypePS:     {Replicas: &one, RestartPolicy: policyName, Template: corev1.PodTemplateSpec{Spec: container}},
			v1alpha1.ReplicaTypeWorker: {Replicas: &two, RestartPolicy: policyName, Template: corev1.PodTemplateSpec{Spec: container}},
		},
			// A Service per replica, as a Kubeflow TFJob has: the tests follow each one.
			ServiceLayout: v1alpha1.ServiceLayoutPerReplica},
	}
	frameworks.SetDefaults(job)
	return job
}

// testKeys are SSH keys for MPI jobs' Secret; other jobs ignore them.
var testKeys = render.Inputs{SSHPrivateKey: []byte("-----BEGIN PRIVATE KEY-----\n"), SSHPublicKey: []byte("ssh-ed25519 AAAAC3 test\n")}

// harness runs a controller against the fake clientset; the test plays kubelet.
type harness struct {
	t      *testing.T
	client *fake.Clientset
	ctrl   *Controller
	done   chan policy.Decision
	// runErr, when a setup made it, receives Run's error instead of the
	// test failing on it.
	runErr chan error
	// stopRun cancels Run's context: it ends the controller's Run and its
	// informers, as a killed step.
	stopRun context.CancelFunc
	// kueuePatches are the patches a reactor saw sent to deleted pods.
	mu           sync.Mutex
	kueuePatches []string
	// kueueFaulted says the reactor already answered one of them 503.
	kueueFaulted bool
}

func start(t *testing.T, job *v1alpha1.TrainJob) *harness {
	t.Helper()
	return startWith(t, job, nil)
}

// startWith starts a controller after setup has added reactors to the fake
// client or changed the options.
func startWith(t *testing.T, job *v1alpha1.TrainJob, setup func(h *harness, o *Options)) *harness {
	t.Helper()
	id := render.Identity{Namespace: ns, JobName: job.Name, OwnerID: testOwnerID}
	renderer, err := render.NewRenderer(job, id)
	if err != nil {
		t.Fatal(err)
	}
	desired, err := render.Render(job, id, testKeys)
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, client: fake.NewClientset(), done: make(chan policy.Decision, 1)}
	// The fake tracker sets no UIDs; an API server does, and the controller relies on them.
	h.client.PrependReactor("create", "*", func(action k8stesting.Action) (bool, runtime.Object, error) {
		if obj, ok := action.(k8stesting.CreateAction).GetObject().(metav1.Object); ok {
			obj.SetUID(uuid.NewUUID())
		}
		return false, nil, nil
	})
	// The fake tracker takes any update; an API server refuses one made
	// from a stale read. The test plays a kubelet, which reports only the
	// instance it runs: a status written from a read of an instance that
	// was replaced meanwhile must not land on its successor.
	h.client.PrependReactor("update", "pods", func(action k8stesting.Action) (bool, runtime.Object, error) {
		if action.GetSubresource() != "status" {
			return false, nil, nil
		}
		pod := action.(k8stesting.UpdateAction).GetObject().(*corev1.Pod)
		stored, err := h.client.Tracker().Get(corev1.SchemeGroupVersion.WithResource("pods"), pod.Namespace, pod.Name)
		if err != nil {
			return true, nil, err
		}
		if uid := stored.(*corev1.Pod).UID; uid != pod.UID {
			return true, nil, apierrors.NewConflict(schema.GroupResource{Resource: "pods"}, pod.Name, fmt.Errorf("instance %s was replaced by %s", pod.UID, uid))
		}
		return false, nil, nil
	})
	opts := Options{Core: h.client.CoreV1(), Job: job, Identity: id, Renderer: renderer, Desired: desired,
		Rule: frameworks.SuccessRuleFor(job), Timeouts: policy.Timeouts{Stuck: time.Hour, Pending: time.Hour}, Logger: testLogger(t)}
	if setup != nil {
		setup(h, &opts)
	}
	h.ctrl = New(opts)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	h.stopRun = cancel
	if err := h.ctrl.Start(ctx); err != nil {
		t.Fatal(err)
	}
	// The fake's watch starts at its call, whatever resourceVersion the
	// reflector asks for: an object created between an informer's List and
	// its Watch would never reach the cache. The fake registers a watch
	// while it holds the lock Actions takes, so a watch listed is one that
	// delivers.
	testutil.Eventually(t, waitTimeout, "every informer to watch", func() bool {
		watches := 0
		for _, a := range h.client.Actions() {
			if a.GetVerb() == "watch" {
				watches++
			}
		}
		return watches >= len(h.ctrl.informers)
	})
	go func() {
		d, err := h.ctrl.Run(ctx)
		if err != nil && h.runErr == nil {
			t.Errorf("Run: %v", err)
		}
		if h.runErr != nil {
			h.runErr <- err
		}
		h.done <- d
	}()
	return h
}

func (h *harness) pod(name string) *corev1.Pod {
	h.t.Helper()
	var pod *corev1.Pod
	testutil.Eventually(h.t, waitTimeout, "pod "+name+" to exist", func() bool {
		p, err := h.client.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
		pod = p
		return err == nil
	})
	return pod
}

// setStatus plays the kubelet: the pod's main (first) container runs or exits.
func (h *harness) setStatus(name string, phase corev1.PodPhase, exitCode int32) {
	h.t.Helper()
	if err := h.setStatusOf(h.pod(name), phase, exitCode); err != nil {
		h.t.Fatal(err)
	}
}

// setStatusOf is setStatus for that instance of a pod: a Conflict or a
// NotFound when it is no longer there.
// endThenRemove ends the replica's pod with phase and exitCode, waits until
// the controller saw that end, then deletes the pod (as the pod garbage
// collector removes ended pods) and waits until the controller judged the
// removal.
func (h *harness) endThenRemove(name string, phase corev1.PodPhase, exitCode int32) {
	h.t.Helper()
	h.setStatus(name, phase, exitCode)
	testutil.Eventually(h.t, waitTimeout, name+"'s end seen", func() bool {
		h.ctrl.mu.Lock()
		defer h.ctrl.mu.Unlock()
		st := h.ctrl.byName[name]
		return st.pod != nil && st.pod.Status.Phase == phase
	})
	ended := h.pod(name).UID
	if err := h.client.CoreV1().Pods(ns).Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
		h.t.Fatal(err)
	}
	testutil.Eventually(h.t, waitTimeout, name+"'s removal judged", func() bool {
		h.ctrl.mu.Lock()
		defer h.ctrl.mu.Unlock()
		st := h.ctrl.byName[name]
		return st.stage == stageLost || st.uid != ended
	})
}

func (h *harness) setStatusOf(pod *corev1.Pod, phase corev1.PodPhase, exitCode int32) error {
	pod = pod.DeepCopy()
	pod.Status.Phase = phase
	cs := corev1.ContainerStatus{Name: pod.Spec.Containers[0].Name}
	if phase == corev1.PodRunning {
		cs.State.Running = &corev1.ContainerStateRunning{}
	} else {
		cs.State.Terminated = &corev1.ContainerStateTerminated{ExitCode: exitCode, Message: `{"loss":0.1}`, FinishedAt: metav1.Now()}
	}
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{cs}
	_, err := h.client.CoreV1().Pods(ns).UpdateStatus(context.Background(), pod, metav1.UpdateOptions{})
	return err
}

// stoppedView stops a job that has not ended and returns the controller's
// last view, read once Run returned (View is not for a running controller).
func (h *harness) stoppedView() policy.View {
	h.t.Helper()
	h.stopRun()
	h.decision()
	return h.ctrl.View()
}

func (h *harness) decision() policy.Decision {
	h.t.Helper()
	select {
	case d := <-h.done:
		return d
	case <-time.After(10 * time.Second):
		h.t.Fatal("the controller reached no decision")
		return policy.Decision{}
	}
}

func TestControllerCreatesEveryChildAndSucceedsOnWorker0(t *testing.T) {
	h := start(t, tfJob(v1alpha1.RestartPolicyNever))
	for _, name := range []string{"mnist-ps-0", "mnist-worker-0", "mnist-worker-1"} {
		h.setStatus(name, corev1.PodRunning, 0)
	}
	svcs, _ := h.client.CoreV1().Services(ns).List(context.Background(), metav1.ListOptions{})
	if len(svcs.Items) != 3 {
		t.Errorf("services = %d, want one per replica", len(svcs.Items))
	}
	h.setStatus("mnist-worker-0", corev1.PodSucceeded, 0)
	if d := h.decision(); d.Outcome != policy.OutcomeSucceeded {
		t.Fatalf("decision %+v, want Succeeded", d)
	}
	if got := policy.MetricsReplica(ptrView(h.ctrl.View()), frameworks.SuccessRuleFor(h.ctrl.opts.Job)); got == nil || got.TerminationMessage != `{"loss":0.1}` {
		t.Errorf("metrics replica %+v, want worker-0 with its termination message", got)
	}
}

func TestControllerRecreatesARetryableFailureWithTheNextAttempt(t *testing.T) {
	h := start(t, tfJob(v1alpha1.RestartPolicyExitCode))
	first := h.pod("mnist-worker-1")
	h.setStatus("mnist-worker-1", corev1.PodFailed, 137)
	testutil.Eventually(h.t, waitTimeout, "worker-1 recreated with attempt 1", func() bool {
		p, err := h.client.CoreV1().Pods(ns).Get(context.Background(), "mnist-worker-1", metav1.GetOptions{})
		return err == nil && p.UID != first.UID && p.Labels[v1alpha1.LabelAttempt] == "1"
	})
	h.setStatus("mnist-worker-0", corev1.PodSucceeded, 0)
	if d := h.decision(); d.Outcome != policy.OutcomeSucceeded {
		t.Fatalf("decision %+v, want Succeeded", d)
	}
	if r := h.ctrl.View().Restarts; r != 1 {
		t.Errorf("restarts = %d, want 1", r)
	}
}

func TestControllerFailsOnAPermanentExit(t *testing.T) {
	h := start(t, tfJob(v1alpha1.RestartPolicyExitCode))
	h.setStatus("mnist-ps-0", corev1.PodFailed, 1)
	if d := h.decision(); d.Outcome != policy.OutcomeFailed || d.Reason != "ReplicaFailed" {
		t.Fatalf("decision %+v, want Failed/ReplicaFailed", d)
	}
}

func TestControllerReplacesALostReplica(t *testing.T) {
	h := start(t, tfJob(v1alpha1.RestartPolicyNever))
	h.pod("mnist-ps-0")
	h.setStatus("mnist-ps-0", corev1.PodRunning, 0)
	testutil.Eventually(h.t, waitTimeout, "the controller to see ps-0", func() bool { return h.stage("mnist-ps-0") == stageObserved })
	if err := h.client.CoreV1().Pods(ns).Delete(context.Background(), "mnist-ps-0", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(h.t, waitTimeout, "ps-0 recreated with attempt 1", func() bool {
		p, err := h.client.CoreV1().Pods(ns).Get(context.Background(), "mnist-ps-0", metav1.GetOptions{})
		return err == nil && p.Labels[v1alpha1.LabelAttempt] == "1"
	})
}

// A replica that succeeded and whose ended pod is then removed (the pod
// garbage collector removes ended pods) is not run again: its success
// stands, and its removal is no failure.
func TestControllerKeepsASuccessWhosePodIsRemoved(t *testing.T) {
	h := start(t, tfJob(v1alpha1.RestartPolicyExitCode))
	h.endThenRemove("mnist-worker-1", corev1.PodSucceeded, 0)
	h.setStatus("mnist-worker-0", corev1.PodSucceeded, 0)
	if d := h.decision(); d.Outcome != policy.OutcomeSucceeded {
		t.Fatalf("decision %+v, want Succeeded", d)
	}
	if _, err := h.client.CoreV1().Pods(ns).Get(context.Background(), "mnist-worker-1", metav1.GetOptions{}); err == nil {
		t.Error("worker-1 was created again: the removal of its ended pod was taken for a loss")
	}
	if r := h.ctrl.View().Restarts; r != 0 {
		t.Errorf("restarts = %d, want 0: worker-1 succeeded, and its pod's removal is no failure", r)
	}
}

func ptrView(v policy.View) *policy.View { return &v }

// stage reads a replica's stage as the controller holds it.
func (h *harness) stage(name string) stage {
	h.ctrl.mu.Lock()
	defer h.ctrl.mu.Unlock()
	return h.ctrl.byName[name].stage
}

// testLogger logs into t until t's cleanups run: the informers' handlers may
// still log a moment after the test ended, which t forbids.
func testLogger(t *testing.T) *zap.Logger {
	g := &logGate{}
	t.Cleanup(g.close) // registered first, so it runs last
	return zap.New(untilDone{Core: zaptest.NewLogger(t).Core(), gate: g})
}

// logGate is closed when the test ends; no write is under way once close
// returned, so none reaches t after it ended.
type logGate struct {
	mu   sync.RWMutex
	done bool
}

func (g *logGate) close() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.done = true
}

// untilDone drops entries once the gate is closed.
type untilDone struct {
	zapcore.Core
	gate *logGate
}

func (u untilDone) With(fields []zapcore.Field) zapcore.Core {
	return untilDone{Core: u.Core.With(fields), gate: u.gate}
}

func (u untilDone) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if !u.Enabled(e.Level) {
		return ce
	}
	return ce.AddCore(e, u)
}

func (u untilDone) Write(e zapcore.Entry, fields []zapcore.Field) error {
	u.gate.mu.RLock()
	defer u.gate.mu.RUnlock()
	if u.gate.done {
		return nil
	}
	return u.Core.Write(e, fields)
}
