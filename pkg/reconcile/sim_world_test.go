package reconcile

import (
	"container/heap"
	"context"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"net"
	"slices"
	"strconv"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/kubernetes/scheme"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
)

// The simulated world: an API server (the fake clientset's tracker behind
// one reactor that plays admission, graceful deletion, preconditions and
// injected faults), a kubelet per node, and informers whose events the
// world delivers in an order and with delays drawn from a seed. Everything
// happens on one goroutine against a virtual clock, so one seed replays
// exactly.

var (
	podsGVR       = corev1.SchemeGroupVersion.WithResource("pods")
	servicesGVR   = corev1.SchemeGroupVersion.WithResource("services")
	configMapsGVR = corev1.SchemeGroupVersion.WithResource("configmaps")
	secretsGVR    = corev1.SchemeGroupVersion.WithResource("secrets")
	simResources  = []schema.GroupVersionResource{podsGVR, servicesGVR, configMapsGVR, secretsGVR}
)

// simInformer is a SharedIndexInformer the world feeds: its cache and
// handlers change only when the world delivers an event.
type simInformer struct {
	cache.SharedIndexInformer // nil: a method the controller does not call panics
	indexer                   cache.Indexer
	handlers                  []cache.ResourceEventHandler
	transform                 cache.TransformFunc
}

func newSimInformer() *simInformer {
	return &simInformer{indexer: cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})}
}

func (i *simInformer) AddEventHandler(h cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error) {
	i.handlers = append(i.handlers, h)
	return nil, nil
}
func (i *simInformer) GetIndexer() cache.Indexer                { return i.indexer }
func (i *simInformer) GetStore() cache.Store                    { return i.indexer }
func (i *simInformer) HasSynced() bool                          { return true }
func (i *simInformer) RunWithContext(context.Context)           {}
func (i *simInformer) SetTransform(f cache.TransformFunc) error { i.transform = f; return nil }
func (i *simInformer) slim(obj runtime.Object) runtime.Object {
	obj = obj.DeepCopyObject()
	if i.transform != nil {
		out, _ := i.transform(obj)
		obj = out.(runtime.Object)
	}
	return obj
}

// deliver applies one watch event to the cache and calls the handlers, as
// a reflector and the informer's processor would; a delete may come as a
// tombstone, as after a relist.
func (i *simInformer) deliver(e watch.Event, tombstone bool) {
	obj := i.slim(e.Object)
	key, _ := cache.MetaNamespaceKeyFunc(obj)
	old, exists, _ := i.indexer.GetByKey(key)
	switch e.Type {
	case watch.Added, watch.Modified:
		_ = i.indexer.Update(obj)
		for _, h := range i.handlers {
			if exists {
				h.OnUpdate(old, obj)
			} else {
				h.OnAdd(obj, false)
			}
		}
	case watch.Deleted:
		_ = i.indexer.Delete(obj)
		var gone any = obj
		if tombstone {
			gone = cache.DeletedFinalStateUnknown{Key: key, Obj: obj}
		}
		for _, h := range i.handlers {
			h.OnDelete(gone)
		}
	}
}

// simQueue stands in for the controller's workqueue: an Add asks the world
// for a sync a drawn moment later, so that deliveries meanwhile fold into it.
type simQueue struct {
	workqueue.TypedRateLimitingInterface[string] // nil: only Add is called
	w                                            *simWorld
	gen                                          int
}

func (q *simQueue) Add(string) { q.w.requestSync(q.gen) }

// timer is one thing the world does at a virtual time.
type timer struct {
	at  time.Time
	seq int
	// gen, when > 0, ties the timer to one controller: it is dropped once
	// that controller is gone.
	gen  int
	what string
	do   func()
}

type timers []*timer

func (t timers) Len() int { return len(t) }
func (t timers) Less(i, j int) bool {
	if !t[i].at.Equal(t[j].at) {
		return t[i].at.Before(t[j].at)
	}
	return t[i].seq < t[j].seq
}
func (t timers) Swap(i, j int) { t[i], t[j] = t[j], t[i] }
func (t *timers) Push(x any)   { *t = append(*t, x.(*timer)) }
func (t *timers) Pop() any {
	old := *t
	x := old[len(old)-1]
	*t = old[:len(old)-1]
	return x
}

// pendingEvent is a watch event on its way to the current controller's informer.
type pendingEvent struct {
	event     watch.Event
	due       time.Time
	tombstone bool
}

// simNode is a node as its kubelet and the node lifecycle controller see it.
type simNode struct {
	name string
	// up is false while the kubelet does not answer: nothing on the node
	// changes, graceful deletions do not finish.
	up bool
	// deleted: the Node object is gone (the pod garbage collector removed its pods).
	deleted bool
}

