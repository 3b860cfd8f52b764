package reconcile

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/uuid"
	corelisters "k8s.io/client-go/listers/core/v1"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"

	"github.com/trainstep/trainstep/internal/testutil"
	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/policy"
	"github.com/trainstep/trainstep/pkg/render"
	"github.com/trainstep/trainstep/pkg/result"
)

// laggingPodLister stands between the controller and its pod cache. It
// counts the reads of one pod and, when lagging, misses the first: as a
// cache read can while the informer is between storing a pod and a later
// resync, or when it was handed a stale copy.
type laggingPodLister struct {
	corelisters.PodLister
	name string
	lag  bool
	// reads counts the Gets of name; missed is set once one was answered
	// NotFound although the cache held the pod.
	reads  atomic.Int32
	missed atomic.Bool
}

func (l *laggingPodLister) Pods(namespace string) corelisters.PodNamespaceLister {
	return laggingNamespaceLister{l.PodLister.Pods(namespace), l}
}

type laggingNamespaceLister struct {
	corelisters.PodNamespaceLister
	l *laggingPodLister
}

func (n laggingNamespaceLister) Get(name string) (*corev1.Pod, error) {
	if name != n.l.name {
		return n.PodNamespaceLister.Get(name)
	}
	pod, err := n.PodNamespaceLister.Get(name)
	if n.l.lag && n.l.reads.Load() == 0 && err == nil {
		n.l.missed.Store(true)
		pod, err = nil, apierrors.NewNotFound(schema.GroupResource{Resource: "pods"}, name)
	}
	n.l.reads.Add(1)
	return pod, err
}

func deletesOf(client interface{ Actions() []k8stesting.Action }, name string) int {
	n := 0
	for _, a := range client.Actions() {
		if d, ok := a.(k8stesting.DeleteAction); ok && a.GetResource().Resource == "pods" && d.GetName() == name {
			n++
		}
	}
	return n
}

// The informer can deliver a new pod before its create returns; the
// controller, not knowing the UID yet, passes over it, and reads the pod
// cache when it commits the create. Found there, the replica is observed
// at once, without waiting for another event. Missed there (the cache
// lags), the replica must wait for the informer's next word on it — never
// count as lost: no healthy pod is deleted or created twice and no restart
// is charged.
func TestControllerDoesNotKillAReplicaOnACacheMiss(t *testing.T) {
	for _, tc := range []struct {
		name string
		lag  bool
		// want is worker-0's stage once the create was committed.
		want stage
	}{
		{name: "the cache holds the pod delivered before the create returned", lag: false, want: stageObserved},
		{name: "the cache misses it", lag: true, want: stageCreated},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const name = "mnist-worker-0"
			lister := &laggingPodLister{name: name, lag: tc.lag}
			delivered := make(chan struct{})
			var deliveredOnce sync.Once
			h := startWith(t, tfJob(v1alpha1.RestartPolicyExitCode), func(h *harness, o *Options) {
				o.OnPod = func(pod *corev1.Pod) {
					if pod.Name == name {
						deliveredOnce.Do(func() { close(delivered) })
					}
				}
				// worker-0's create answers only once the informer delivered
				// the pod it stored.
				h.client.PrependReactor("create", "pods", func(action k8stesting.Action) (bool, runtime.Object, error) {
					pod := action.(k8stesting.CreateAction).GetObject().(*corev1.Pod)
					if pod.Name != name {
						return false, nil, nil
					}
					pod = pod.DeepCopy()
					pod.UID = uuid.NewUUID()
					if err := h.client.Tracker().Create(corev1.SchemeGroupVersion.WithResource("pods"), pod, ns); err != nil {
						return true, nil, err
					}
					select {
					case <-delivered:
					case <-time.After(waitTimeout):
						t.Errorf("the informer did not deliver %s within %s", name, waitTimeout)
					}
					return true, pod, nil
				})
				// The first sync, on the worker, puts the lister in front of
				// the cache before anything is created.
				o.BeforeSync = func() {
					if lister.PodLister == nil {
						lister.PodLister = h.ctrl.pods
						h.ctrl.pods = lister
					}
				}
			})
			testutil.Eventually(t, waitTimeout, "the controller to read "+name+" from its cache after the create", func() bool { return lister.reads.Load() > 0 })
			if tc.lag && !lister.missed.Load() {
				t.Fatal("the cache read after the create did not miss the pod; the test no longer exercises a cache miss")
			}
			first := h.pod(name)
			// The read and the commit happen under the controller's lock:
			// the stage seen now is the commit's.
			if got := h.stage(name); got != tc.want {
				t.Fatalf("%s is %s after its create was committed, want %s", name, got, tc.want)
			}

			for _, pod := range []string{"mnist-ps-0", name, "mnist-worker-1"} {
				h.setStatus(pod, corev1.PodRunning, 0)
			}
			testutil.Eventually(t, waitTimeout, "every replica running", func() bool { return runningIn(h.ctrl) == 3 })
			h.setStatus(name, corev1.PodSucceeded, 0)
			if d := h.decision(); d.Outcome != policy.OutcomeSucceeded {
				t.Fatalf("decision %+v, want Succeeded", d)
			}
			if n := deletesOf(h.client, name); n != 0 {
				t.Errorf("%s was deleted %d times; a cache miss must not kill a healthy replica", name, n)
			}
			if n := h.podCreates(name); n != 1 {
				t.Errorf("%s was created %d times, want once", name, n)
			}
			if got, _ := h.client.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{}); got == nil || got.UID != first.UID {
				t.Errorf("%s was replaced; want the first instance kept", name)
			}
			if r := h.ctrl.View().Restarts; r != 0 {
				t.Errorf("restarts = %d, want 0", r)
			}
		})
	}
}

