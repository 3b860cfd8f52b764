package reconcile

import (
	"context"
	"fmt"
	"slices"
	"time"

	"go.uber.org/zap"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/trainstep/trainstep/pkg/policy"
	"github.com/trainstep/trainstep/pkg/render"
)

// Cleanup applies the end-of-job deletions: cleanPodPolicy when the job
// ended by itself, everything when the step was terminated or the run
// failed. Deletes go by name, for every replica and Service the job may have
// (NotFound is fine), so that objects whose create was never answered, or
// that the caches never held, go too. With waitGone it returns once a live
// List by the job's label finds none of the deleted objects (or ctx ends),
// and names whatever is still there. Call it after Run returned (or instead
// of Run, when the run was stopped before it), on a context the
// termination signal does not cancel.
func (c *Controller) Cleanup(ctx context.Context, everything, waitGone bool) ([]string, error) {
	c.view = c.observe()
	plan := policy.Cleanup(c.opts.Job.Spec.RunPolicy.CleanPodPolicyOrDefault(), everything, c.view.Replicas)
	doomed := map[string]bool{}
	if everything {
		for _, id := range c.order {
			doomed[c.replicas[id].name] = true
		}
	}
	for _, id := range plan.Pods {
		doomed[c.replicas[id].name] = true
	}
	if len(doomed) == 0 && !plan.Shared {
		return nil, nil
	}
	ns := c.opts.Identity.Namespace
	core := c.opts.Core
	var deletes []func() error
	for name := range doomed {
		deletes = append(deletes, func() error { return core.Pods(ns).Delete(ctx, name, metav1.DeleteOptions{}) })
	}
	// A replica's own Service goes with its pod; the job-wide Service, the
	// ConfigMaps and the Secrets go when no pod is left.
	doomedServices := map[string]bool{}
	for _, svc := range c.opts.Desired.Services {
		if plan.Shared || doomed[svc.Name] {
			doomedServices[svc.Name] = true
			name := svc.Name
			deletes = append(deletes, func() error { return core.Services(ns).Delete(ctx, name, metav1.DeleteOptions{}) })
		}
	}
	if plan.Shared {
		if c.opts.Desired.PodGroup != nil {
			deletes = append(deletes, func() error { return c.deletePodGroup(ctx) })
		}
		for _, cm := range c.opts.Desired.ConfigMaps {
			name := cm.Name
			deletes = append(deletes, func() error { return core.ConfigMaps(ns).Delete(ctx, name, metav1.DeleteOptions{}) })
		}
		for _, s := range c.opts.Desired.Secrets {
			name := s.Name
			deletes = append(deletes, func() error { return core.Secrets(ns).Delete(ctx, name, metav1.DeleteOptions{}) })
		}
	}
	deletedByName := c.cachedUIDs()
	err := c.deleteAll(ctx, deletes)
	c.opts.Logger.Info("cleaned up", zap.Int("deleted", len(deletes)), zap.Bool("everything", everything))
	if err != nil || !waitGone {
		return nil, err
	}
	// Whatever carries the job's label is the job's, once every pod goes:
	// a pod of a replica type the spec no longer has, a Service never
	// rendered by this version.
	isDoomed := func(kind, name string) bool {
		if plan.Shared {
			return true
		}
		if kind == "pod" {
			return doomed[name]
		}
		return doomedServices[name]
	}
	c.waitForCaches(ctx, isDoomed, deletedByName)
	return c.confirmGone(ctx, isDoomed)
}

// deleteAll runs the teardown's deletes, TeardownParallelism at once;
// NotFound counts as done.
func (c *Controller) deleteAll(ctx context.Context, deletes []func() error) error {
	errs := parallelize(ctx, c.opts.TeardownParallelism, len(deletes), func(i int) error {
		if err := deletes[i](); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		return nil
	})
	if err := joinErrors(errs); err != nil {
		return fmt.Errorf("deleting the job's objects: %w", err)
	}
	return nil
}

