package reconcile

import (
	"context"
	"encoding/json"
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
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/watch"
	k8stesting "k8s.io/client-go/testing"

	"github.com/trainstep/trainstep/internal/testutil"
	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/policy"
	"github.com/trainstep/trainstep/pkg/render"
)

var servicesResource = corev1.SchemeGroupVersion.WithResource("services")

// leftBy puts into the fake API server the pods and Services of job that an
// earlier step, owned by owner, left running (status sets each pod's state).
func leftBy(t *testing.T, h *harness, job *v1alpha1.TrainJob, owner *metav1.OwnerReference, status func(pod *corev1.Pod)) {
	t.Helper()
	id := render.Identity{Namespace: ns, JobName: job.Name, OwnerID: testOwnerID, Owner: owner}
	renderer, err := render.NewRenderer(job, id)
	if err != nil {
		t.Fatal(err)
	}
	desired, err := render.Render(job, id, testKeys)
	if err != nil {
		t.Fatal(err)
	}
	for _, svc := range desired.Services {
		svc.UID = uuid.NewUUID()
		if err := h.client.Tracker().Add(svc); err != nil {
			t.Fatal(err)
		}
	}
	for _, cm := range desired.ConfigMaps {
		cm.UID = uuid.NewUUID()
		if err := h.client.Tracker().Add(cm); err != nil {
			t.Fatal(err)
		}
	}
	for _, rid := range policy.Desired(job) {
		pod, err := renderer.Pod(rid.Type, rid.Index, 0)
		if err != nil {
			t.Fatal(err)
		}
		pod.UID = uuid.NewUUID()
		pod.Status.Phase = corev1.PodRunning
		pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: pod.Spec.Containers[0].Name,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}
		if status != nil {
			status(pod)
		}
		if err := h.client.Tracker().Add(pod); err != nil {
			t.Fatal(err)
		}
	}
}

func stepOwner(name string) *metav1.OwnerReference {
	return &metav1.OwnerReference{APIVersion: "v1", Kind: "Pod", Name: name, UID: k8stypes.UID("uid-" + name), Controller: ptrTrue()}
}

// A retried step re-attaches while the API server answers 503 for longer
// than one write's in-place retries (about 1.5 s): the re-attach's owner
// patches are retried within the API timeout, like every other write, and
// the job goes on to its end. (They used to fail Start, which the step
// ends Failed, exit 10, with every replica left running.)
func TestAReattachRidesOutAShortAPIError(t *testing.T) {
	t.Parallel()
	job := tfJob(v1alpha1.RestartPolicyExitCode)
	var failing atomic.Bool
	failing.Store(true)
	h := startWith(t, job, func(h *harness, o *Options) {
		leftBy(t, h, job, stepOwner("step-1"), nil)
		o.Identity.Owner = stepOwner("step-2")
		h.client.PrependReactor("patch", "*", func(k8stesting.Action) (bool, runtime.Object, error) {
			if failing.Load() {
				return true, nil, apierrors.NewServiceUnavailable("the API server restarts")
			}
			return false, nil, nil
		})
		time.AfterFunc(3*time.Second, func() { failing.Store(false) })
	})
	testutil.Eventually(t, waitTimeout, "every replica pod owned by the second step", func() bool {
		pods, err := h.client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
		if err != nil || len(pods.Items) != 3 {
			return false
		}
		for _, p := range pods.Items {
			if ref := metav1.GetControllerOf(&p); ref == nil || ref.Name != "step-2" {
				return false
			}
		}
		return true
	})
	h.setStatus("mnist-worker-0", corev1.PodSucceeded, 0)
	if d := h.decision(); d.Outcome != policy.OutcomeSucceeded {
		t.Fatalf("decision %+v, want Succeeded", d)
	}
	for _, a := range h.client.Actions() {
		if a.GetVerb() == "create" && a.GetResource().Resource == "pods" {
			t.Errorf("created pod %s, want every replica re-attached", a.(k8stesting.CreateAction).GetObject().(metav1.Object).GetName())
		}
	}
}

// annotationLimit is the API server's bound on an object's annotations,
// keys and values together (apimachinery's TotalAnnotationSizeLimitB).
const annotationLimit = 256 * 1024

// refuseLargeAnnotations makes the fake API server refuse a Service whose
// annotations pass annotationLimit, as kube-apiserver's validation does.
func refuseLargeAnnotations(h *harness) {
	h.client.PrependReactor("*", "services", func(action k8stesting.Action) (bool, runtime.Object, error) {
		var annotations map[string]string
		switch a := action.(type) {
		case k8stesting.CreateAction:
			annotations = a.GetObject().(metav1.Object).GetAnnotations()
		case k8stesting.PatchAction:
			var patch struct {
				Metadata struct{ Annotations map[string]string } `json:"metadata"`
			}
			if json.Unmarshal(a.GetPatch(), &patch) != nil {
				return false, nil, nil
			}
			stored, err := h.client.Tracker().Get(servicesResource, ns, a.GetName())
			if err != nil {
				return false, nil, nil
			}
			annotations = map[string]string{}
			for k, v := range stored.(metav1.Object).GetAnnotations() {
				annotations[k] = v
			}
			for k, v := range patch.Metadata.Annotations {
				annotations[k] = v
			}
		default:
			return false, nil, nil
		}
		size := 0
		for k, v := range annotations {
			size += len(k) + len(v)
		}
		if size > annotationLimit {
			return true, nil, apierrors.NewInvalid(schema.GroupKind{Kind: "Service"}, "", field.ErrorList{
				field.TooLong(field.NewPath("metadata", "annotations"), "", annotationLimit)})
		}
		return false, nil, nil
	})
}