func runningIn(c *Controller) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, st := range c.replicas {
		if st.stage == stageObserved && st.pod != nil && st.pod.Status.Phase == corev1.PodRunning {
			n++
		}
	}
	return n
}

// A replacement whose create fails once is created again at the same
// attempt, and the recreation counts as one restart.
func TestControllerCommitsAttemptOnlyAfterTheCreateSucceeds(t *testing.T) {
	var failNext atomic.Bool
	h := startWith(t, tfJob(v1alpha1.RestartPolicyExitCode), func(h *harness, _ *Options) {
		h.client.PrependReactor("create", "pods", func(action k8stesting.Action) (bool, runtime.Object, error) {
			pod := action.(k8stesting.CreateAction).GetObject().(*corev1.Pod)
			if pod.Name == "mnist-worker-1" && failNext.CompareAndSwap(true, false) {
				return true, nil, apierrors.NewInternalError(errInjected)
			}
			return false, nil, nil
		})
	})
	first := h.pod("mnist-worker-1")
	h.setStatus("mnist-worker-1", corev1.PodRunning, 0)
	testutil.Eventually(h.t, waitTimeout, "worker-1 observed", func() bool { return h.stage("mnist-worker-1") == stageObserved })
	failNext.Store(true)
	h.setStatus("mnist-worker-1", corev1.PodFailed, 137)
	var second *corev1.Pod
	testutil.Eventually(h.t, waitTimeout, "worker-1 recreated", func() bool {
		p, err := h.client.CoreV1().Pods(ns).Get(context.Background(), "mnist-worker-1", metav1.GetOptions{})
		second = p
		return err == nil && p.UID != first.UID
	})
	if failNext.Load() {
		t.Fatal("the injected create error was never hit")
	}
	if got := second.Labels[v1alpha1.LabelAttempt]; got != "1" {
		t.Errorf("replacement attempt label %q, want 1", got)
	}
	h.setStatus("mnist-worker-0", corev1.PodSucceeded, 0)
	if d := h.decision(); d.Outcome != policy.OutcomeSucceeded {
		t.Fatalf("decision %+v, want Succeeded", d)
	}
	if r := h.ctrl.View().Restarts; r != 1 {
		t.Errorf("restarts = %d, want 1", r)
	}
	if r := ptrView(h.ctrl.View()).Replica(policy.ReplicaID{Type: v1alpha1.ReplicaTypeWorker, Index: 1}); r == nil || r.Attempt != 1 {
		t.Errorf("worker-1 in the view: %+v, want attempt 1", r)
	}
}

var errInjected = &injectedError{}

type injectedError struct{}

func (*injectedError) Error() string { return "injected" }

// A create answered AlreadyExists (the first try reached the server but
// its answer was lost) adopts the pod that is there when this job controls
// it, instead of waiting for it forever or creating it again.
func TestControllerAdoptsAPodItCreatedButNeverHeardOf(t *testing.T) {
	var once sync.Once
	var stored *corev1.Pod
	h := startWith(t, tfJob(v1alpha1.RestartPolicyNever), func(h *harness, _ *Options) {
		h.client.PrependReactor("create", "pods", func(action k8stesting.Action) (bool, runtime.Object, error) {
			pod := action.(k8stesting.CreateAction).GetObject().(*corev1.Pod)
			var handled bool
			var err error
			if pod.Name == "mnist-worker-0" {
				once.Do(func() {
					stored = pod.DeepCopy()
					stored.UID = uuid.NewUUID()
					if err = h.client.Tracker().Create(corev1.SchemeGroupVersion.WithResource("pods"), stored, ns); err == nil {
						handled, err = true, apierrors.NewAlreadyExists(schema.GroupResource{Resource: "pods"}, pod.Name)
					}
				})
			}
			return handled, nil, err
		})
	})
	testutil.Eventually(h.t, waitTimeout, "worker-0 adopted", func() bool { return h.stage("mnist-worker-0") == stageObserved })
	h.ctrl.mu.Lock()
	uid := h.ctrl.byName["mnist-worker-0"].uid
	h.ctrl.mu.Unlock()
	if stored == nil || uid != stored.UID {
		t.Fatalf("worker-0 tracked as %q, want the existing pod's UID", uid)
	}
	h.setStatus("mnist-worker-0", corev1.PodSucceeded, 0)
	if d := h.decision(); d.Outcome != policy.OutcomeSucceeded {
		t.Fatalf("decision %+v, want Succeeded", d)
	}
	if n := deletesOf(h.client, "mnist-worker-0"); n != 0 {
		t.Errorf("worker-0 deleted %d times, want 0", n)
	}
}