// apiFault is a window of virtual time in which writes fail.
type apiFault struct {
	from, until time.Time
	// code: 500, 503, 429, 409 or 504 (a timeout); applied: the write lands,
	// then the answer is lost (a timeout the client sees).
	code    int
	applied bool
	// reads: reads are refused too (API Priority and Fairness throttles
	// every request of the step's flow).
	reads bool
}

func (f apiFault) error(verb string, gvr schema.GroupVersionResource, name string) error {
	gr := gvr.GroupResource()
	switch f.code {
	case 429:
		return apierrors.NewTooManyRequests("injected", 1)
	case 503:
		return apierrors.NewServiceUnavailable("injected")
	case 409:
		return apierrors.NewConflict(gr, name, fmt.Errorf("injected"))
	case 504:
		return apierrors.NewTimeoutError("injected", 1)
	}
	return apierrors.NewInternalError(fmt.Errorf("injected %s %s/%s", verb, gr, name))
}

// simWorld is the API server, the kubelets and the informers' transport.
type simWorld struct {
	// removedEnded holds the pods removed after they failed or were
	// disrupted: a peer's end that a re-attached step sees as a loss.
	removedEnded []*corev1.Pod

	rng     *rand.Rand // delivery orders and delays: the order seed
	clock   *clocktesting.FakeClock
	client  *fake.Clientset
	tracker k8stesting.ObjectTracker
	job     *v1alpha1.TrainJob
	timers  timers
	seq     int

	// The controller under test, its generation (a new one after each
	// kill of the step) and its informers' inboxes.
	ctrl        *Controller
	gen         int
	informers   map[schema.GroupVersionResource]*simInformer
	inbox       map[schema.GroupVersionResource][]pendingEvent
	syncPending bool

	nodes     []*simNode
	apiFaults []apiFault
	// outageUntil is when kube-apiserver answers again after a restart:
	// until then every request is refused, and every watch is broken.
	outageUntil time.Time
	// lease is the job's Lease (sim_step_test.go).
	lease simLease
	// watchBroken: the informers' watches ended (410 Gone, or
	// kube-apiserver went away); nothing is delivered until they relist.
	watchBroken bool
	quotaUntil  time.Time
	quotaFrom   time.Time
	uidSeq      int
	trace       []string
	traceOn     bool
	// onPodCreated sees every pod the API server stored, onPodRemoved
	// every pod it removed.
	onPodCreated, onPodRemoved func(*corev1.Pod)
	// onBlind is called as the watches break, onRelist as the informers
	// relist.
	onBlind, onRelist func()
	// panicOnPodCreate makes the next pod create panic in the client, and
	// calls onPanic first.
	panicOnPodCreate bool
	onPanic          func()

	// dyn serves the PodGroups and Kueue's Workloads (sim_scheduling_test.go).
	dyn *dynamicfake.FakeDynamicClient
	// roomFrom is when the cluster (coscheduling) or the ClusterQueue
	// (Kueue) has room for the job's group.
	roomFrom      time.Time
	kueueAdmitted map[string]bool
	// finalizing holds the pods deleted but kept by a finalizer: each goes
	// once its last finalizer is dropped.
	finalizing map[types.UID]bool
	// load is the workers' cpu use, in percent of their request.
	load int64
}

const simNamespace = ns

// simEpoch is the virtual clock's start.
var simEpoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func newSimWorld(job *v1alpha1.TrainJob, orderSeed uint64, nodes int) *simWorld {
	w := &simWorld{
		rng:           rand.New(rand.NewPCG(orderSeed, 0x5eed)),
		clock:         clocktesting.NewFakeClock(simEpoch),
		job:           job,
		kueueAdmitted: map[string]bool{},
		finalizing:    map[types.UID]bool{},
	}
	for i := range nodes {
		w.nodes = append(w.nodes, &simNode{name: "node-" + strconv.Itoa(i), up: true})
	}
	// A plain tracker: the clientset's own keeps managed fields, which
	// cost most of a schedule's time and which nothing here reads.
	w.tracker = &versionedTracker{ObjectTracker: k8stesting.NewObjectTracker(scheme.Scheme, scheme.Codecs.UniversalDecoder())}
	w.client = &fake.Clientset{}
	w.client.AddReactor("*", "*", w.serve)
	w.dyn = w.newSimDynamic()
	return w
}

func (w *simWorld) now() time.Time { return w.clock.Now() }

func (w *simWorld) logf(format string, args ...any) {
	if w.traceOn {
		w.trace = append(w.trace, fmt.Sprintf("%8.3fs ", w.now().Sub(simEpoch).Seconds())+fmt.Sprintf(format, args...))
	}
}

// after schedules do at now+d; gen ties it to the current controller.
func (w *simWorld) after(d time.Duration, gen int, what string, do func()) {
	w.seq++
	heap.Push(&w.timers, &timer{at: w.now().Add(d), seq: w.seq, gen: gen, what: what, do: do})
}

