package reconcile

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"

	"github.com/trainstep/trainstep/internal/testutil"
	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/policy"
	"github.com/trainstep/trainstep/pkg/result"
)

var podsResource = schema.GroupResource{Resource: "pods"}

// failFirst makes the first n calls of verb on pods named name fail with err.
func failFirst(h *harness, verb, name string, n int32, err error) *atomic.Int32 {
	var calls atomic.Int32
	h.client.PrependReactor(verb, "pods", func(action k8stesting.Action) (bool, runtime.Object, error) {
		var got string
		switch a := action.(type) {
		case k8stesting.DeleteAction:
			got = a.GetName()
		case k8stesting.CreateAction:
			got = a.GetObject().(metav1.Object).GetName()
		}
		if got != name {
			return false, nil, nil
		}
		if calls.Add(1) <= n {
			return true, nil, err
		}
		return false, nil, nil
	})
	return &calls
}

// A DELETE that fails must not wedge the replica: more 500s than one
// write's in-place retries still end in the replacement, counted once.
func TestAFailedDeleteOfARecreationIsSentAgain(t *testing.T) {
	t.Parallel()
	var deletes *atomic.Int32
	h := startWith(t, tfJob(v1alpha1.RestartPolicyExitCode), func(h *harness, _ *Options) {
		deletes = failFirst(h, "delete", "mnist-worker-1", 8, apierrors.NewInternalError(errors.New("injected")))
	})
	first := h.pod("mnist-worker-1")
	h.setStatus("mnist-worker-1", corev1.PodFailed, 137)
	testutil.Eventually(h.t, waitTimeout, "worker-1 recreated with attempt 1", func() bool {
		p, err := h.client.CoreV1().Pods(ns).Get(context.Background(), "mnist-worker-1", metav1.GetOptions{})
		return err == nil && p.UID != first.UID && p.Labels[v1alpha1.LabelAttempt] == "1"
	})
	if n := deletes.Load(); n < 9 {
		t.Errorf("%d DELETEs of worker-1 sent, want the 8 that failed and one that landed", n)
	}
	h.setStatus("mnist-worker-0", corev1.PodSucceeded, 0)
	if d := h.decision(); d.Outcome != policy.OutcomeSucceeded {
		t.Fatalf("decision %+v, want Succeeded", d)
	}
	if r := h.ctrl.View().Restarts; r != 1 {
		t.Errorf("restarts = %d, want 1: a delete that failed is no restart", r)
	}
}

func quotaRefusal(name string) error { return quotaRefusalOf(podsResource, name) }

// quotaRefusalOf is the API server's refusal of a create of resource by a
// full ResourceQuota.
func quotaRefusalOf(resource schema.GroupResource, name string) error {
	return apierrors.NewForbidden(resource, name, fmt.Errorf("exceeded quota: team-a, requested: %s=1, used: %[1]s=3, limited: %[1]s=3", resource.Resource))
}

// A full ResourceQuota is waited on: the progress line and a FailedCreate
// event name it, and the pod is created once there is room.
func TestAQuotaRefusalIsWaitedOnAndSaidSo(t *testing.T) {
	t.Parallel()
	recorder := record.NewFakeRecorder(100)
	var progress atomic.Value
	h := startWith(t, tfJob(v1alpha1.RestartPolicyNever), func(h *harness, o *Options) {
		failFirst(h, "create", "mnist-worker-1", 3, quotaRefusal("mnist-worker-1"))
		o.Recorder, o.EventObject = recorder, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "step", Namespace: ns}}
		o.OnProgress = func(p Progress) {
			if p.Waiting != "" {
				progress.Store(p.String())
			}
		}
	})
	h.pod("mnist-worker-1")
	line, _ := progress.Load().(string)
	if !strings.Contains(line, "waiting for quota: exceeded quota: team-a, requested: pods=1, used: pods=3, limited: pods=3") {
		t.Errorf("progress line %q does not name the quota", line)
	}
	found := false
	for len(recorder.Events) > 0 && !found {
		found = strings.HasPrefix(<-recorder.Events, "Warning FailedCreate waiting for quota: 1 objects refused: exceeded quota: team-a")
	}
	if !found {
		t.Error("no FailedCreate Warning event naming the quota")
	}
	h.setStatus("mnist-worker-0", corev1.PodSucceeded, 0)
	if d := h.decision(); d.Outcome != policy.OutcomeSucceeded {
		t.Fatalf("decision %+v, want Succeeded", d)
	}
}

