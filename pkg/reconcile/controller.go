package reconcile

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/frameworks"
	"github.com/trainstep/trainstep/pkg/policy"
	"github.com/trainstep/trainstep/pkg/render"
	"github.com/trainstep/trainstep/pkg/result"
)

// syncKey is the only workqueue key: one controller owns one job, and every
// child event asks for the whole job to be looked at again.
const syncKey = "job"

// Options configures a Controller.
type Options struct {
	Client kubernetes.Interface
	// Dynamic creates the job's PodGroup; needed only when Desired has one.
	Dynamic  dynamic.Interface
	Job      *v1alpha1.TrainJob
	Identity render.Identity
	// Desired holds the rendered objects (pods included, at attempt 0).
	Desired  *render.Objects
	Rule     frameworks.SuccessRule
	Timeouts policy.Timeouts
	// APITimeout bounds how long API errors may persist before the job ends Transient.
	APITimeout time.Duration
	// Parallelism bounds concurrent creates and deletes.
	Parallelism int
	Recorder    record.EventRecorder
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
}

// Controller reconciles one job's children until the job ends.
type Controller struct {
	opts  Options
	queue workqueue.TypedRateLimitingInterface[string]

	factory    informers.SharedInformerFactory
	pods       corelisters.PodLister
	services   corelisters.ServiceLister
	configMaps corelisters.ConfigMapLister
	secrets    corelisters.SecretLister
	synced     []cache.InformerSynced

	// observed holds the UID of every replica pod the informer delivered,
	// so that a pod missing from the cache is known to have existed (lost)
	// rather than not yet delivered after its create.
	observedMu sync.Mutex
	observed   map[types.UID]bool
	// created holds the keys of job-wide children (Services, ConfigMaps,
	// Secrets) this run created, so a sync that runs before the informer
	// delivers them does not ask the API server to create them again.
	created map[string]bool

	// The fields below are touched only by the single worker goroutine,
	// and read by View after Run returns.
	replicas       map[policy.ReplicaID]*replicaState
	order          []policy.ReplicaID // the job's replicas, computed once
	restarts       int32
	startTime      time.Time
	view           policy.View
	lastProgress   string
	createdEvent   bool
	apiErrorsSince time.Time
	// gang is the built-in gang's state (nil unless gang: builtin).
	gang            *builtinGang
	podGroupCreated bool
}

// replicaState is what the controller remembers about one replica.
type replicaState struct {
	// name is the replica's pod name, the same for every attempt.
	name    string
	attempt int
	created bool
	// uid is the UID of the instance trainstep created or adopted.
	uid      types.UID
	removing bool
	// restartsBefore counts in-place restarts of instances already removed.
	restartsBefore int32
	waitingFor     string
	waitingSince   time.Time
	// last is the replica as last observed, kept for outputs after cleanup.
	last policy.Replica
	// recreations counts the instances this run replaced.
	recreations int32
}

// New builds a controller; Start begins watching.
func New(opts Options) *Controller {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Parallelism <= 0 {
		opts.Parallelism = 64
	}
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	limiter := workqueue.NewTypedMaxOfRateLimiter(
		workqueue.NewTypedItemExponentialFailureRateLimiter[string](5*time.Millisecond, 30*time.Second),
		&workqueue.TypedBucketRateLimiter[string]{Limiter: newBucket()},
	)
	c := &Controller{
		opts:     opts,
		queue:    workqueue.NewTypedRateLimitingQueueWithConfig(limiter, workqueue.TypedRateLimitingQueueConfig[string]{Name: "trainstep", Clock: opts.Clock}),
		observed: map[types.UID]bool{},
		created:  map[string]bool{},
		replicas: map[policy.ReplicaID]*replicaState{},
		gang:     newBuiltinGang(opts.Job, opts.Jitter),
	}
	c.order = policy.Desired(opts.Job)
	for _, id := range c.order {
		c.replicas[id] = &replicaState{
			name: render.PodName(opts.Identity.JobName, id.Type, id.Index),
			last: policy.Replica{ReplicaID: id, Phase: policy.PhaseMissing},
		}
	}
	return c
}

