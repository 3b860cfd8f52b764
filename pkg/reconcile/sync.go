package reconcile

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"go.uber.org/zap"
	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/trainstep/trainstep/pkg/policy"
	"github.com/trainstep/trainstep/pkg/render"
)

// newBucket is the overall rate limit of re-syncs after errors: 10 per second, bursts of 100.
func newBucket() *rate.Limiter { return rate.NewLimiter(rate.Limit(10), 100) }

// sync looks at the whole job once: create what is missing, let the
// built-in gang admit the job, observe the replicas, ask the policy, then
// carry out recreations.
func (c *Controller) sync(ctx context.Context) (policy.Decision, error) {
	if err := c.ensurePodGroup(ctx); err != nil {
		return policy.Decision{}, c.apiError(err)
	}
	if err := c.createMissing(ctx); err != nil {
		return policy.Decision{}, c.apiError(err)
	}
	gangRecheck, err := c.admitGang(ctx)
	if err != nil {
		return policy.Decision{}, err
	}
	c.view = c.observe()
	decision := policy.Decide(&c.view, c.opts.Rule, c.opts.Timeouts)
	c.reportProgress()
	if decision.Outcome != policy.OutcomeRunning {
		return decision, nil
	}
	if gangRecheck > 0 && (decision.RecheckAfter == 0 || gangRecheck < decision.RecheckAfter) {
		decision.RecheckAfter = gangRecheck
	}
	if err := c.recreate(ctx, decision.Recreate); err != nil {
		return policy.Decision{}, c.apiError(err)
	}
	c.apiErrorsSince = time.Time{}
	return decision, nil
}

// createMissing creates, in parallel, every child not in the caches: the
// job-wide objects and Services, and the pods that have no instance yet
// (first creation, or a replacement whose predecessor is gone).
func (c *Controller) createMissing(ctx context.Context) error {
	var objs []runtime.Object
	missing := func(obj runtime.Object, err error) {
		if apierrors.IsNotFound(err) && !c.wasCreated(obj) {
			objs = append(objs, obj)
		}
	}
	for _, s := range c.opts.Desired.Secrets {
		_, err := c.secrets.Secrets(s.Namespace).Get(s.Name)
		missing(s, err)
	}
	for _, cm := range c.opts.Desired.ConfigMaps {
		_, err := c.configMaps.ConfigMaps(cm.Namespace).Get(cm.Name)
		missing(cm, err)
	}
	for _, svc := range c.opts.Desired.Services {
		_, err := c.services.Services(svc.Namespace).Get(svc.Name)
		missing(svc, err)
	}
	shared := len(objs)
	pods, ids, err := c.podsToCreate()
	if err != nil {
		return err
	}
	for _, p := range pods {
		objs = append(objs, p)
	}
	if len(objs) == 0 {
		return nil
	}
	uids := make([]types.UID, len(objs))
	errs := c.parallel(ctx, len(objs), func(i int) error {
		uid, err := createObject(ctx, c.opts.Client, objs[i])
		uids[i] = uid
		if apierrors.IsAlreadyExists(err) {
			err = nil // created by an earlier attempt; the cache has not caught up
		}
		if err == nil && i < shared {
			c.markCreated(objs[i])
		}
		return err
	})
	for i, id := range ids {
		if j := len(objs) - len(pods) + i; errs[j] == nil && uids[j] != "" {
			c.replicas[id].created, c.replicas[id].uid = true, uids[j]
		}
	}
	if err := joinErrors(errs); err != nil {
		return fmt.Errorf("creating the job's objects: %w", err)
	}
	if !c.createdEvent {
		c.createdEvent = true
		c.event(corev1.EventTypeNormal, EventCreated, "created %d pods and %d services for job %s", len(pods), len(c.opts.Desired.Services), c.opts.Identity.JobName)
	}
	return nil
}

// podsToCreate renders every replica pod that should exist and does not:
// never created, or removed for a recreation and now gone.
func (c *Controller) podsToCreate() ([]*corev1.Pod, []policy.ReplicaID, error) {
	var pods []*corev1.Pod
	var ids []policy.ReplicaID
	if c.gang.holdsCreates() {
		return nil, nil, nil
	}
	for _, id := range c.order {
		st := c.replicas[id]
		name := st.name
		if _, err := c.pods.Pods(c.opts.Identity.Namespace).Get(name); !apierrors.IsNotFound(err) {
			continue
		}
		switch {
		case st.removing:
			st.removing = false
			st.attempt++
		case st.created:
			continue // not yet in the cache, or lost: the policy decides whether it comes back
		}
		pod, err := render.Pod(c.opts.Job, c.opts.Identity, id.Type, id.Index, st.attempt)
		if err != nil {
			return nil, nil, fmt.Errorf("rendering pod %s: %w", name, err)
		}
		c.gangGate(pod)
		pods = append(pods, pod)
		ids = append(ids, id)
	}
	return pods, ids, nil
}

// recreate starts the replacement of each replica the policy asked for:
// a failed pod is deleted (its replacement is created once it is gone),
// a lost one is replaced at once. Each counts as one restart.
func (c *Controller) recreate(ctx context.Context, ids []policy.ReplicaID) error {
	var toDelete []*corev1.Pod
	for _, id := range ids {
		st := c.replicas[id]
		name := st.name
		c.restarts++
		st.recreations++
		st.restartsBefore += st.last.Restarts
		cause := "it ended"
		if r := c.view.Replica(id); r != nil {
			cause = describeEnd(*r)
		}
		c.event(corev1.EventTypeNormal, EventRestarted, "recreating replica %s (attempt %d): %s", id, st.attempt+1, cause)
		c.opts.Logger.Info("recreating replica", zap.Stringer("replica", id), zap.Int("attempt", st.attempt+1), zap.String("cause", cause))
		st.removing = true
		if pod, err := c.pods.Pods(c.opts.Identity.Namespace).Get(name); err == nil && pod.DeletionTimestamp == nil {
			toDelete = append(toDelete, pod)
		}
	}
	errs := c.parallel(ctx, len(toDelete), func(i int) error {
		return deletePod(ctx, c.opts.Client, toDelete[i])
	})
	if err := joinErrors(errs); err != nil {
		return fmt.Errorf("deleting failed replicas: %w", err)
	}
	if len(ids) > len(toDelete) {
		// Lost replicas have no pod to wait for: create their replacements now.
		return c.createMissing(ctx)
	}
	return nil
}

func describeEnd(r policy.Replica) string {
	switch {
	case r.Lost:
		return "its pod was removed from outside (preemption or eviction)"
	case r.ExitCode != nil:
		return "exit code " + strconv.Itoa(int(*r.ExitCode))
	}
	return "it ended"
}

// reportProgress calls OnProgress when the counts changed.
func (c *Controller) reportProgress() {
	if c.opts.OnProgress == nil {
		return
	}
	p := ProgressOf(&c.view)
	if line := p.String(); line != c.lastProgress {
		c.lastProgress = line
		c.opts.OnProgress(p)
	}
}

func (c *Controller) event(eventType, reason, format string, args ...any) {
	if c.opts.Recorder != nil && c.opts.EventObject != nil {
		c.opts.Recorder.Eventf(c.opts.EventObject, eventType, reason, format, args...)
	}
}
