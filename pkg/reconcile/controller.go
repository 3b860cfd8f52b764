package reconcile

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/frameworks"
	"github.com/trainstep/trainstep/pkg/policy"
	"github.com/trainstep/trainstep/pkg/render"
	"github.com/trainstep/trainstep/pkg/result"
	"github.com/trainstep/trainstep/pkg/timeline"
)

// syncKey is the only workqueue key: one controller owns one job, and every
// child event asks for the whole job to be looked at again.
const syncKey = "job"

// cacheSyncPoll is how often Start looks whether the informers' first lists are in.
const cacheSyncPoll = 5 * time.Millisecond

// Options configures a Controller.
type Options struct {
	// Core is the client of the core API group, the only one the controller
	// writes (the full clientset would link every API group's client).
	Core corev1client.CoreV1Interface
	// Dynamic creates the job's PodGroup; needed only when Desired has one.
	Dynamic dynamic.Interface
	// Metadata reads the metadata of an earlier attempt's Secrets without
	// their data; nil reads them whole and drops the data.
	Metadata metadata.Interface
	Job      *v1alpha1.TrainJob
	Identity render.Identity
	// Desired holds the rendered objects (pods included, at attempt 0).
	// Renderer renders each replica's pod just before it is created.
	Renderer *render.Renderer
	// Desired holds the job's other rendered objects (Services, ConfigMaps,
	// Secrets, PodGroup); its Pods are not used.
	Desired  *render.Objects
	Rule     frameworks.SuccessRule
	Timeouts policy.Timeouts
	// APITimeout bounds how long API errors may persist before the job ends Transient.
	APITimeout time.Duration
	// Parallelism bounds concurrent creates and deletes while the job runs.
	Parallelism int
	// TeardownParallelism bounds the deletes of Cleanup (default
	// Parallelism): a delete holds no rendered pod, and the teardown of a
	// large job must be sent within the termination grace.
	TeardownParallelism int
	Recorder            record.EventRecorder
	// EventObject is the object events are recorded on (the owner); nil records none.
	EventObject runtime.Object
	Logger      *zap.Logger
	Clock       clock.WithTicker
	// OnPod sees every replica pod the informer delivers (log streaming).
	OnPod func(pod *corev1.Pod)
	// OnProgress is called when the replica counts change.
	OnProgress func(Progress)
	// Jitter draws the built-in gang's backoff jitter in [0, 1); nil uses
	// math/rand.
	Jitter func() float64
	// PodMetrics reads the workers' usage for elasticPolicy.metrics; nil
	// evaluates no metrics (the worker target stays at Worker.replicas).
	PodMetrics PodMetricsLister
	// WatchNodes watches the nodes (cluster-wide: get, list and watch
	// nodes), so that a replica whose node is cordoned or tainted to be
	// drained counts as disrupted at once (drains.go).
	WatchNodes bool
	// BeforeSync, for tests, is called before each sync.
	BeforeSync func()
	// Timeline records the informers' sync and the creates (nil: nothing).
	Timeline *timeline.Timeline
	// OnLaunched is called once, when the first sync that created anything
	// created every object it set out to.
	OnLaunched func()
	// OnJobRestart is called when every replica of a whole-job restart is
	// gone and the next attempt starts: that attempt and why the one before
	// ended (RestartReasonDisruption or RestartReasonFailure).
	OnJobRestart func(attempt int, reason string)
}