// Start runs label-filtered informers for the job's children on ctx (which
// should outlive Run, so Cleanup can watch deletions), waits for their
// caches, and re-attaches children left by an earlier attempt of the job.
func (c *Controller) Start(ctx context.Context) error {
	selector := render.JobSelector(c.opts.Identity.JobName).String()
	c.factory = informers.NewSharedInformerFactoryWithOptions(c.opts.Client, 0,
		informers.WithNamespace(c.opts.Identity.Namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = selector }),
		informers.WithTransform(slimForCache))
	core := c.factory.Core().V1()

	podInformer := core.Pods().Informer()
	if _, err := podInformer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.observePod,
		UpdateFunc: func(_, obj any) { c.observePod(obj) },
		DeleteFunc: func(any) { c.queue.Add(syncKey) },
	}); err != nil {
		return fmt.Errorf("watching pods: %w", err)
	}
	c.pods = core.Pods().Lister()
	c.synced = append(c.synced, podInformer.HasSynced)

	enqueue := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { c.queue.Add(syncKey) },
		UpdateFunc: func(any, any) {},
		DeleteFunc: func(obj any) {
			c.forgetCreated(obj)
			c.queue.Add(syncKey)
		},
	}
	serviceInformer := core.Services().Informer()
	if _, err := serviceInformer.AddEventHandler(enqueue); err != nil {
		return fmt.Errorf("watching services: %w", err)
	}
	c.services = core.Services().Lister()
	c.synced = append(c.synced, serviceInformer.HasSynced)
	// ConfigMaps and Secrets are watched only by jobs that have them, so a
	// job that needs none needs no right to list them.
	if len(c.opts.Desired.ConfigMaps) > 0 {
		inf := core.ConfigMaps().Informer()
		if _, err := inf.AddEventHandler(enqueue); err != nil {
			return fmt.Errorf("watching configmaps: %w", err)
		}
		c.configMaps = core.ConfigMaps().Lister()
		c.synced = append(c.synced, inf.HasSynced)
	}
	if len(c.opts.Desired.Secrets) > 0 {
		inf := core.Secrets().Informer()
		if _, err := inf.AddEventHandler(enqueue); err != nil {
			return fmt.Errorf("watching secrets: %w", err)
		}
		c.secrets = core.Secrets().Lister()
		c.synced = append(c.synced, inf.HasSynced)
	}

	c.factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		return errors.New("waiting for the job's informer caches to sync: context ended")
	}
	c.startTime = c.opts.Clock.Now()
	return c.adopt(ctx)
}

// observePod records a replica pod's UID and asks for a sync.
func (c *Controller) observePod(obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	c.observedMu.Lock()
	c.observed[pod.UID] = true
	c.observedMu.Unlock()
	if c.opts.OnPod != nil {
		c.opts.OnPod(pod)
	}
	c.queue.Add(syncKey)
}

// slimForCache drops from cached objects what the controller never reads:
// the containers' environment (a 512-replica TF_CONFIG is 17 KiB per pod)
// and managed fields, so a large job's cache stays small.
func slimForCache(obj any) (any, error) {
	if pod, ok := obj.(*corev1.Pod); ok {
		for i := range pod.Spec.Containers {
			pod.Spec.Containers[i].Env = nil
		}
		for i := range pod.Spec.InitContainers {
			pod.Spec.InitContainers[i].Env = nil
		}
	}
	if m, ok := obj.(metav1.Object); ok {
		m.SetManagedFields(nil)
	}
	return obj, nil
}

// childKey names a job-wide child for the created set.
func childKey(obj runtime.Object) string {
	m, err := meta.Accessor(obj)
	if err != nil {
		return ""
	}
	return fmt.Sprintf("%T/%s", obj, m.GetName())
}

func (c *Controller) markCreated(obj runtime.Object) {
	c.observedMu.Lock()
	defer c.observedMu.Unlock()
	c.created[childKey(obj)] = true
}

func (c *Controller) wasCreated(obj runtime.Object) bool {
	c.observedMu.Lock()
	defer c.observedMu.Unlock()
	return c.created[childKey(obj)]
}

// forgetCreated drops a deleted child from the created set, so that one
// removed from outside is created again.
func (c *Controller) forgetCreated(obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	if o, ok := obj.(runtime.Object); ok {
		c.observedMu.Lock()
		delete(c.created, childKey(o))
		c.observedMu.Unlock()
	}
}

// seen reports whether the informer has delivered the pod with uid.
func (c *Controller) seen(uid types.UID) bool {
	c.observedMu.Lock()
	defer c.observedMu.Unlock()
	return uid != "" && c.observed[uid]
}

// Run works the queue until the job reaches a final decision, ctx ends
// (the decision is then Running), or a fatal error occurs.
func (c *Controller) Run(ctx context.Context) (policy.Decision, error) {
	type outcome struct {
		decision policy.Decision
		err      error
	}
	done := make(chan outcome, 1)
	go func() {
		<-ctx.Done()
		c.queue.ShutDown()
	}()
	c.queue.Add(syncKey)
	go func() {
		for {
			key, quit := c.queue.Get()
			if quit {
				done <- outcome{decision: policy.Decision{Outcome: policy.OutcomeRunning}}
				return
			}
			decision, err := c.sync(ctx)
			c.queue.Done(key)
			switch {
			case err != nil && isFatal(err):
				done <- outcome{err: err}
				return
			case err != nil:
				c.opts.Logger.Warn("sync failed; retrying", zap.Error(err))
				c.queue.AddRateLimited(key)
				continue
			}
			c.queue.Forget(key)
			if decision.Outcome != policy.OutcomeRunning {
				done <- outcome{decision: decision}
				return
			}
			if decision.RecheckAfter > 0 {
				c.queue.AddAfter(key, decision.RecheckAfter)
			}
		}
	}()
	o := <-done
	c.queue.ShutDown()
	return o.decision, o.err
}

// View returns the last view of the job the controller decided on.
func (c *Controller) View() policy.View { return c.view }

// isFatal reports errors that retrying cannot fix.
func isFatal(err error) bool {
	var re *result.Error
	return errors.As(err, &re)
}