// deliveryDelay is how long a watch event takes to reach the informer:
// mostly at once, sometimes late, now and then very late.
func (w *simWorld) deliveryDelay() time.Duration {
	switch p := w.rng.IntN(100); {
	case p < 60:
		return time.Duration(w.rng.IntN(20)) * time.Millisecond
	case p < 92:
		return time.Duration(20+w.rng.IntN(500)) * time.Millisecond
	default:
		return time.Duration(500+w.rng.IntN(2500)) * time.Millisecond
	}
}

// emit queues an event for the current controller's informer of its
// resource: in order within the resource, each after a drawn delay.
func (w *simWorld) emit(gvr schema.GroupVersionResource, t watch.EventType, obj runtime.Object) {
	if w.ctrl == nil || w.inbox == nil || w.watchBroken {
		return // no watch delivers it: a relist will
	}
	if m, ok := obj.(metav1.Object); ok && m.GetLabels()[v1alpha1.LabelJobName] != w.job.Name {
		return // not selected by the job's informers
	}
	due := w.now().Add(w.deliveryDelay())
	if q := w.inbox[gvr]; len(q) > 0 && q[len(q)-1].due.After(due) {
		due = q[len(q)-1].due
	}
	w.inbox[gvr] = append(w.inbox[gvr], pendingEvent{event: watch.Event{Type: t, Object: obj.DeepCopyObject()}, due: due})
}

// requestSync is the workqueue's Add: one sync a drawn moment later, into
// which whatever arrives meanwhile folds.
func (w *simWorld) requestSync(gen int) {
	if gen != w.gen || w.syncPending {
		return
	}
	w.syncPending = true
	w.after(time.Duration(w.rng.IntN(150))*time.Millisecond, gen, "sync", func() { w.syncPending = false; w.onSync() })
}

// onSync is set by the simulation: it runs one sync of the controller.
func (w *simWorld) onSync() {}

// nextStep runs the earliest timer or delivery; false when nothing is left
// before until.
func (w *simWorld) nextStep(until time.Time, sync func()) bool {
	var at time.Time
	var which []schema.GroupVersionResource
	for _, gvr := range simResources {
		q := w.inbox[gvr]
		if len(q) == 0 {
			continue
		}
		switch {
		case at.IsZero() || q[0].due.Before(at):
			at, which = q[0].due, []schema.GroupVersionResource{gvr}
		case q[0].due.Equal(at):
			which = append(which, gvr)
		}
	}
	for len(w.timers) > 0 && w.timers[0].gen > 0 && w.timers[0].gen != w.gen {
		heap.Pop(&w.timers) // its controller is gone
	}
	if len(w.timers) > 0 && (at.IsZero() || !w.timers[0].at.After(at)) {
		if w.timers[0].at.After(until) {
			return false
		}
		// A timer due with a delivery: either may go first.
		if len(which) == 0 || w.timers[0].at.Before(at) || w.rng.IntN(2) == 0 {
			t := heap.Pop(&w.timers).(*timer)
			if t.at.After(w.now()) {
				w.clock.SetTime(t.at)
			}
			if t.what == "sync" {
				w.syncPending = false
				sync()
				return true
			}
			t.do()
			return true
		}
	}
	if at.IsZero() || at.After(until) {
		if !until.After(w.now()) {
			return false
		}
		w.clock.SetTime(until)
		return false
	}
	if at.After(w.now()) {
		w.clock.SetTime(at)
	}
	gvr := which[w.rng.IntN(len(which))]
	e := w.inbox[gvr][0]
	w.inbox[gvr] = w.inbox[gvr][1:]
	if inf := w.informers[gvr]; inf != nil {
		w.logf("deliver %s %s %s", e.event.Type, gvr.Resource, describe(e.event.Object))
		inf.deliver(e.event, e.tombstone)
	}
	return true
}

func describe(obj runtime.Object) string {
	m, ok := obj.(metav1.Object)
	if !ok {
		return fmt.Sprintf("%T", obj)
	}
	s := m.GetName() + "@" + string(m.GetUID())
	if pod, ok := obj.(*corev1.Pod); ok {
		s += " " + string(pod.Status.Phase)
		if pod.DeletionTimestamp != nil {
			s += " deleting"
		}
		if code, ok := exitCodeOf(pod); ok {
			s += " exit " + strconv.Itoa(int(code))
		}
		for _, c := range pod.Status.Conditions {
			if c.Type == v1alpha1.PodConditionDisruptionTarget {
				s += " disrupted(" + c.Reason + ")"
			}
		}
	}
	return s
}

func exitCodeOf(pod *corev1.Pod) (int32, bool) {
	for _, cs := range pod.Status.ContainerStatuses {
		if t := cs.State.Terminated; t != nil {
			return t.ExitCode, true
		}
	}
	return 0, false
}

