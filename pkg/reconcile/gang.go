package reconcile

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/trainstep/trainstep/pkg/apierr"
	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/gang"
	"github.com/trainstep/trainstep/pkg/policy"
	"github.com/trainstep/trainstep/pkg/result"
)

// gangAdmission carries one job's gang state. Under the built-in gang pods
// are created gated, ungated together once all exist, and given back when
// the scheduler cannot bind enough of them within the timeout. Under
// Kubernetes' gang and scheduler-plugins' coscheduling the scheduler holds
// the pods itself, and under Kueue its admission gate does: trainstep only
// bounds the wait, once per job attempt.
type gangAdmission struct {
	params gang.Params
	state  gang.Admission
	jitter func() float64
}

func newGangAdmission(job *v1alpha1.TrainJob, jitter func() float64) *gangAdmission {
	switch gang.Kind(job) {
	case v1alpha1.GangBuiltin, v1alpha1.GangKubernetes, v1alpha1.GangSchedulerPlugins, v1alpha1.GangKueue:
	default:
		return nil
	}
	if jitter == nil {
		jitter = rand.Float64
	}
	return &gangAdmission{params: gang.ParamsFor(job), state: gang.Start(), jitter: jitter}
}

// holdsCreates reports whether no pod may be created now: the pods of a
// failed attempt are being given back, or the backoff is not over.
func (g *gangAdmission) holdsCreates() bool {
	return g != nil && g.state.Stage == gang.StageBackingOff
}

// gatesNewPods reports whether pods created now keep the gang's gate. Only
// an attempt's first creates do; a replica replaced later is not gated.
func (g *gangAdmission) gatesNewPods() bool {
	return g != nil && g.state.Stage == gang.StageCreating
}

// admitGang advances the gang and returns when to look again. At the end
// of the last attempt it returns a Transient Unschedulable error, with what
// the scheduler said about the group when it says anything.
func (c *Controller) admitGang(ctx context.Context) (time.Duration, error) {
	g := c.gang
	if g == nil || g.state.Stage == gang.StageAdmitted {
		return 0, nil
	}
	pods, count := c.gangPods()
	step := g.params.Next(g.state, count, c.opts.Clock.Now(), g.jitter())
	if step.Action == gang.ActionReleaseAll || step.Action == gang.ActionGiveUp {
		// Both end a wait for the pods to be bound, as the cache shows them:
		// a cache behind the API server waits until it caught up.
		if behind, err := c.cacheBehind(ctx); err != nil || behind {
			return time.Second, c.apiErrorOrNil(err)
		}
	}
	// The next state is saved only once the action it needs landed: a
	// failed ungate or release is decided again on the next sync.
	switch step.Action {
	case gang.ActionUngate:
		if err := c.ungate(ctx, pods); err != nil {
			return 0, c.apiError(fmt.Errorf("lifting the gang's scheduling gates: %w", err))
		}
		g.state = step.Next
		c.opts.Logger.Info("all pods exist; lifted the gang's scheduling gates", zap.Int("attempt", g.state.Attempt), zap.Int("pods", len(pods)))
	case gang.ActionReleaseAll:
		if err := c.releaseAll(ctx); err != nil {
			return 0, c.apiError(fmt.Errorf("releasing the gang's pods: %w", err))
		}
		g.state = step.Next
		if step.QuotaRelease {
			// One text for every release, so that the recorder counts them on
			// one Event instead of writing one each; the log has the detail.
			c.event(corev1.EventTypeWarning, EventGangRetry, "a ResourceQuota refused part of the gang for %s; released its pods, to try again as a whole", g.params.QuotaPatience)
			c.opts.Logger.Info("a ResourceQuota refused part of the gang; released its pods", zap.String("detail", step.Message))
		} else {
			c.event(corev1.EventTypeWarning, EventGangRetry, "%s", step.Message)
			c.opts.Logger.Info("gang not schedulable; released its pods", zap.String("detail", step.Message))
		}
	case gang.ActionRetry:
		// Creates are derived from the state: the next attempt's pods are
		// created (gated) by this sync or, if some fail, by a later one.
		g.state = step.Next
		c.opts.Logger.Info("starting the next gang attempt", zap.Int("attempt", g.state.Attempt))
		if err := c.createMissing(ctx); err != nil {
			return 0, c.apiError(err)
		}
	case gang.ActionGiveUp:
		if gang.Kind(c.opts.Job) == v1alpha1.GangKueue {
			if says := c.kueueSays(ctx); says != "" {
				step.Message += "; Kueue says: " + says
			}
		} else if says := c.schedulerSays(ctx, pods); says != "" {
			step.Message += "; the scheduler says: " + says
		}
		c.event(corev1.EventTypeWarning, EventUnschedulable, "%s", step.Message)
		// Give the pods back now; the end-of-run cleanup removes the rest.
		if err := c.releaseAll(ctx); err != nil {
			c.opts.Logger.Warn("releasing the gang's pods", zap.Error(err))
		}
		return 0, result.Transient(result.ReasonUnschedulable,
			fmt.Errorf("the job could not be scheduled all together: %s", step.Message))
	default:
		g.state = step.Next
	}
	if g.state.Stage == gang.StageAdmitted {
		c.event(corev1.EventTypeNormal, EventGangAdmitted, "%d pods bound together at attempt %d", count.Bound, g.state.Attempt)
		c.opts.Logger.Info("gang admitted", zap.Int("attempt", g.state.Attempt), zap.Int("bound", count.Bound))
	}
	return step.RecheckAfter, nil
}