// Controller reconciles one job's children until the job ends.
type Controller struct {
	opts  Options
	queue workqueue.TypedRateLimitingInterface[string]

	informers  []cache.SharedIndexInformer
	pods       corelisters.PodLister
	services   corelisters.ServiceLister
	configMaps corelisters.ConfigMapLister
	// earlierSecrets are the job's Secrets an earlier attempt left, read
	// by name by the first sync (no informer watches Secrets), and secrets
	// holds them for the lookups of the job-wide children.
	earlierSecrets []*corev1.Secret
	secrets        cache.Store
	// reattach is what a re-attach left to the first syncs (nil once done).
	reattach *reattachPlan
	// jobWide holds the job-wide children with their caches and keys,
	// looked up on every sync without allocating.
	jobWide []jobWideChild

	// mu guards the replicas' states and created: the informers' handlers
	// write them, the single worker reads and advances them.
	mu sync.Mutex
	// replicas holds every replica's state, written by the pod handlers on
	// evidence and by the worker when the API server accepted a write.
	replicas map[policy.ReplicaID]*replicaState
	byName   map[string]*replicaState
	// created holds the keys of job-wide children (Services, ConfigMaps,
	// Secrets) this run created, so a sync that runs before the informer
	// delivers them does not ask the API server to create them again.
	created map[string]bool
	// createdUIDs holds the UIDs of the job-wide children this run created
	// (or found to be the job's): the teardown deletes exactly those.
	createdUIDs map[string]types.UID

	// The fields below are touched only by the single worker goroutine,
	// and read by View after Run returns.
	order []policy.ReplicaID // the job's replicas, computed once
	// restarts counts recreations (those of earlier runs re-attached
	// included); written under mu.
	restarts  int32
	startTime time.Time
	// informerCtx is the context Start ran the informers on: once it
	// ended, the caches no longer change.
	informerCtx context.Context
	// cachesSynced is set once Start saw every informer synced; started
	// once Start returned without error.
	cachesSynced, started atomic.Bool
	view                  policy.View
	viewReplicas          []policy.Replica // backs view.Replicas
	lastProgress          string
	createdEvent          bool
	apiErrorsSince        time.Time
	// createdAny is set once the API server accepted a create of this run
	// or Start re-attached objects of an earlier one: from then on no API
	// error ends the run Invalid.
	createdAny atomic.Bool
	// quota is the wait for room in a ResourceQuota; guarded by mu.
	quota quotaWait
	// jobAttempt is the current whole-job attempt (the job-attempt label),
	// jobRestarts the counted whole-job restarts (guarded by mu), and
	// restarting a whole-job restart under way (nil when none).
	jobAttempt  int
	jobRestarts int32
	restarting  *jobRestart
	// attemptReason is why the job attempt before the current one ended
	// ("disruption", "failure"; "" for the first): the pods of the current
	// attempt carry it (AnnotationRestartReason).
	attemptReason string
	// gang is the gang's admission state (nil unless gang: builtin,
	// kubernetes, scheduler-plugins or kueue).
	gang            *gangAdmission
	podGroupCreated bool
	// drainingNodes are the nodes seen cordoned or tainted to be drained;
	// guarded by mu.
	drainingNodes map[string]drainNotice
	// guardUIDs hold, by render.Guard's key, the job's guards this run
	// created or re-attached (see guards.go).
	guardUIDs map[string]types.UID
	// kueueReleased holds, per pod instance, the version whose Kueue
	// finalizer this run dropped, so each version is patched once; guarded
	// by kueueMu (the worker and the cleanup both release).
	kueueMu       sync.Mutex
	kueueReleased map[types.UID]string
	// launcher holds an MPI launcher until the workers are Ready (nil
	// unless launcherCreationPolicy: WaitForWorkersReady); guarded by mu.
	launcher *launcherGate
	// elasticShortSince is when an elastic job fell short of minReplicas
	// running workers (zero while it is not); guarded by mu.
	elasticShortSince time.Time
	// worldSize is the running workers of an elastic job last reported.
	worldSize int
	// scaler is the metric-driven worker target (nil unless the job has
	// elasticPolicy.metrics).
	scaler *autoscaler
	// behindSince is when a decision that must be current (freshness.go)
	// found the pod cache lagging the API server (zero when it did not).
	behindSince time.Time
	// ledger is the restart ledger as this run last wrote or read it;
	// touched only by the worker (and adopt, before it starts).
	ledger restartLedger
	// makeInformer builds the informers Start runs (nil: client-go's shared
	// informer); the simulation feeds its own, delivering events in the
	// order it draws.
	makeInformer func(lw *cache.ListWatch, obj runtime.Object) cache.SharedIndexInformer
	// crashed is closed when a goroutine of the controller panicked
	// (crashErr says where); Run then ends with crashErr (panics.go).
	crashOnce sync.Once
	crashed   chan struct{}
	crashErr  error
}