// ---- the API server ----

// versionedTracker gives every stored version of an object a new
// resourceVersion, as the API server does: the controller tells versions
// of a pod apart by it (the plain tracker leaves it empty).
type versionedTracker struct {
	k8stesting.ObjectTracker
	version int
}

func (t *versionedTracker) next(obj runtime.Object) {
	if m, ok := obj.(metav1.Object); ok {
		t.version++
		m.SetResourceVersion(strconv.Itoa(t.version))
	}
}

func (t *versionedTracker) Create(gvr schema.GroupVersionResource, obj runtime.Object, ns string, opts ...metav1.CreateOptions) error {
	t.next(obj)
	return t.ObjectTracker.Create(gvr, obj, ns, opts...)
}

func (t *versionedTracker) Update(gvr schema.GroupVersionResource, obj runtime.Object, ns string, opts ...metav1.UpdateOptions) error {
	t.next(obj)
	return t.ObjectTracker.Update(gvr, obj, ns, opts...)
}

func (t *versionedTracker) Patch(gvr schema.GroupVersionResource, obj runtime.Object, ns string, opts ...metav1.PatchOptions) error {
	t.next(obj)
	return t.ObjectTracker.Patch(gvr, obj, ns, opts...)
}

func gvrOf(action k8stesting.Action) schema.GroupVersionResource { return action.GetResource() }

// serve is the API server: every request of the controller passes here.
func (w *simWorld) serve(action k8stesting.Action) (bool, runtime.Object, error) {
	gvr := gvrOf(action)
	if !slices.Contains(simResources, gvr) {
		return false, nil, nil
	}
	verb := action.GetVerb()
	name := ""
	if a, ok := action.(interface{ GetName() string }); ok {
		name = a.GetName()
	}
	if w.outage() {
		w.logf("refuse %s %s %s: kube-apiserver restarts", verb, gvr.Resource, name)
		return true, nil, outageError()
	}
	fault := w.writeFault(verb)
	if fault != nil && !fault.applied {
		w.logf("refuse %s %s %s: %d", verb, gvr.Resource, name, fault.code)
		if fault.code == 409 && verb == "patch" {
			// The API server retries a patch's conflicts itself: one it
			// answers with is another writer's change, which the watch brings.
			if obj, err := w.tracker.Get(gvr, action.GetNamespace(), name); err == nil && w.tracker.Update(gvr, obj, action.GetNamespace()) == nil {
				w.emit(gvr, watch.Modified, obj)
			}
		}
		return true, nil, fault.error(verb, gvr, name)
	}
	if verb == "create" && gvr == podsGVR && w.panicOnPodCreate {
		w.panicOnPodCreate = false
		if w.onPanic != nil {
			w.onPanic()
		}
		panic("injected in a pod create")
	}
	if verb == "create" && gvr == podsGVR && w.quotaFull() {
		pod := action.(k8stesting.CreateAction).GetObject().(metav1.Object)
		w.logf("quota refuses pod %s", pod.GetName())
		return true, nil, apierrors.NewForbidden(gvr.GroupResource(), pod.GetName(),
			fmt.Errorf("exceeded quota: team, requested: pods=1, used: pods=9, limited: pods=9"))
	}
	if err := w.staleUpdate(action, gvr); err != nil {
		w.logf("refuse update %s %s: %v", gvr.Resource, name, err)
		return true, nil, err
	}
	obj, err := w.handle(action, gvr, verb)
	if fault != nil && err == nil {
		w.logf("lost the answer to %s %s %s: %d", verb, gvr.Resource, name, fault.code)
		return true, nil, fault.error(verb, gvr, name)
	}
	return true, obj, err
}

// staleUpdate is the API server's optimistic concurrency: an update made
// from a read of an older resourceVersion than the stored one is refused
// with a Conflict.
func (w *simWorld) staleUpdate(action k8stesting.Action, gvr schema.GroupVersionResource) error {
	a, ok := action.(k8stesting.UpdateAction)
	if !ok {
		return nil
	}
	m, ok := a.GetObject().(metav1.Object)
	if !ok || m.GetResourceVersion() == "" {
		return nil
	}
	stored, err := w.tracker.Get(gvr, action.GetNamespace(), m.GetName())
	if err != nil {
		return nil // the update's own NotFound
	}
	if rv := stored.(metav1.Object).GetResourceVersion(); rv != m.GetResourceVersion() {
		return apierrors.NewConflict(gvr.GroupResource(), m.GetName(), fmt.Errorf("the object has been modified; please apply your changes to the latest version and try again (stored %s, sent %s)", rv, m.GetResourceVersion()))
	}
	return nil
}