// The restart ledger holds one entry per replica slot, compact, and drops
// what a replacement already carries: the largest job a spec allows (4096
// workers), every worker failing at once while no step watched, is
// recreated with each restart recorded first, well within the API server's
// bound on annotations. (One entry per recreated instance, with its UID,
// passed that bound past about 3,000 recreations: every later restart was
// refused until the API timeout, on every retry.)
func TestTheRestartLedgerOfTheLargestJobFitsItsService(t *testing.T) {
	t.Parallel()
	const workers = 4096
	job := tfJob(v1alpha1.RestartPolicyExitCode)
	n, limit := int32(workers), int32(2*workers)
	job.Spec.ReplicaSpecs[v1alpha1.ReplicaTypeWorker].Replicas = &n
	job.Spec.RunPolicy.BackoffLimit = &limit
	job.Spec.ServiceLayout = v1alpha1.ServiceLayoutPerJob
	h := startWith(t, job, func(h *harness, o *Options) {
		pumpWatches(h)
		// One write at a time: the fake's watches cannot take a burst.
		o.Parallelism = 1
		refuseLargeAnnotations(h)
		leftBy(t, h, job, nil, func(pod *corev1.Pod) {
			if pod.Labels[v1alpha1.LabelReplicaType] == "worker" {
				pod.Status.Phase = corev1.PodFailed
				pod.Status.ContainerStatuses[0].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137}}
			}
		})
	})
	// A bound on liveness, not on speed: 4096 recreations one write at a
	// time take about 40 s alone under -race, and longer beside the rest.
	testutil.Eventually(t, 5*time.Minute, "every worker replaced, at attempt 1", func() bool {
		pods, err := h.client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: v1alpha1.LabelAttempt + "=1"})
		return err == nil && len(pods.Items) == workers
	})
	if got := h.ctrl.View().Restarts; got != workers {
		t.Errorf("%d restarts, want %d", got, workers)
	}
	svc, err := h.client.CoreV1().Services(ns).Get(context.Background(), job.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ledger := svc.Annotations[v1alpha1.AnnotationRestartLedger]
	if len(ledger) > annotationLimit/2 {
		t.Errorf("the ledger of %d recreations is %d bytes, want well within the %d bytes of an object's annotations", workers, len(ledger), annotationLimit)
	}
	var l struct {
		Replicas map[string][]int `json:"replicas"`
	}
	if err := json.Unmarshal([]byte(ledger), &l); err != nil || len(l.Replicas) != workers || len(l.Replicas["worker/4095"]) == 0 || l.Replicas["worker/4095"][0] != 1 {
		t.Errorf("the ledger holds %d entries (%v), worker/4095: %v; want one per worker, each with its restart", len(l.Replicas), err, l.Replicas["worker/4095"])
	}
}

// pumpWatches drains each of the fake's watches into a queue of its own,
// and holds every write back while a watch has more than half of its
// buffer unread: the fake drops a watch's 101st unread event by a panic,
// and a job of thousands of replicas sends thousands of events at once.
func pumpWatches(h *harness) {
	var mu sync.Mutex
	var pumps []*pumpedWatch
	h.client.PrependWatchReactor("*", func(action k8stesting.Action) (bool, watch.Interface, error) {
		var opts metav1.ListOptions
		if a, ok := action.(k8stesting.WatchActionImpl); ok {
			opts = a.ListOptions
		}
		w, err := h.client.Tracker().Watch(action.GetResource(), action.GetNamespace(), opts)
		if err != nil {
			return false, nil, err
		}
		p := newPumpedWatch(w)
		mu.Lock()
		pumps = append(pumps, p)
		mu.Unlock()
		return true, p, nil
	})
	h.client.PrependReactor("*", "*", func(k8stesting.Action) (bool, runtime.Object, error) {
		mu.Lock()
		defer mu.Unlock()
		for _, p := range pumps {
			for len(p.events) > int(watch.DefaultChanSize/2) {
				time.Sleep(time.Millisecond)
			}
		}
		return false, nil, nil
	})
}

// pumpedWatch reads a watch at once into a queue of its own.
type pumpedWatch struct {
	in     watch.Interface
	events <-chan watch.Event
	out    chan watch.Event
	stop   chan struct{}
	once   sync.Once
}