// gangPods returns the job's live replica pods and counts them. While the
// gang backs off from a release, a released pod still going counts as
// existing: the next try waits for it (gang.Params.Next), so that no new
// rank is made at the job attempt beside one that still runs, unless its
// kubelet will not finish it.
func (c *Controller) gangPods() ([]*corev1.Pod, gang.Pods) {
	// The gang is the slots the job wants now: those above an elastic
	// job's metric-driven target are not created.
	var ids []policy.ReplicaID
	c.mu.Lock()
	for _, id := range c.order {
		if !c.aboveTarget(c.replicas[id]) {
			ids = append(ids, id)
		}
	}
	refused := c.quota.refusal != ""
	c.mu.Unlock()
	releasing := c.gang != nil && c.gang.state.Stage == gang.StageBackingOff
	count := gang.Pods{Desired: len(ids), QuotaRefuses: refused}
	var pods []*corev1.Pod
	for _, id := range ids {
		pod, err := c.pods.Pods(c.opts.Identity.Namespace).Get(c.replicas[id].name)
		if err != nil {
			continue
		}
		if pod.DeletionTimestamp != nil {
			if releasing && !c.stranded(id.Type, pod) {
				count.Existing++
			}
			continue
		}
		pods = append(pods, pod)
		count.Existing++
		count.Created = append(count.Created, pod.CreationTimestamp.Time)
		if gang.HasGate(pod) {
			count.Gated++
		}
		if pod.Spec.NodeName != "" {
			count.Bound++
		}
	}
	return pods, count
}

// ungate removes the gang's gate from every pod, in parallel, so that the
// scheduler sees the whole job at once.
func (c *Controller) ungate(ctx context.Context, pods []*corev1.Pod) error {
	var gated []*corev1.Pod
	for _, p := range pods {
		if gang.HasGate(p) {
			gated = append(gated, p)
		}
	}
	errs := c.parallel(ctx, len(gated), func(i int) error {
		pod := gated[i]
		// A merge patch replaces the list: keep other controllers' gates.
		patch, err := json.Marshal(map[string]any{"spec": map[string]any{"schedulingGates": gang.WithoutGate(pod.Spec.SchedulingGates)}})
		if err != nil {
			return err
		}
		return apierr.Retry(ctx, func() error {
			_, err := c.opts.Core.Pods(pod.Namespace).Patch(ctx, pod.Name, types.MergePatchType, patch, metav1.PatchOptions{})
			return err
		})
	})
	return joinErrors(errs)
}