// writeFault is the injected fault a request of verb meets now, if any:
// writes meet every fault, reads only API Priority and Fairness's 429s.
func (w *simWorld) writeFault(verb string) *apiFault {
	write := verb == "create" || verb == "update" || verb == "patch" || verb == "delete"
	for i := range w.apiFaults {
		f := &w.apiFaults[i]
		if w.now().Before(f.from) || !w.now().Before(f.until) || !write && !f.reads {
			continue
		}
		// A write meets 409 only as an update's or a patch's conflict.
		if f.code != 409 || verb == "update" || verb == "patch" {
			return f
		}
	}
	return nil
}

// outage reports whether kube-apiserver is away (restarting).
func (w *simWorld) outage() bool { return w.now().Before(w.outageUntil) }

// outageError is what a client meets while kube-apiserver restarts.
func outageError() error {
	return &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
}

// leaseWritable reports whether a write of the job's Lease lands now. A
// conflict window is another writer's changes to the job's objects: no
// other writer touches the Lease.
func (w *simWorld) leaseWritable() bool {
	f := w.writeFault("update")
	return (f == nil || f.code == 409) && !w.outage()
}

func (w *simWorld) quotaFull() bool {
	return !w.now().Before(w.quotaFrom) && w.now().Before(w.quotaUntil)
}

func (w *simWorld) handle(action k8stesting.Action, gvr schema.GroupVersionResource, verb string) (runtime.Object, error) {
	switch verb {
	case "create":
		obj := action.(k8stesting.CreateAction).GetObject().DeepCopyObject()
		m := obj.(metav1.Object)
		if m.GetNamespace() == "" {
			m.SetNamespace(action.GetNamespace())
		}
		w.uidSeq++
		m.SetUID(types.UID(fmt.Sprintf("u%d", w.uidSeq)))
		m.SetCreationTimestamp(metav1.NewTime(w.now()))
		if pod, ok := obj.(*corev1.Pod); ok {
			kueueWebhook(pod)
		}
		if err := w.tracker.Create(gvr, obj, m.GetNamespace()); err != nil {
			return nil, err
		}
		w.logf("created %s %s", gvr.Resource, describe(obj))
		w.emit(gvr, watch.Added, obj)
		if pod, ok := obj.(*corev1.Pod); ok {
			w.podCreated(pod)
		}
		return obj, nil
	case "delete":
		return nil, w.delete(action.(k8stesting.DeleteAction), gvr)
	case "update", "patch":
		_, obj, err := k8stesting.ObjectReaction(w.tracker)(action)
		if err != nil {
			return nil, err
		}
		w.emit(gvr, watch.Modified, obj)
		if pod, ok := obj.(*corev1.Pod); ok {
			w.podChanged(pod)
		}
		return obj, nil
	}
	_, obj, err := k8stesting.ObjectReaction(w.tracker)(action)
	return obj, err
}

// delete honours the UID precondition and a pod's grace period: a pod on a
// node is only marked; its kubelet finishes the deletion, unless the node
// stopped answering, where only a delete with grace 0 removes it. A pod that
// ended has no grace period, as the API server's pod strategy gives it none
// (nothing runs that its kubelet must stop).
func (w *simWorld) delete(a k8stesting.DeleteAction, gvr schema.GroupVersionResource) error {
	obj, err := w.tracker.Get(gvr, a.GetNamespace(), a.GetName())
	if err != nil {
		return err
	}
	m := obj.(metav1.Object)
	opts := a.GetDeleteOptions()
	if p := opts.Preconditions; p != nil && p.UID != nil && *p.UID != m.GetUID() {
		return apierrors.NewConflict(gvr.GroupResource(), a.GetName(), fmt.Errorf("precondition failed: UID in precondition: %s, UID in object meta: %s", *p.UID, m.GetUID()))
	}
	pod, isPod := obj.(*corev1.Pod)
	force := opts.GracePeriodSeconds != nil && *opts.GracePeriodSeconds == 0
	if !isPod || force || pod.Spec.NodeName == "" || pod.Status.Phase == corev1.PodFailed || pod.Status.Phase == corev1.PodSucceeded {
		return w.remove(gvr, obj)
	}
	if pod.DeletionTimestamp == nil {
		pod = pod.DeepCopy()
		now := metav1.NewTime(w.now())
		pod.DeletionTimestamp = &now
		if err := w.tracker.Update(gvr, pod, pod.Namespace); err != nil {
			return err
		}
		w.logf("deleting %s", describe(pod))
		w.emit(gvr, watch.Modified, pod)
	}
	w.kubeletFinishesDeletion(pod)
	return nil
}