func newPumpedWatch(in watch.Interface) *pumpedWatch {
	p := &pumpedWatch{in: in, events: in.ResultChan(), out: make(chan watch.Event), stop: make(chan struct{})}
	go p.pump()
	return p
}

func (p *pumpedWatch) pump() {
	defer close(p.out)
	var queue []watch.Event
	events := p.events
	for events != nil || len(queue) > 0 {
		var out chan watch.Event
		var next watch.Event
		if len(queue) > 0 {
			out, next = p.out, queue[0]
		}
		select {
		case e, ok := <-events:
			if !ok {
				events = nil
				continue
			}
			queue = append(queue, e)
		case out <- next:
			queue = queue[1:]
		case <-p.stop:
			return
		}
	}
}

func (p *pumpedWatch) Stop() {
	p.once.Do(func() {
		p.in.Stop()
		close(p.stop)
	})
}

func (p *pumpedWatch) ResultChan() <-chan watch.Event { return p.out }

// rerun stops h's controller as a killed step would (no teardown) and
// starts another on the same API server, re-attaching; it returns the new
// controller once it started.
func rerun(t *testing.T, h *harness) *Controller {
	t.Helper()
	h.stopRun()
	<-h.done
	opts := h.ctrl.opts
	opts.Identity.Owner = stepOwner("step-2")
	c := New(opts)
	ctx, stop := context.WithCancel(context.Background())
	t.Cleanup(stop)
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	return c
}

// A counted restart is written into the ledger before its delete goes out,
// also when the ledger's Service was removed from outside just before: the
// Service is created again carrying the ledger, so a step that dies before
// the replacement exists leaves the count to its retry. (A write that met
// NotFound counted as done: the delete went out, the Service came back
// empty, and the retry counted 0 restarts instead of 1.)
func TestACountedRestartSurvivesTheLedgersServiceRemovedFromOutside(t *testing.T) {
	t.Parallel()
	job := tfJob(v1alpha1.RestartPolicyExitCode)
	var removed atomic.Bool
	h := startWith(t, job, func(h *harness, _ *Options) {
		// The ledger's Service goes just as its first ledger write arrives.
		h.client.PrependReactor("patch", "services", func(action k8stesting.Action) (bool, runtime.Object, error) {
			a := action.(k8stesting.PatchAction)
			if strings.Contains(string(a.GetPatch()), v1alpha1.AnnotationRestartLedger) && removed.CompareAndSwap(false, true) {
				if err := h.client.Tracker().Delete(servicesResource, ns, a.GetName()); err != nil {
					t.Errorf("removing the Service: %v", err)
				}
			}
			return false, nil, nil
		})
	})
	for _, name := range []string{"mnist-ps-0", "mnist-worker-0", "mnist-worker-1"} {
		h.setStatus(name, corev1.PodRunning, 0)
	}
	// No replacement may be created: the step dies before it exists.
	h.client.PrependReactor("create", "pods", func(action k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, quotaRefusal(action.(k8stesting.CreateAction).GetObject().(metav1.Object).GetName())
	})
	failed := h.pod("mnist-worker-1")
	h.setStatus("mnist-worker-1", corev1.PodFailed, 137)
	testutil.Eventually(t, waitTimeout, "the failed worker-1 deleted for its recreation", func() bool {
		p, err := h.client.CoreV1().Pods(ns).Get(context.Background(), "mnist-worker-1", metav1.GetOptions{})
		return apierrors.IsNotFound(err) || err == nil && p.UID != failed.UID
	})
	if !removed.Load() {
		t.Fatal("the ledger's Service was never removed: the test did not run its case")
	}
	c := rerun(t, h)
	if got := c.View().Restarts; got != 1 {
		t.Errorf("the step that re-attached counts %d restarts, want 1: worker-1's recreation", got)
	}
}

// The teardown sends the delete of the job's ConfigMap (as those of its
// Secrets, NetworkPolicies and PodGroup, which no List confirms) again
// until it lands: one refused for longer than a write's in-place retries
// (kube-apiserver restarting as the teardown ran) is not left behind.
func TestCleanupSendsTheConfigMapsDeleteAgainUntilItLands(t *testing.T) {
	t.Parallel()
	h := succeededWithItsServicesCached(t)
	var failing atomic.Bool
	failing.Store(true)
	h.client.PrependReactor("delete", "configmaps", func(k8stesting.Action) (bool, runtime.Object, error) {
		if failing.Load() {
			return true, nil, apierrors.NewServiceUnavailable("the API server restarts")
		}
		return false, nil, nil
	})
	time.AfterFunc(3*time.Second, func() { failing.Store(false) })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	left, err := h.ctrl.Cleanup(ctx, true, true)
	cms, _ := h.client.CoreV1().ConfigMaps(ns).List(context.Background(), metav1.ListOptions{})
	if len(cms.Items) != 0 || len(left) != 0 || err != nil {
		t.Errorf("after the teardown: %d ConfigMaps, left %v, err %v; want the ConfigMap deleted once its delete landed", len(cms.Items), left, err)
	}
}
