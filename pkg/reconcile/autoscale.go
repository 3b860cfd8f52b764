package reconcile

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/frameworks"
	"github.com/trainstep/trainstep/pkg/gang"
	"github.com/trainstep/trainstep/pkg/policy"
)

// An elastic job with elasticPolicy.metrics has a worker target: the
// workers it may have, starting at Worker.replicas and moved by the HPA's
// algorithm (policy.DesiredWorkers) within minReplicas..maxReplicas every
// policy.AutoscalePeriod. Slots at or above the target get no pod, and a
// worker whose slot falls above it is deleted (no restart counted) while
// more workers live than the target: the highest indices go first and
// Worker 0, the rendezvous host, never does, since the target is at least
// minReplicas.

// PodMetricsLister lists pod usage from metrics.k8s.io (the metrics
// clientset's PodMetricses(namespace).List).
type PodMetricsLister interface {
	List(ctx context.Context, namespace string, opts metav1.ListOptions) (*metricsv1beta1.PodMetricsList, error)
}

// autoscaler is the metric-driven state of an elastic job; nil unless the
// job scales on metrics. target is guarded by the controller's mutex.
type autoscaler struct {
	target int
	recent policy.Recommendations
	// requests is one worker's request per resource, in milli-units (the
	// template's, the same for every worker).
	requests map[corev1.ResourceName]int64
	// held is the smaller count the stabilisation window last held back
	// (0: none), so that the wait is logged once, not every period.
	held int
}

func newAutoscaler(job *v1alpha1.TrainJob) *autoscaler {
	e, ok := frameworks.Elastic(job)
	if !ok || !e.OnMetrics {
		return nil
	}
	return &autoscaler{target: int(e.Initial), requests: podRequests(&job.Spec.ReplicaSpecs[e.Type].Template.Spec)}
}

// podRequests sums a pod's containers' cpu and memory requests, as the HPA
// does (init containers and overhead left out).
func podRequests(spec *corev1.PodSpec) map[corev1.ResourceName]int64 {
	out := map[corev1.ResourceName]int64{}
	for i := range spec.Containers {
		requests := gang.ContainerRequests(&spec.Containers[i])
		for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
			if q, ok := requests[name]; ok {
				out[name] += q.MilliValue()
			}
		}
	}
	return out
}

// aboveTarget reports whether st is a worker slot above the metric-driven
// target; called with the controller's mutex held.
func (c *Controller) aboveTarget(st *replicaState) bool {
	return c.scaler != nil && st.id.Type == v1alpha1.ReplicaTypeWorker && st.id.Index >= c.scaler.target
}

// WorkerTarget is the metric-driven worker count (0 when the job does not
// scale on metrics).
func (c *Controller) WorkerTarget() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.scaler == nil {
		return 0
	}
	return c.scaler.target
}

// removeAboveTarget deletes the workers in slots above the target that
// policy.SurplusWorkers gives, without counting a restart; their slots get
// pods again if the target grows. Called with c.view just observed.
func (c *Controller) removeAboveTarget(ctx context.Context) error {
	if c.scaler == nil {
		return nil
	}
	var doomed []doomedInstance
	c.mu.Lock()
	for _, id := range policy.SurplusWorkers(&c.view) {
		st := c.replicas[id]
		if st.deleting || st.uid == "" || (st.stage != stageCreated && st.stage != stageObserved) {
			continue
		}
		if st.pod != nil && st.pod.DeletionTimestamp != nil {
			continue
		}
		st.deleteSent()
		doomed = append(doomed, doomedInstance{st: st, uid: st.uid})
	}
	target := c.scaler.target
	c.mu.Unlock()
	if len(doomed) == 0 {
		return nil
	}
	for _, d := range doomed {
		c.opts.Logger.Info("removing a worker above the metrics' target", zap.Stringer("replica", d.st.id), zap.Int("target", target))
	}
	if err := c.deleteAndRelease(ctx, doomed); err != nil {
		return fmt.Errorf("removing workers above the metrics' target: %w", err)
	}
	return nil
}

// runAutoscaler evaluates the job's metrics every policy.AutoscalePeriod
// until ctx ends, moving the worker target.
func (c *Controller) runAutoscaler(ctx context.Context) {
	if c.scaler == nil || c.opts.PodMetrics == nil {
		return
	}
	ticker := c.opts.Clock.NewTicker(policy.AutoscalePeriod)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C():
			c.evaluateMetrics(ctx, c.opts.PodMetrics)
		}
	}
}