// New builds a controller; Start begins watching.
func New(opts Options) *Controller {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Parallelism <= 0 {
		opts.Parallelism = 64
	}
	if opts.TeardownParallelism <= 0 {
		opts.TeardownParallelism = opts.Parallelism
	}
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	c := &Controller{
		opts:          opts,
		created:       map[string]bool{},
		createdUIDs:   map[string]types.UID{},
		replicas:      map[policy.ReplicaID]*replicaState{},
		byName:        map[string]*replicaState{},
		gang:          newGangAdmission(opts.Job, opts.Jitter),
		scaler:        newAutoscaler(opts.Job),
		kueueReleased: map[types.UID]string{},
		crashed:       make(chan struct{}),

		guardUIDs:     map[string]types.UID{},
		drainingNodes: map[string]drainNotice{},
	}
	if c.scaler != nil {
		c.scaler.recent.Record(opts.Clock.Now(), c.scaler.target)
	}
	c.order = policy.Desired(opts.Job)
	for _, id := range c.order {
		st := newReplicaState(id, render.PodName(opts.Identity.JobName, id.Type, id.Index))
		c.replicas[id], c.byName[st.name] = st, st
	}
	c.launcher = newLauncherGate(opts.Job, c.replicas, c.order)
	return c
}

// Start runs label-filtered informers for the job's children on ctx (which
// should outlive Run, so Cleanup can watch deletions), waits for their
// caches, and re-attaches children left by an earlier attempt of the job.
// It writes nothing: what a re-attach must write is the first syncs' work
// (finishReattach), retried within the API timeout like every other write.
func (c *Controller) Start(ctx context.Context) error {
	if c.opts.Identity.OwnerID == "" {
		// Without it, objects with the job's name but no identity would pass
		// for the job's.
		return errors.New("the job has no owner identity")
	}
	c.informerCtx = ctx
	if err := c.watchChildren(); err != nil {
		return err
	}
	for _, inf := range c.informers {
		go inf.RunWithContext(ctx)
	}
	// cache.WaitForCacheSync looks every 100 ms: most of a new job's time to
	// its first create, when the first lists take a few milliseconds.
	allSynced := func(context.Context) (bool, error) {
		for _, inf := range c.informers {
			if !inf.HasSynced() {
				return false, nil
			}
		}
		return true, nil
	}
	if err := wait.PollUntilContextCancel(ctx, cacheSyncPoll, true, allSynced); err != nil {
		return errors.New("waiting for the job's informer caches to sync: context ended")
	}
	c.cachesSynced.Store(true)
	c.opts.Timeline.Mark("informers synced")
	c.startTime = c.opts.Clock.Now()
	if err := c.adopt(); err != nil {
		return err
	}
	c.started.Store(true)
	return nil
}