// releaseAll deletes every pod of a failed attempt, each by the UID this
// run knows, so that pods the informer has not delivered yet go too. The
// replicas are recreated at the same attempt once their deletes are seen:
// a gang retry is no restart. A replica moves on only once its delete
// landed; the error of any other is returned, and the release is decided
// again.
func (c *Controller) releaseAll(ctx context.Context) error {
	var doomed []doomedInstance
	c.mu.Lock()
	now := c.opts.Clock.Now()
	for _, id := range c.order {
		st := c.replicas[id]
		switch {
		case st.uid != "" && st.stage != stageLost && st.stage != stageRemoving:
			st.deleteSent()
			doomed = append(doomed, doomedInstance{st: st, uid: st.uid})
		default:
			st.release(now) // nothing to delete
		}
	}
	c.mu.Unlock()
	return c.deleteAndRelease(ctx, doomed)
}

// doomedInstance is one replica's instance to delete without a restart
// (a gang release, a whole-job restart); force when its node is lost.
type doomedInstance struct {
	st    *replicaState
	uid   types.UID
	force bool
}

// deleteAndRelease deletes each instance by its UID, in parallel, and
// releases the replicas whose delete landed (their deleteSent marks were
// set by the caller); a refused delete takes its mark back, and its error
// is returned. A transient error may have come after the delete landed:
// that instance is released once it shows it is going, never counted as
// a failure.
func (c *Controller) deleteAndRelease(ctx context.Context, doomed []doomedInstance) error {
	errs := c.parallel(ctx, len(doomed), func(i int) error {
		d := doomed[i]
		return deletePodWith(ctx, c.opts.Core, c.opts.Identity.Namespace, d.st.name, d.uid, d.force)
	})
	c.mu.Lock()
	now := c.opts.Clock.Now()
	for i, d := range doomed {
		switch {
		case errs[i] != nil && apierr.IsTransient(errs[i]):
			d.st.releaseUnanswered(d.uid, now)
		case errs[i] != nil:
			d.st.deleteFailed()
		case d.st.uid == d.uid || d.st.stage == stageAbsent:
			d.st.release(now)
		}
	}
	c.mu.Unlock()
	return joinErrors(errs)
}

// gangGate drops the gang's gate from a pod about to be created when the
// gang no longer gates new pods.
func (c *Controller) gangGate(pod *corev1.Pod) {
	if !c.gang.gatesNewPods() {
		pod.Spec.SchedulingGates = gang.WithoutGate(pod.Spec.SchedulingGates)
	}
}

// schedulerSays is what the scheduler last said about the gang: the
// condition it sets on a Kubernetes PodGroup while the group does not fit,
// else the PodScheduled message of a pod it could not place (the built-in
// gang's, and a PodGroup without the condition yet). Empty when it said
// nothing; a failed read only loses the detail.
func (c *Controller) schedulerSays(ctx context.Context, pods []*corev1.Pod) string {
	if pg := c.opts.Desired.PodGroup; pg != nil && gang.Kind(c.opts.Job) == v1alpha1.GangKubernetes {
		client, err := c.podGroupClient()
		if err == nil {
			var live *unstructured.Unstructured
			live, err = client.Get(ctx, pg.GetName(), metav1.GetOptions{})
			if err == nil {
				if msg := gang.KubernetesUnschedulable(live); msg != "" {
					return msg
				}
			}
		}
		if err != nil {
			c.opts.Logger.Warn("reading the PodGroup's scheduling condition", zap.Error(err))
		}
	}
	for _, pod := range pods {
		for _, cond := range pod.Status.Conditions {
			if cond.Type == corev1.PodScheduled && cond.Status == corev1.ConditionFalse && cond.Message != "" {
				return cond.Message
			}
		}
	}
	return ""
}