// A pod under a replica's name that another owner controls is not taken
// over, and the owner gets a Warning event saying so.
func TestControllerWarnsAboutAPodItDoesNotControl(t *testing.T) {
	for name, labels := range map[string]map[string]string{
		"another job's":                {v1alpha1.LabelJobName: "another"},
		"the job's name, no identity":  {v1alpha1.LabelJobName: "mnist"},
		"the job's name, another step": {v1alpha1.LabelJobName: "mnist", v1alpha1.LabelIdentity: "not" + testOwnerID},
	} {
		t.Run(name, func(t *testing.T) {
			job := tfJob(v1alpha1.RestartPolicyNever)
			recorder := record.NewFakeRecorder(20)
			h := startWith(t, job, func(h *harness, o *Options) {
				h.runErr = make(chan error, 1)
				o.Recorder, o.EventObject = recorder, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "step", Namespace: ns}}
				yes := true
				foreign := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "mnist-worker-1", Namespace: ns, UID: uuid.NewUUID(), Labels: labels,
					OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "someone", UID: "x", Controller: &yes}}}}
				if _, err := h.client.CoreV1().Pods(ns).Create(context.Background(), foreign, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			})
			err := <-h.runErr
			if result.PhaseOf(err) != result.PhaseInvalid || !strings.Contains(err.Error(), "pod mnist-worker-1 exists and is not this job's") {
				t.Fatalf("Run: %v, want Invalid naming pod mnist-worker-1", err)
			}
			testutil.Eventually(h.t, waitTimeout, "a NotOwned warning", func() bool {
				select {
				case e := <-recorder.Events:
					return strings.Contains(e, EventNotOwned) && strings.Contains(e, "mnist-worker-1")
				default:
					return false
				}
			})
			if st := h.stage("mnist-worker-1"); st != stageAbsent {
				t.Errorf("worker-1 stage %s, want absent (not adopted)", st)
			}
			if _, err := h.ctrl.Cleanup(context.Background(), true, false); err != nil {
				t.Fatal(err)
			}
			if n := deletesOf(h.client, "mnist-worker-1"); n != 0 {
				t.Errorf("the foreign pod was deleted %d times, want 0", n)
			}
		})
	}
}

// A retried step finds the replicas of the attempt before it. One that
// already succeeded is adopted as done, so the job that in fact finished
// ends Succeeded at once, instead of that replica being deleted and its
// work run again.
func TestControllerAdoptsAReplicaThatSucceededBeforeTheRetry(t *testing.T) {
	job := tfJob(v1alpha1.RestartPolicyNever)
	h := startWith(t, job, func(h *harness, _ *Options) {
		renderer, err := render.NewRenderer(job, render.Identity{Namespace: ns, JobName: job.Name, OwnerID: testOwnerID})
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range policy.Desired(job) {
			pod, err := renderer.Pod(id.Type, id.Index, 0)
			if err != nil {
				t.Fatal(err)
			}
			pod.UID = uuid.NewUUID()
			cs := corev1.ContainerStatus{Name: "tensorflow", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}
			pod.Status.Phase = corev1.PodRunning
			if pod.Name == "mnist-worker-0" {
				pod.Status.Phase = corev1.PodSucceeded
				cs.State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0}}
			}
			pod.Status.ContainerStatuses = []corev1.ContainerStatus{cs}
			if err := h.client.Tracker().Create(corev1.SchemeGroupVersion.WithResource("pods"), pod, ns); err != nil {
				t.Fatal(err)
			}
		}
	})
	if d := h.decision(); d.Outcome != policy.OutcomeSucceeded {
		t.Fatalf("decision %+v, want Succeeded", d)
	}
	if n := deletesOf(h.client, "mnist-worker-0"); n != 0 {
		t.Errorf("the succeeded worker-0 was deleted %d times, want 0", n)
	}
	for _, a := range h.client.Actions() {
		if a.GetVerb() == "create" && a.GetResource().Resource == "pods" {
			t.Errorf("created pod %s, want every replica re-attached", a.(k8stesting.CreateAction).GetObject().(metav1.Object).GetName())
		}
	}
}