// watchChildren builds the informers of the job's children and the caches
// the controller reads them from.
func (c *Controller) watchChildren() error {
	selector := render.JobSelector(c.opts.Identity).String()
	ns, core := c.opts.Identity.Namespace, c.opts.Core
	podInformer := c.newInformer(listWatch(core.Pods(ns), selector), &corev1.Pod{})
	if _, err := podInformer.AddEventHandler(c.guarded("the pod informer's handler", cache.ResourceEventHandlerFuncs{
		AddFunc:    c.observePod,
		UpdateFunc: func(_, obj any) { c.observePod(obj) },
		DeleteFunc: c.observePodDeleted,
	})); err != nil {
		return fmt.Errorf("watching pods: %w", err)
	}
	c.pods = corelisters.NewPodLister(podInformer.GetIndexer())

	enqueue := c.guarded("an informer's handler", cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { c.enqueue() },
		UpdateFunc: func(any, any) {},
		DeleteFunc: func(obj any) {
			c.forgetCreated(obj)
			c.enqueue()
		},
	})
	serviceInformer := c.newInformer(listWatch(core.Services(ns), selector), &corev1.Service{})
	if _, err := serviceInformer.AddEventHandler(enqueue); err != nil {
		return fmt.Errorf("watching services: %w", err)
	}
	c.services = corelisters.NewServiceLister(serviceInformer.GetIndexer())
	for _, svc := range c.opts.Desired.Services {
		c.keepJobWide(svc, serviceInformer.GetStore())
	}
	// ConfigMaps and Secrets are watched only by jobs that have them, so a
	// job that needs none needs no right to list them.
	if len(c.opts.Desired.ConfigMaps) > 0 {
		inf := c.newInformer(listWatch(core.ConfigMaps(ns), selector), &corev1.ConfigMap{})
		if _, err := inf.AddEventHandler(enqueue); err != nil {
			return fmt.Errorf("watching configmaps: %w", err)
		}
		c.configMaps = corelisters.NewConfigMapLister(inf.GetIndexer())
		for _, cm := range c.opts.Desired.ConfigMaps {
			c.keepJobWide(cm, inf.GetStore())
		}
	}
	// Secrets are read by name, not watched (findEarlierSecrets).
	c.secrets = cache.NewStore(cache.MetaNamespaceKeyFunc)
	for _, s := range c.opts.Desired.Secrets {
		c.keepJobWide(s, c.secrets)
	}
	// Nodes are watched by a step that may (a drain stops a rank at once).
	if err := c.watchNodes(); err != nil {
		return err
	}
	return nil
}

// Started reports whether Start completed: the caches synced and the
// replicas of an earlier run were re-attached.
func (c *Controller) Started() bool { return c.started.Load() }

// observePod hands a delivered replica pod to its replica's state and asks
// for a sync.
func (c *Controller) observePod(obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	c.mu.Lock()
	if st := c.byName[pod.Name]; st != nil {
		c.noteCollateral(st, pod)
		st.podSeen(pod, c.opts.Clock.Now())
	}
	c.mu.Unlock()
	if c.opts.OnPod != nil {
		c.opts.OnPod(pod)
	}
	c.enqueue()
}

// observePodDeleted is the only evidence that a replica's instance is gone:
// a delete of that UID, tombstones included.
func (c *Controller) observePodDeleted(obj any) {
	tombstone := false
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj, tombstone = tomb.Obj, true
	}
	if pod, ok := obj.(*corev1.Pod); ok {
		c.mu.Lock()
		if st := c.byName[pod.Name]; st != nil {
			before, cached := st.stage, st.pod
			if st.podDeleted(pod.UID) {
				if st.stage == stageVanished {
					// The deletion's final state says why it went (a
					// DisruptionTarget set just before): it may come in one
					// batch with that update, before any sync read it.
					st.pod, st.dirty = pod, false
					st.last = c.replicaFromPod(st.id, st, pod)
					// A relist's tombstone holds the pod as the cache last
					// had it, not its final state: one that shows no end
					// went in a way nobody saw, judged as a loss no run
					// watched (free), as a re-attach judges one.
					st.lostUnseen = tombstone && !podEnded(pod)
					st.goneAt = c.opts.Clock.Now()
					c.workerVanished(st, cached, pod)
				}
				c.opts.Logger.Debug("replica's pod deleted", zap.Stringer("replica", st.id), zap.String("uid", string(pod.UID)),
					zap.Stringer("from", before), zap.Stringer("to", st.stage))
			}
		}
		c.mu.Unlock()
	}
	c.enqueue()
}

// enqueue asks the running worker, if any, to look at the job again.
func (c *Controller) enqueue() {
	c.mu.Lock()
	q := c.queue
	c.mu.Unlock()
	if q != nil {
		q.Add(syncKey)
	}
}

// newQueue is the workqueue of one Run.
func (c *Controller) newQueue() workqueue.TypedRateLimitingInterface[string] {
	limiter := workqueue.NewTypedMaxOfRateLimiter(
		workqueue.NewTypedItemExponentialFailureRateLimiter[string](5*time.Millisecond, 30*time.Second),
		&workqueue.TypedBucketRateLimiter[string]{Limiter: newBucket()},
	)
	return workqueue.NewTypedRateLimitingQueueWithConfig(limiter, workqueue.TypedRateLimitingQueueConfig[string]{Name: "trainstep", Clock: c.opts.Clock})
}