// evaluateMetrics reads the workers' usage once and sets the target the
// HPA's algorithm gives. A metric that cannot be evaluated (no usage yet,
// metrics.k8s.io failing) leaves the target as it is, as the HPA does.
func (c *Controller) evaluateMetrics(ctx context.Context, podMetrics PodMetricsLister) {
	selector := labels.SelectorFromSet(labels.Set{v1alpha1.LabelJobName: c.opts.Identity.JobName, v1alpha1.LabelReplicaType: "worker"})
	pods, err := c.pods.Pods(c.opts.Identity.Namespace).List(selector)
	if err != nil {
		return
	}
	reqCtx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	usage, err := podMetrics.List(reqCtx, c.opts.Identity.Namespace, metav1.ListOptions{LabelSelector: selector.String()})
	if err != nil {
		c.opts.Logger.Warn("reading the workers' usage from metrics.k8s.io", zap.Error(err))
		return
	}
	byPod := map[string]corev1.ResourceList{}
	for _, m := range usage.Items {
		total := corev1.ResourceList{}
		for _, ct := range m.Containers {
			for name, q := range ct.Usage {
				sum := total[name]
				sum.Add(q)
				total[name] = sum
			}
		}
		byPod[m.Name] = total
	}
	c.mu.Lock()
	current := c.scaler.target
	c.mu.Unlock()
	e, _ := frameworks.Elastic(c.opts.Job)
	lo, hi := e.Min, e.Max
	var proposals []int
	for i, m := range c.opts.Job.Spec.ElasticPolicy.Metrics {
		name := m.Resource.Name
		var samples []policy.PodUsage
		for _, p := range pods {
			s := policy.PodUsage{Name: p.Name, Request: c.scaler.requests[name], Ready: podReady(p),
				Pending: p.Status.Phase == corev1.PodPending || p.Status.Phase == "",
				Failed:  p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded, Deleting: p.DeletionTimestamp != nil}
			if q, ok := byPod[p.Name][name]; ok {
				s.Usage, s.HasUsage = q.MilliValue(), true
			}
			samples = append(samples, s)
		}
		proposal, err := policy.ResourceProposal(current, name, m.Resource.Target, samples, policy.AutoscaleTolerance)
		if err != nil {
			c.opts.Logger.Debug("elasticPolicy.metrics: not evaluated", zap.Int("metric", i), zap.Error(err))
			continue
		}
		proposals = append(proposals, proposal)
	}
	desired := policy.DesiredWorkers(c.opts.Clock.Now(), current, proposals, int(lo), int(hi), &c.scaler.recent)
	if desired == current {
		c.noteHeld(current, proposals, lo, hi)
		return
	}
	c.scaler.held = 0
	if err := c.recordWorkerTarget(ctx, desired); err != nil {
		c.opts.Logger.Warn("elastic worker target not changed: it could not be recorded; tried again at the next evaluation", zap.Int("from", current), zap.Int("to", desired), zap.Error(err))
		return
	}
	c.mu.Lock()
	c.scaler.target = desired
	c.mu.Unlock()
	c.event(corev1.EventTypeNormal, EventElasticScaled, "elasticPolicy.metrics: %d -> %d workers (elastic %d..%d)", current, desired, lo, hi)
	c.opts.Logger.Info("elastic worker target changed", zap.Int("from", current), zap.Int("to", desired), zap.Int32("min", lo), zap.Int32("max", hi))
	c.enqueue()
}

// recordWorkerTarget writes target on the ledger's Service before any pod
// is created or deleted for it, so that a run that re-attaches goes on from
// the workers this one decided on rather than from Worker.replicas.
func (c *Controller) recordWorkerTarget(ctx context.Context, target int) error {
	return c.annotateLedgerService(ctx, v1alpha1.AnnotationWorkerTarget, strconv.Itoa(target))
}

// recordedWorkerTarget is the target an earlier run recorded, within the
// elastic bounds (false when there is none).
func (c *Controller) recordedWorkerTarget() (int, bool) {
	svc := c.cachedLedgerService()
	if c.scaler == nil || svc == nil {
		return 0, false
	}
	n, err := strconv.Atoi(svc.Annotations[v1alpha1.AnnotationWorkerTarget])
	if err != nil {
		return 0, false
	}
	e, _ := frameworks.Elastic(c.opts.Job)
	return min(max(n, int(e.Min)), int(e.Max)), true
}

// noteHeld logs, once per proposal, that the metrics ask for fewer workers
// than the stabilisation window allows yet: why the job does not shrink.
func (c *Controller) noteHeld(current int, proposals []int, lo, hi int32) {
	if len(proposals) == 0 {
		return
	}
	proposal := min(max(slices.Max(proposals), int(lo)), int(hi))
	if proposal >= current || proposal == c.scaler.held {
		return
	}
	c.scaler.held = proposal
	c.opts.Logger.Info("elastic scale-down held by the stabilisation window", zap.Int("workers", current), zap.Int("proposal", proposal),
		zap.Duration("window", policy.ScaleDownStabilization))
}