func (w *simWorld) remove(gvr schema.GroupVersionResource, obj runtime.Object) error {
	m := obj.(metav1.Object)
	if pod, ok := obj.(*corev1.Pod); ok && len(pod.Finalizers) > 0 {
		// A finalizer keeps it: it goes once the last one is dropped.
		w.finalizing[pod.UID] = true
		if pod.DeletionTimestamp == nil {
			pod = pod.DeepCopy()
			now := metav1.NewTime(w.now())
			pod.DeletionTimestamp = &now
			if err := w.tracker.Update(gvr, pod, pod.Namespace); err != nil {
				return err
			}
			w.emit(gvr, watch.Modified, pod)
		}
		w.logf("kept by its finalizers: %s", describe(pod))
		if pod.Spec.NodeName != "" && (pod.Status.Phase == corev1.PodRunning || pod.Status.Phase == corev1.PodPending) {
			// Deleted, even with grace 0: its kubelet stops what runs.
			w.kubeletFinishesDeletion(pod)
		}
		return nil
	}
	if pod, ok := obj.(*corev1.Pod); ok {
		delete(w.finalizing, pod.UID)
		if w.onPodRemoved != nil {
			w.onPodRemoved(pod)
		}
		if _, _, ended := simEnded(pod); ended {
			w.removedEnded = append(w.removedEnded, pod.DeepCopy())
		}
	}
	if err := w.tracker.Delete(gvr, m.GetNamespace(), m.GetName()); err != nil {
		return err
	}
	w.logf("removed %s %s", gvr.Resource, describe(obj))
	w.emit(gvr, watch.Deleted, obj)
	return nil
}

// ---- the kubelets ----

func (w *simWorld) node(name string) *simNode {
	for _, n := range w.nodes {
		if n.name == name {
			return n
		}
	}
	return nil
}

// livePod reads a pod of the API server by name (nil when none).
func (w *simWorld) livePod(name string) *corev1.Pod {
	obj, err := w.tracker.Get(podsGVR, simNamespace, name)
	if err != nil {
		return nil
	}
	return obj.(*corev1.Pod).DeepCopy()
}

// updatePod writes a pod's new state as the kubelet or a control-plane
// controller would (never refused).
func (w *simWorld) updatePod(pod *corev1.Pod, why string) {
	if err := w.tracker.Update(podsGVR, pod, pod.Namespace); err != nil {
		return
	}
	w.logf("%s: %s", why, describe(pod))
	w.emit(podsGVR, watch.Modified, pod)
	w.podChanged(pod)
}

// podCreated schedules the new pod's start unless it is gated.
func (w *simWorld) podCreated(pod *corev1.Pod) {
	if w.onPodCreated != nil {
		w.onPodCreated(pod)
	}
	w.podChanged(pod)
}

// podChanged starts a pod that may start now, and removes one whose
// deletion only its finalizers held up once they are gone.
func (w *simWorld) podChanged(pod *corev1.Pod) {
	if w.finalizing[pod.UID] && len(pod.Finalizers) == 0 {
		_ = w.remove(podsGVR, pod)
		return
	}
	w.kueueNotices(pod)
	if pod.Spec.NodeName != "" || len(pod.Spec.SchedulingGates) > 0 || pod.DeletionTimestamp != nil {
		return
	}
	uid := pod.UID
	w.after(time.Duration(100+w.rng.IntN(900))*time.Millisecond, 0, "schedule "+pod.Name, func() { w.schedule(pod.Name, uid) })
}

// schedule binds a pending pod to a node that answers and starts it.
func (w *simWorld) schedule(name string, uid types.UID) {
	pod := w.livePod(name)
	if pod == nil || pod.UID != uid || pod.Spec.NodeName != "" || pod.DeletionTimestamp != nil || len(pod.Spec.SchedulingGates) > 0 {
		return
	}
	var node *simNode
	if !w.coschedulingHolds(pod) {
		node = w.nodeFor(name)
	}
	if node == nil {
		// No node to run on, or not yet for the group: unschedulable,
		// looked at again later.
		if !unschedulable(pod) {
			pod.Status.Phase = corev1.PodPending
			pod.Status.Conditions = append(pod.Status.Conditions, corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
				Reason: corev1.PodReasonUnschedulable, LastTransitionTime: metav1.NewTime(w.now())})
			w.updatePod(pod, "unschedulable")
		}
		// Looked at again in a second, or when the group has room.
		w.after(max(time.Second, w.roomFrom.Sub(w.now())), 0, "schedule "+name, func() { w.schedule(name, uid) })
		return
	}
	pod.Spec.NodeName = node.name
	pod.Status.Conditions = nil
	pod.Status.Phase = corev1.PodPending
	w.updatePod(pod, "bound to "+node.name)
	w.after(time.Duration(100+w.rng.IntN(900))*time.Millisecond, 0, "start "+name, func() { w.start(name, uid) })
}