// jobWideChild is a Service, ConfigMap or Secret the job keeps while it runs.
type jobWideChild struct {
	obj   runtime.Object
	key   string
	cache cache.Store
}

func (c *Controller) keepJobWide(obj runtime.Object, store cache.Store) {
	key, err := cache.MetaNamespaceKeyFunc(obj)
	if err != nil {
		return // rendered objects always have a name
	}
	c.jobWide = append(c.jobWide, jobWideChild{obj: obj, key: key, cache: store})
}

// listWatcher is a typed client of one resource in one namespace.
type listWatcher[L runtime.Object] interface {
	List(ctx context.Context, opts metav1.ListOptions) (L, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
}

// listWatch lists and watches the job's objects of one resource, as
// client-go's generated informers do, but from a single group's client.
func listWatch[L runtime.Object](client listWatcher[L], selector string) *cache.ListWatch {
	return &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			opts.LabelSelector = selector
			return client.List(ctx, opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			opts.LabelSelector = selector
			return client.Watch(ctx, opts)
		},
	}
}

// newInformer builds an informer whose cache keeps only what slimForCache
// leaves; Start runs it.
func (c *Controller) newInformer(lw *cache.ListWatch, obj runtime.Object) cache.SharedIndexInformer {
	var inf cache.SharedIndexInformer
	if c.makeInformer != nil {
		inf = c.makeInformer(lw, obj)
	} else {
		inf = cache.NewSharedIndexInformerWithOptions(lw, obj, cache.SharedIndexInformerOptions{
			Indexers: cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc},
		})
	}
	// SetTransform fails only on a started informer.
	_ = inf.SetTransform(slimForCache)
	c.informers = append(c.informers, inf)
	return inf
}

// slimForCache keeps of a cached pod only what the controller and the log
// streamer read — metadata, node, scheduling gates, container names and
// status — and of the job-wide children only their metadata, since only
// their existence and owners matter; managed fields and annotations go from
// everything. A large job's cache stays small: a 512-replica TF_CONFIG alone
// is 17 KiB per pod.
func slimForCache(obj any) (any, error) {
	switch o := obj.(type) {
	case *corev1.Pod:
		o.Spec = corev1.PodSpec{
			NodeName:        o.Spec.NodeName,
			SchedulingGates: o.Spec.SchedulingGates,
			RestartPolicy:   o.Spec.RestartPolicy,
			Containers:      containerNames(o.Spec.Containers),
			InitContainers:  containerNames(o.Spec.InitContainers),
		}
	case *corev1.Service:
		o.Spec, o.Status = corev1.ServiceSpec{}, corev1.ServiceStatus{}
	case *corev1.ConfigMap:
		o.Data, o.BinaryData = nil, nil
	case *corev1.Secret:
		o.Data, o.StringData = nil, nil
	case *corev1.Node:
		// Only whether it is being drained is read (drains.go).
		o.Spec = corev1.NodeSpec{Unschedulable: o.Spec.Unschedulable, Taints: o.Spec.Taints}
		o.Status = corev1.NodeStatus{}
		o.Labels = nil
	}
	if m, ok := obj.(metav1.Object); ok {
		m.SetManagedFields(nil)
		// Of the annotations, only the restart counts and reason and the worker target are read back (adopt).
		var kept map[string]string
		for _, key := range []string{v1alpha1.AnnotationRestarts, v1alpha1.AnnotationJobRestarts, v1alpha1.AnnotationRestartLedger, v1alpha1.AnnotationWorkerTarget, v1alpha1.AnnotationRestartReason} {
			if n, ok := m.GetAnnotations()[key]; ok {
				if kept == nil {
					kept = map[string]string{}
				}
				kept[key] = n
			}
		}
		m.SetAnnotations(kept)
	}
	return obj, nil
}

