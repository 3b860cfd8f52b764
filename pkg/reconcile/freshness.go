package reconcile

import (
	"context"
	"fmt"
	"time"

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

// confirmedWait returns d when it does not end the job on a wait, or when
// the cache it was decided on is current; otherwise a decision to look
// again in a second, once the informer caught up.
func (c *Controller) confirmedWait(ctx context.Context, d policy.Decision) (policy.Decision, error) {
	if !endsOnAWait(d) {
		return d, nil
	}
	behind, err := c.cacheBehind(ctx)
	if err != nil || !behind {
		return d, err
	}
	c.opts.Logger.Info("the pod cache lags the API server; a timeout waits for it before it ends the job")
	return policy.Decision{Outcome: policy.OutcomeRunning, RecheckAfter: time.Second}, nil
}