// nodeFor is the node a replica goes to: the same whatever the order of
// events (the next one that answers when its own does not), so that which
// replicas a node's loss takes is the fault script's, not the order's.
func (w *simWorld) nodeFor(name string) *simNode {
	h := fnv.New32a()
	_, _ = h.Write([]byte(name))
	for i := range w.nodes {
		n := w.nodes[(int(h.Sum32())+i)%len(w.nodes)]
		if n.up && !n.deleted {
			return n
		}
	}
	return nil
}

// start runs a bound pod's containers.
func (w *simWorld) start(name string, uid types.UID) {
	pod := w.livePod(name)
	if pod == nil || pod.UID != uid || pod.DeletionTimestamp != nil || pod.Status.Phase != corev1.PodPending {
		return
	}
	if n := w.node(pod.Spec.NodeName); n == nil || !n.up {
		return
	}
	pod.Status.Phase = corev1.PodRunning
	pod.Status.ContainerStatuses = nil
	for _, c := range pod.Spec.Containers {
		pod.Status.ContainerStatuses = append(pod.Status.ContainerStatuses, corev1.ContainerStatus{Name: c.Name,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(w.now())}}})
	}
	setCondition(pod, corev1.PodReady, corev1.ConditionTrue, "", w.now())
	w.updatePod(pod, "running")
}

func setCondition(pod *corev1.Pod, t corev1.PodConditionType, status corev1.ConditionStatus, reason string, now time.Time) {
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == t {
			if pod.Status.Conditions[i].Status != status {
				pod.Status.Conditions[i].LastTransitionTime = metav1.NewTime(now)
			}
			pod.Status.Conditions[i].Status, pod.Status.Conditions[i].Reason = status, reason
			return
		}
	}
	pod.Status.Conditions = append(pod.Status.Conditions, corev1.PodCondition{Type: t, Status: status, Reason: reason, LastTransitionTime: metav1.NewTime(now)})
}

// exit ends a running pod's main container with code, as its kubelet
// reports it: in place for a pod that restarts its containers, else the
// pod's end. It reports whether the pod was running.
func (w *simWorld) exit(pod *corev1.Pod, code int32) bool {
	if pod.Status.Phase != corev1.PodRunning || len(pod.Status.ContainerStatuses) == 0 {
		return false
	}
	if n := w.node(pod.Spec.NodeName); n == nil || !n.up {
		return false
	}
	cs := &pod.Status.ContainerStatuses[0]
	if cs.State.Running == nil {
		return false
	}
	term := &corev1.ContainerStateTerminated{ExitCode: code, StartedAt: cs.State.Running.StartedAt, FinishedAt: metav1.NewTime(w.now()), Reason: "Error"}
	if code == 0 {
		term.Reason, term.Message = "Completed", `{"loss":0.1}`
	}
	inPlace := pod.Spec.RestartPolicy == corev1.RestartPolicyAlways || pod.Spec.RestartPolicy == corev1.RestartPolicyOnFailure && code != 0
	if inPlace {
		cs.LastTerminationState.Terminated = term
		cs.RestartCount++
		cs.State.Running = &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(w.now())}
		w.updatePod(pod, "restarted in place after exit "+strconv.Itoa(int(code)))
		return true
	}
	cs.State = corev1.ContainerState{Terminated: term}
	pod.Status.Phase = corev1.PodFailed
	if code == 0 {
		pod.Status.Phase = corev1.PodSucceeded
	}
	setCondition(pod, corev1.PodReady, corev1.ConditionFalse, "PodCompleted", w.now())
	w.updatePod(pod, "exited")
	return true
}

// kubeletFinishesDeletion removes a pod marked for deletion once its
// kubelet stopped it, which a node that stopped answering never does.
func (w *simWorld) kubeletFinishesDeletion(pod *corev1.Pod) {
	name, uid := pod.Name, pod.UID
	w.after(time.Duration(200+w.rng.IntN(1800))*time.Millisecond, 0, "finish deleting "+name, func() {
		live := w.livePod(name)
		if live == nil || live.UID != uid || live.DeletionTimestamp == nil {
			return
		}
		if n := w.node(live.Spec.NodeName); n != nil && !n.up {
			return // finished when the node answers again, or by a forced delete
		}
		if live.Status.Phase == corev1.PodRunning {
			// The container got SIGTERM: its final status is written first.
			live.Status.Phase = corev1.PodFailed
			for i := range live.Status.ContainerStatuses {
				live.Status.ContainerStatuses[i].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 143, Reason: "Error", FinishedAt: metav1.NewTime(w.now())}}
			}
			w.updatePod(live, "stopped")
		} else if live.Status.Phase == corev1.PodPending && live.Spec.NodeName != "" {
			// Bound, not started: the kubelet ends it all the same.
			live.Status.Phase = corev1.PodFailed
			w.updatePod(live, "stopped before it started")
		}
		_ = w.remove(podsGVR, live)
	})
}