// cachedUIDs returns the UIDs of the pods and Services the caches hold:
// the instances that deletes by name issued now remove.
func (c *Controller) cachedUIDs() map[types.UID]bool {
	uids := map[types.UID]bool{}
	if !c.cachesSynced.Load() {
		return uids
	}
	pods, _ := c.pods.Pods(c.opts.Identity.Namespace).List(labels.Everything())
	for _, p := range pods {
		uids[p.UID] = true
	}
	for _, s := range c.listServices() {
		uids[s.UID] = true
	}
	return uids
}

// waitForCaches waits, without List requests, until the informers saw the
// doomed objects go. An instance the deletes by name did not cover (its
// create was still in flight when they went out) is deleted once it shows
// up. Caches that never synced are not waited on.
func (c *Controller) waitForCaches(ctx context.Context, isDoomed func(kind, name string) bool, deletedByName map[types.UID]bool) {
	if !c.cachesSynced.Load() {
		return
	}
	ns := c.opts.Identity.Namespace
	core := c.opts.Core
	deletedAgain := deletedByName
	_ = wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(context.Context) (bool, error) {
		var again []func() error
		gone := true
		pods, _ := c.pods.Pods(ns).List(labels.Everything())
		for _, p := range pods {
			if !isDoomed("pod", p.Name) {
				continue
			}
			gone = false
			if p.DeletionTimestamp == nil && !deletedAgain[p.UID] {
				deletedAgain[p.UID] = true
				name, uid := p.Name, p.UID
				again = append(again, func() error { return deletePodUID(ctx, c.opts.Core, ns, name, uid) })
			}
		}
		for _, s := range c.listServices() {
			if !isDoomed("service", s.Name) {
				continue
			}
			gone = false
			if !deletedAgain[s.UID] {
				deletedAgain[s.UID] = true
				name, uid := s.Name, s.UID
				again = append(again, func() error {
					return core.Services(ns).Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
				})
			}
		}
		if err := c.deleteAll(ctx, again); err != nil {
			c.opts.Logger.Warn("deleting the job's objects again", zap.Error(err))
		}
		return gone, nil
	})
}

// confirmGone lists the job's pods and Services on the API server itself.
// Anything doomed that is still there is deleted again and waited for; what
// remains when ctx ends is returned by name.
func (c *Controller) confirmGone(ctx context.Context, isDoomed func(kind, name string) bool) ([]string, error) {
	ns := c.opts.Identity.Namespace
	core := c.opts.Core
	selector := metav1.ListOptions{LabelSelector: render.JobSelector(c.opts.Identity.JobName).String()}
	var left []string
	var lastErr error
	deletedAgain := map[string]bool{}
	poll := func(ctx context.Context) (bool, error) {
		left = left[:0]
		var deletes []func() error
		pods, err := core.Pods(ns).List(ctx, selector)
		if err != nil {
			lastErr = fmt.Errorf("listing the job's pods: %w", err)
			return false, nil
		}
		for _, p := range pods.Items {
			if !isDoomed("pod", p.Name) {
				continue
			}
			left = append(left, "pod/"+p.Name)
			if p.DeletionTimestamp == nil && !deletedAgain["pod/"+p.Name] {
				deletedAgain["pod/"+p.Name] = true
				name := p.Name
				deletes = append(deletes, func() error { return core.Pods(ns).Delete(ctx, name, metav1.DeleteOptions{}) })
			}
		}
		svcs, err := core.Services(ns).List(ctx, selector)
		if err != nil {
			lastErr = fmt.Errorf("listing the job's services: %w", err)
			return false, nil
		}
		for _, s := range svcs.Items {
			if !isDoomed("service", s.Name) {
				continue
			}
			left = append(left, "service/"+s.Name)
			if !deletedAgain["service/"+s.Name] {
				deletedAgain["service/"+s.Name] = true
				name := s.Name
				deletes = append(deletes, func() error { return core.Services(ns).Delete(ctx, name, metav1.DeleteOptions{}) })
			}
		}
		lastErr = c.deleteAll(ctx, deletes)
		return len(left) == 0 && lastErr == nil, nil
	}
	if err := wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, poll); err != nil {
		slices.Sort(left)
		if lastErr == nil {
			lastErr = err
		}
		return left, fmt.Errorf("waiting for the job's objects to go: %w", lastErr)
	}
	return nil, nil
}
