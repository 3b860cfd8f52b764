package reconcile

import (
	"context"
	"fmt"
	"time"

	"go.uber.org/zap"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/trainstep/trainstep/pkg/apierr"
	"github.com/trainstep/trainstep/pkg/policy"
	"github.com/trainstep/trainstep/pkg/render"
	"github.com/trainstep/trainstep/pkg/result"
)

// endsOnAWait reports whether d ends the job because a replica waited past
// a bound: pending (or unschedulable) past --pending-timeout, or held in a
// waiting reason past --stuck-timeout. Its premise is what the cache says
// of the pods now, unlike a failure's or a success's, which no later state
// undoes.
func endsOnAWait(d policy.Decision) bool {
	if d.Outcome == policy.OutcomeRunning {
		return false
	}
	return d.Reason == result.ReasonPendingTimeout || d.Reason == result.ReasonUnschedulable || policy.StuckWaitingReasons[d.Reason]
}

// cacheBehind reports whether the pod cache lags the API server: a pod
// listed live that the cache holds at another version, or not at all, or
// one cached that is gone. A watch that broke (kube-apiserver restarted,
// etcd compacted) leaves the cache as it was until the informer relists,
// and a pod that started meanwhile still looks pending in it.
func (c *Controller) cacheBehind(ctx context.Context) (bool, error) {
	selector := metav1.ListOptions{LabelSelector: render.JobSelector(c.opts.Identity).String()}
	var names map[string]string
	err := apierr.Retry(ctx, func() error {
		live, err := c.opts.Core.Pods(c.opts.Identity.Namespace).List(ctx, selector)
		if err != nil {
			return err
		}
		names = make(map[string]string, len(live.Items))
		for _, p := range live.Items {
			names[p.Name] = p.ResourceVersion
		}
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("listing the job's pods to confirm a timeout: %w", err)
	}
	cached, err := c.pods.Pods(c.opts.Identity.Namespace).List(labels.Everything())
	if err != nil {
		return false, err
	}
	if len(cached) != len(names) {
		return true, nil
	}
	for _, p := range cached {
		if rv, ok := names[p.Name]; !ok || rv != p.ResourceVersion {
			return true, nil
		}
	}
	return false, nil
}

// actsOnALostNode reports whether d acts (a restart, a recreation, an
// end) while the view judges a replica lost because its node has not
// answered for --node-lost-timeout. Like a wait's bound, that premise is
// what the cache says now: a watch that broke meanwhile hides the node's
// return, and the replica's real end (an exit that costs a restart).
func (c *Controller) actsOnALostNode(d policy.Decision) bool {
	if d.Outcome == policy.OutcomeRunning && d.RestartJob == nil && len(d.Recreate) == 0 && len(d.RecreateUncounted) == 0 {
		return false
	}
	for i := range c.view.Replicas {
		if policy.NodeLost(&c.view.Replicas[i], c.view.Now, c.opts.Timeouts.NodeLost) {
			return true
		}
	}
	return false
}

// confirmedWait returns d when it goes on, or when the cache it was
// decided on is current; otherwise a decision to look again in a second,
// once the informer caught up. An end decided on a cache a broken watch
// left behind would miss what happened meanwhile: a replica that started
// (a timeout would not have passed) or restarted in place (the restarts
// reported would fall short). So would anything done about a lost node
// (actsOnALostNode), the job's free restart above all. A decision that
// needs no read (the deadline, a failure) is not held up by a List that
// fails, nor for longer than freshnessBound.
func (c *Controller) confirmedWait(ctx context.Context, d policy.Decision) (policy.Decision, error) {
	premiseNow := endsOnAWait(d) || c.actsOnALostNode(d)
	if d.Outcome == policy.OutcomeRunning && !premiseNow {
		c.behindSince = time.Time{}
		return d, nil
	}
	behind, err := c.cacheBehind(ctx)
	now := c.opts.Clock.Now()
	switch {
	case err != nil && premiseNow:
		return d, err
	case err != nil || !behind:
		c.behindSince = time.Time{}
		return d, nil
	case c.behindSince.IsZero():
		c.behindSince = now
	case now.Sub(c.behindSince) >= freshnessBound:
		c.opts.Logger.Warn("the pod cache still lags the API server; deciding on it", zap.Duration("for", now.Sub(c.behindSince)))
		return d, nil
	}
	c.opts.Logger.Info("the pod cache lags the API server; the decision waits for it", zap.String("outcome", string(d.Outcome)), zap.String("reason", d.Reason))
	return policy.Decision{Outcome: policy.OutcomeRunning, RecheckAfter: time.Second}, nil
}

// freshnessBound bounds how long an end waits for the cache to catch up:
// an informer relists within seconds of its watch breaking.
const freshnessBound = 10 * time.Second