func containerNames(containers []corev1.Container) []corev1.Container {
	if len(containers) == 0 {
		return nil
	}
	out := make([]corev1.Container, len(containers))
	for i, c := range containers {
		out[i] = corev1.Container{Name: c.Name}
		if c.ReadinessProbe != nil {
			// Only its presence is read: a pod without one is NotReady
			// while running only when its node stopped answering.
			out[i].ReadinessProbe = &corev1.Probe{}
		}
	}
	return out
}

// childKey names a job-wide child for the created set.
func childKey(obj runtime.Object) string {
	m, err := meta.Accessor(obj)
	if err != nil {
		return ""
	}
	return fmt.Sprintf("%T/%s", obj, m.GetName())
}

func (c *Controller) markCreated(obj runtime.Object, uid types.UID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.created[childKey(obj)] = true
	c.createdUIDs[childKey(obj)] = uid
}

func (c *Controller) wasCreated(obj runtime.Object) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.created[childKey(obj)]
}

// forgetCreated drops a deleted child from the created set, so that one
// removed from outside is created again.
func (c *Controller) forgetCreated(obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	if o, ok := obj.(runtime.Object); ok {
		c.mu.Lock()
		delete(c.created, childKey(o))
		c.mu.Unlock()
	}
}

// Run works the queue until the job reaches a final decision, ctx ends
// (the decision is then Running), or a fatal error occurs — a panic in any
// of the controller's goroutines is one (InternalError). Run may be
// called again after ctx ended, e.g. once this run holds the job's lease
// again: the informers and every replica's state carry over.
func (c *Controller) Run(ctx context.Context) (policy.Decision, error) {
	type outcome struct {
		decision policy.Decision
		err      error
	}
	queue := c.newQueue()
	c.mu.Lock()
	c.queue = queue
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.queue = nil
		c.mu.Unlock()
		queue.ShutDown()
	}()
	done := make(chan outcome, 1)
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	go func() {
		select {
		case <-ctx.Done():
		case <-c.crashed:
			stop()
		}
		queue.ShutDown()
	}()
	queue.Add(syncKey)
	go func() {
		defer c.recoverPanic("the autoscaler")
		c.runAutoscaler(ctx)
	}()
	go func() {
		for {
			key, quit := queue.Get()
			if quit {
				done <- outcome{decision: policy.Decision{Outcome: policy.OutcomeRunning}}
				return
			}
			decision, err := c.syncRecovered(ctx)
			queue.Done(key)
			switch {
			case err != nil && isFatal(err):
				done <- outcome{err: err}
				return
			case err != nil:
				c.opts.Logger.Warn("sync failed; retrying", zap.Error(err))
				queue.AddRateLimited(key)
				continue
			}
			queue.Forget(key)
			if decision.Outcome != policy.OutcomeRunning {
				done <- outcome{decision: decision}
				return
			}
			if decision.RecheckAfter > 0 {
				queue.AddAfter(key, decision.RecheckAfter)
			}
		}
	}()
	o := <-done
	if err := c.crashError(); err != nil {
		return policy.Decision{}, err // as a fatal error of a sync
	}
	return o.decision, o.err
}

// syncRecovered runs one sync and turns a panic in it into a fatal
// InternalError, so that the job is still torn down and reported.
func (c *Controller) syncRecovered(ctx context.Context) (d policy.Decision, err error) {
	defer func() {
		if p := recover(); p != nil {
			c.opts.Logger.Error("the reconciler failed", zap.Any("panic", p), zap.Stack("stack"))
			err = &result.Error{Phase: result.PhaseFailed, Reason: result.ReasonInternalError, Err: fmt.Errorf("internal error in the reconciler: %v", p)}
		}
	}()
	if c.opts.BeforeSync != nil {
		c.opts.BeforeSync()
	}
	return c.sync(ctx)
}

// View returns the last view of the job the controller decided on (after
// Cleanup, the one its deletions were planned from), or the replicas as
// they stand when it decided nothing yet.
func (c *Controller) View() policy.View {
	v := c.view
	if v.Job == nil {
		v = c.observe()
	}
	v.Replicas = slices.Clone(v.Replicas)
	return v
}

// isFatal reports errors that retrying cannot fix.
func isFatal(err error) bool {
	var re *result.Error
	return errors.As(err, &re)
}