// A quota that never makes room ends the run Transient at the pending
// timeout, not Invalid.
func TestAQuotaThatNeverMakesRoomIsTransientAtThePendingTimeout(t *testing.T) {
	t.Parallel()
	var h *harness
	h = startWith(t, tfJob(v1alpha1.RestartPolicyNever), func(hh *harness, o *Options) {
		failFirst(hh, "create", "mnist-worker-1", 1<<30, quotaRefusal("mnist-worker-1"))
		o.Timeouts.Pending = 2 * time.Second
		hh.runErr = make(chan error, 1)
	})
	select {
	case err := <-h.runErr:
		var re *result.Error
		if !errors.As(err, &re) || re.Phase != result.PhaseTransient || re.Reason != result.ReasonQuotaExceeded {
			t.Fatalf("Run: %v, want Transient QuotaExceeded", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the run did not end at the pending timeout")
	}
}

// After the first object exists no API error ends the run Invalid: a 403
// on a later write is retried and, if it persists, ends Transient.
func TestA403AfterCreationIsNotInvalid(t *testing.T) {
	t.Parallel()
	var h *harness
	h = startWith(t, tfJob(v1alpha1.RestartPolicyExitCode), func(hh *harness, o *Options) {
		failFirst(hh, "delete", "mnist-worker-1", 1<<30, apierrors.NewForbidden(podsResource, "mnist-worker-1", errors.New("RBAC changed")))
		o.APITimeout = time.Second
		hh.runErr = make(chan error, 1)
	})
	h.pod("mnist-worker-1")
	h.setStatus("mnist-worker-1", corev1.PodFailed, 137)
	select {
	case err := <-h.runErr:
		var re *result.Error
		if !errors.As(err, &re) || re.Phase != result.PhaseTransient {
			t.Fatalf("Run: %v, want Transient", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the run did not end at the API timeout")
	}
}

// A panic in the reconciler ends Run with an InternalError, not the process.
func TestAPanicInASyncIsAnInternalError(t *testing.T) {
	t.Parallel()
	var h *harness
	// Armed once the pods exist: counting syncs instead lost the panic when
	// the workqueue folded the status updates into fewer syncs.
	var armed atomic.Bool
	h = startWith(t, tfJob(v1alpha1.RestartPolicyNever), func(hh *harness, o *Options) {
		o.BeforeSync = func() {
			if armed.Load() {
				panic("injected")
			}
		}
		hh.runErr = make(chan error, 1)
	})
	h.pod("mnist-worker-1")
	armed.Store(true)
	h.setStatus("mnist-worker-0", corev1.PodRunning, 0)
	h.setStatus("mnist-worker-1", corev1.PodRunning, 0)
	select {
	case err := <-h.runErr:
		var re *result.Error
		if !errors.As(err, &re) || re.Phase != result.PhaseFailed || re.Reason != result.ReasonInternalError || !strings.Contains(err.Error(), "injected") {
			t.Fatalf("Run: %v, want Failed InternalError naming the panic", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("Run did not end after the panic")
	}
}

// The teardown retries deletes that fail for a while, and says what is
// left (from a live List) when they outlast it.
func TestCleanupRetriesFailedDeletesAndNamesWhatIsLeft(t *testing.T) {
	t.Parallel()
	h := succeededWithItsServicesCached(t)
	var failing atomic.Bool
	failing.Store(true)
	h.client.PrependReactor("delete", "pods", func(action k8stesting.Action) (bool, runtime.Object, error) {
		if failing.Load() && action.(k8stesting.DeleteAction).GetName() == "mnist-ps-0" {
			return true, nil, apierrors.NewServiceUnavailable("injected")
		}
		return false, nil, nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
	defer cancel()
	left, err := h.ctrl.Cleanup(ctx, true, true)
	if err == nil || len(left) != 1 || left[0] != "pod/mnist-ps-0" {
		t.Fatalf("Cleanup while ps-0's deletes fail: left %v, err %v; want pod/mnist-ps-0 named, with an error", left, err)
	}
	failing.Store(false)
	ctx2, cancel2 := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel2()
	if left, err := h.ctrl.Cleanup(ctx2, true, true); err != nil || len(left) != 0 {
		t.Fatalf("Cleanup once deletes work: left %v, err %v; want nothing left", left, err)
	}
	pods, _ := h.client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
	if len(pods.Items) != 0 {
		t.Errorf("%d pods left", len(pods.Items))
	}
}

func TestCleanupDoesNotNameAServiceWhoseDeleteLandedAsTheDeadlineEnded(t *testing.T) {
	t.Parallel()
	h := succeededWithItsServicesCached(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
	defer cancel()
	// worker-1's Service refuses deletes until the live List of the last
	// phase ran; the delete that then lands is the last thing before the
	// deadline (canceled right there).
	var listed atomic.Bool
	h.client.PrependReactor("list", "services", func(k8stesting.Action) (bool, runtime.Object, error) {
		listed.Store(true)
		return false, nil, nil
	})
	h.client.PrependReactor("delete", "services", func(action k8stesting.Action) (bool, runtime.Object, error) {
		if action.(k8stesting.DeleteAction).GetName() != "mnist-worker-1" {
			return false, nil, nil
		}
		if !listed.Load() {
			return true, nil, apierrors.NewServiceUnavailable("injected")
		}
		cancel()
		return false, nil, nil
	})
	left, err := h.ctrl.Cleanup(ctx, true, true)
	if len(left) != 0 {
		t.Fatalf("Cleanup named %v as left (err %v); the Service's delete landed", left, err)
	}
	svcs, _ := h.client.CoreV1().Services(ns).List(context.Background(), metav1.ListOptions{})
	if len(svcs.Items) != 0 {
		t.Errorf("%d Services left", len(svcs.Items))
	}
}

// succeededWithItsServicesCached runs a PS/worker job to Succeeded and waits
// until the controller's cache holds its 3 Services: the job can succeed
// before the informer delivered the last one, and a Service only the
// teardown's live List finds is a case of its own.
func succeededWithItsServicesCached(t *testing.T) *harness {
	t.Helper()
	h := start(t, tfJob(v1alpha1.RestartPolicyNever))
	for _, name := range []string{"mnist-ps-0", "mnist-worker-0", "mnist-worker-1"} {
		h.setStatus(name, corev1.PodRunning, 0)
	}
	h.setStatus("mnist-worker-0", corev1.PodSucceeded, 0)
	if d := h.decision(); d.Outcome != policy.OutcomeSucceeded {
		t.Fatalf("decision %+v, want Succeeded", d)
	}
	testutil.Eventually(t, waitTimeout, "the controller's cache to hold the 3 Services", func() bool {
		svcs, _ := h.ctrl.services.Services(ns).List(labels.Everything())
		return len(svcs) == 3
	})
	return h
}

// createOrder records the resource of every create the fake API server is
// sent, in order. recordCreates answers configmaps' creates after a delay,
// the n-th refused with what refuseConfigMap(n) returns when not nil.
type createOrder struct {
	mu    sync.Mutex
	sent  []string
	calls atomic.Int32
}

func recordCreates(h *harness, refuseConfigMap func(n int32) error) *createOrder {
	order := &createOrder{}
	h.client.PrependReactor("create", "*", func(action k8stesting.Action) (bool, runtime.Object, error) {
		resource := action.GetResource().Resource
		if resource == "configmaps" {
			// Slow: a pod sent without waiting for the answer would be recorded first.
			time.Sleep(100 * time.Millisecond)
		}
		order.mu.Lock()
		order.sent = append(order.sent, resource)
		order.mu.Unlock()
		if resource == "configmaps" {
			if err := refuseConfigMap(order.calls.Add(1)); err != nil {
				return true, nil, err
			}
		}
		return false, nil, nil
	})
	return order
}

// sentBeforeFirst is what was sent before the first create of resource.
func (o *createOrder) sentBeforeFirst(resource string) []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	for i, r := range o.sent {
		if r == resource {
			return append([]string(nil), o.sent[:i]...)
		}
	}
	return append([]string(nil), o.sent...)
}

// configMapsFirst says whether sent starts with n ConfigMap creates and
// has nothing but Services after them.
func configMapsFirst(sent []string, n int) bool {
	if len(sent) < n {
		return false
	}
	for i, r := range sent {
		if (i < n) != (r == "configmaps") || (i >= n && r != "services") {
			return false
		}
	}
	return true
}

// A TensorFlow pod reads its cluster from the job's ConfigMap: no pod is
// sent before the ConfigMap's create is answered, even when the first try
// fails and is retried.
func TestTheClusterConfigMapLandsBeforeAnyPodIsSent(t *testing.T) {
	t.Parallel()
	var order *createOrder
	h := startWith(t, tfJob(v1alpha1.RestartPolicyNever), func(h *harness, _ *Options) {
		order = recordCreates(h, func(n int32) error {
			if n == 1 {
				return apierrors.NewInternalError(errors.New("injected"))
			}
			return nil
		})
	})
	h.pod("mnist-worker-1")
	if _, err := h.client.CoreV1().ConfigMaps(ns).Get(context.Background(), "mnist-tf-cluster", metav1.GetOptions{}); err != nil {
		t.Fatalf("cluster ConfigMap: %v", err)
	}
	if before := order.sentBeforeFirst("pods"); !configMapsFirst(before, 2) {
		t.Errorf("sent before the first pod: %v, want the ConfigMap's failed create and its retry, then only Services", before)
	}
	h.setStatus("mnist-worker-0", corev1.PodSucceeded, 0)
	if d := h.decision(); d.Outcome != policy.OutcomeSucceeded {
		t.Fatalf("decision %+v, want Succeeded", d)
	}
}

// A quota that refuses the ConfigMap holds the pods back too (they could not
// start without it); all are created once the quota makes room.
func TestAQuotaRefusingTheConfigMapHoldsThePods(t *testing.T) {
	t.Parallel()
	var order *createOrder
	h := startWith(t, tfJob(v1alpha1.RestartPolicyNever), func(h *harness, _ *Options) {
		order = recordCreates(h, func(n int32) error {
			if n <= 2 {
				return quotaRefusalOf(schema.GroupResource{Resource: "configmaps"}, "mnist-tf-cluster")
			}
			return nil
		})
	})
	for _, name := range []string{"mnist-ps-0", "mnist-worker-0", "mnist-worker-1"} {
		h.pod(name)
	}
	if before := order.sentBeforeFirst("pods"); !configMapsFirst(before, 3) {
		t.Errorf("sent before the first pod: %v, want the ConfigMap's two refused creates and the one that landed, then only Services", before)
	}
	h.setStatus("mnist-worker-0", corev1.PodSucceeded, 0)
	if d := h.decision(); d.Outcome != policy.OutcomeSucceeded {
		t.Fatalf("decision %+v, want Succeeded", d)
	}
}
