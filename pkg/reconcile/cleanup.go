package reconcile

import (
	"context"
	"fmt"
	"time"

	"go.uber.org/zap"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/trainstep/trainstep/pkg/policy"
)

// Cleanup applies the end-of-job deletions: cleanPodPolicy when the job
// ended by itself, everything when the step was terminated. With wait, it
// returns only once the deleted objects are gone (or ctx ends), so the
// outputs describe a namespace that is already clean. Call it
// after Run returned, on a context the termination signal does not cancel.
func (c *Controller) Cleanup(ctx context.Context, terminated, waitGone bool) error {
	c.view = c.observe()
	plan := policy.Cleanup(c.opts.Job.Spec.RunPolicy.CleanPodPolicyOrDefault(), terminated, c.view.Replicas)
	ns := c.opts.Identity.Namespace
	core := c.opts.Client.CoreV1()

	var deletes []func() error
	pods, _ := c.pods.Pods(ns).List(labels.Everything())
	doomed := map[string]bool{}
	for _, id := range plan.Pods {
		doomed[c.replicas[id].name] = true
	}
	for _, pod := range pods {
		if plan.Shared || doomed[pod.Name] {
			name := pod.Name
			doomed[name] = true
			deletes = append(deletes, func() error { return core.Pods(ns).Delete(ctx, name, metav1.DeleteOptions{}) })
		}
	}
	// A replica's own Service goes with its pod; the job-wide Service, the
	// ConfigMaps and the Secrets go when no pod is left.
	for _, svc := range c.listServices() {
		if plan.Shared || doomed[svc.Name] {
			name := svc.Name
			deletes = append(deletes, func() error { return core.Services(ns).Delete(ctx, name, metav1.DeleteOptions{}) })
		}
	}
	if plan.Shared {
		if c.opts.Desired.PodGroup != nil {
			deletes = append(deletes, func() error { return c.deletePodGroup(ctx) })
		}
		for _, cm := range c.listConfigMaps() {
			name := cm.Name
			deletes = append(deletes, func() error { return core.ConfigMaps(ns).Delete(ctx, name, metav1.DeleteOptions{}) })
		}
		for _, s := range c.listSecrets() {
			name := s.Name
			deletes = append(deletes, func() error { return core.Secrets(ns).Delete(ctx, name, metav1.DeleteOptions{}) })
		}
	}
	errs := c.parallel(ctx, len(deletes), func(i int) error {
		if err := deletes[i](); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		return nil
	})
	if err := joinErrors(errs); err != nil {
		return fmt.Errorf("deleting the job's objects: %w", err)
	}
	c.opts.Logger.Info("cleaned up", zap.Int("deleted", len(deletes)), zap.Bool("terminated", terminated))
	if !waitGone || len(deletes) == 0 {
		return nil
	}
	// The informers still run: wait on the caches, not on the API server.
	return wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(context.Context) (bool, error) {
		pods, _ := c.pods.Pods(ns).List(labels.Everything())
		for _, p := range pods {
			if doomed[p.Name] {
				return false, nil
			}
		}
		for _, s := range c.listServices() {
			if plan.Shared || doomed[s.Name] {
				return false, nil
			}
		}
		return true, nil
	})
}