// jobPods lists the API server's pods of the job.
func (w *simWorld) jobPods() []*corev1.Pod {
	list, err := w.tracker.List(podsGVR, corev1.SchemeGroupVersion.WithKind("Pod"), simNamespace)
	if err != nil {
		return nil
	}
	var out []*corev1.Pod
	// The list is the tracker's copy already.
	for i := range list.(*corev1.PodList).Items {
		p := &list.(*corev1.PodList).Items[i]
		if p.Labels[v1alpha1.LabelJobName] == w.job.Name {
			out = append(out, p)
		}
	}
	slices.SortFunc(out, func(a, b *corev1.Pod) int { return cmpString(a.Name, b.Name) })
	return out
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// jobObjects lists the API server's objects of the job of one resource.
func (w *simWorld) jobObjects(gvr schema.GroupVersionResource) []metav1.Object {
	kinds := map[schema.GroupVersionResource]string{podsGVR: "Pod", servicesGVR: "Service", configMapsGVR: "ConfigMap", secretsGVR: "Secret"}
	list, err := w.tracker.List(gvr, corev1.SchemeGroupVersion.WithKind(kinds[gvr]), simNamespace)
	if err != nil {
		return nil
	}
	objs, err := metaList(list)
	if err != nil {
		return nil
	}
	var out []metav1.Object
	for _, m := range objs {
		if m.GetLabels()[v1alpha1.LabelJobName] == w.job.Name {
			out = append(out, m)
		}
	}
	return out
}

// jobStartShown is when the job started as the objects the API server
// holds of it show a step starting now: the earliest creation of its pods,
// Services and ConfigMaps (a whole-job restart makes the pods again, an
// outside delete a Service or ConfigMap, never all at once), or now when
// there are none and the step starts the job.
func (w *simWorld) jobStartShown() time.Time {
	start := w.now()
	for _, gvr := range []schema.GroupVersionResource{podsGVR, servicesGVR, configMapsGVR} {
		for _, m := range w.jobObjects(gvr) {
			if t := m.GetCreationTimestamp().Time; t.Before(start) {
				start = t
			}
		}
	}
	return start
}

func metaList(list runtime.Object) ([]metav1.Object, error) {
	var out []metav1.Object
	switch l := list.(type) {
	case *corev1.PodList:
		for i := range l.Items {
			out = append(out, &l.Items[i])
		}
	case *corev1.ServiceList:
		for i := range l.Items {
			out = append(out, &l.Items[i])
		}
	case *corev1.ConfigMapList:
		for i := range l.Items {
			out = append(out, &l.Items[i])
		}
	case *corev1.SecretList:
		for i := range l.Items {
			out = append(out, &l.Items[i])
		}
	default:
		return nil, fmt.Errorf("unexpected list %T", list)
	}
	return out, nil
}

// resourceOf maps an informer's object type to its resource.
func resourceOf(obj runtime.Object) schema.GroupVersionResource {
	switch obj.(type) {
	case *corev1.Pod:
		return podsGVR
	case *corev1.Service:
		return servicesGVR
	case *corev1.ConfigMap:
		return configMapsGVR
	case *corev1.Secret:
		return secretsGVR
	}
	panic(fmt.Sprintf("the simulation has no resource for %T", obj))
}

// newInformer is the controller's informer factory in the world: its cache
// starts as the API server's state, as a first List would fill it.
func (w *simWorld) newInformer(_ *cache.ListWatch, obj runtime.Object) cache.SharedIndexInformer {
	gvr := resourceOf(obj)
	inf := newSimInformer()
	_ = inf.SetTransform(slimForCache)
	for _, m := range w.jobObjects(gvr) {
		_ = inf.indexer.Add(inf.slim(m.(runtime.Object)))
	}
	w.informers[gvr] = inf
	return inf
}

// initialAdds hands the informers' first lists to their handlers, as the
// informer's processor does after Start.
func (w *simWorld) initialAdds() {
	for _, gvr := range simResources {
		inf := w.informers[gvr]
		if inf == nil {
			continue
		}
		for _, obj := range inf.indexer.List() {
			for _, h := range inf.handlers {
				h.OnAdd(obj, true)
			}
		}
	}
}

// jobNetworkPolicies lists the job's NetworkPolicies.
func (w *simWorld) jobNetworkPolicies() []metav1.Object {
	list, err := w.dyn.Tracker().List(networkPolicies, networkPolicies.GroupVersion().WithKind("NetworkPolicy"), simNamespace)
	if err != nil {
		return nil
	}
	var out []metav1.Object
	for _, item := range list.(*unstructured.UnstructuredList).Items {
		if item.GetLabels()[v1alpha1.LabelJobName] == w.job.Name {
			out = append(out, item.DeepCopy())
		}
	}
	return out
}
