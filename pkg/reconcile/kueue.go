package reconcile

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/trainstep/trainstep/pkg/apierr"
	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/gang"
)

// releaseKueueHolds drops Kueue's finalizer from the job's pods that are
// being deleted and hold nothing (gang.KueueHoldsDeleted), once the
// controller is done with them: a replica being replaced after Kueue
// evicted its group, a gang given back after its timeout. Kueue would keep
// them until a replacement exists, and the replacement needs the name. A
// current instance the controller has not decided on yet stays: its end
// must be observed (an eviction is free, a failure is not) before it goes.
// So does one being removed whose node was lost: its kubelet will never
// end it, and the forced delete alone cannot remove it while Kueue holds it.
func (c *Controller) releaseKueueHolds(ctx context.Context) error {
	if gang.Kind(c.opts.Job) != v1alpha1.GangKueue {
		return nil
	}
	pods, err := c.pods.Pods(c.opts.Identity.Namespace).List(labels.Everything())
	if err != nil {
		return err
	}
	var done []*corev1.Pod
	onLostNode := map[types.UID]bool{}
	c.mu.Lock()
	for _, p := range pods {
		st := c.byName[p.Name]
		if st == nil || st.uid != p.UID || st.stage == stageRemoving {
			done = append(done, p)
		}
		if st != nil && st.uid == p.UID && st.stage == stageRemoving && c.stranded(st.id.Type, st.pod) {
			onLostNode[p.UID] = true
		}
	}
	c.mu.Unlock()
	return c.releaseKueueHoldsOf(ctx, done, onLostNode)
}

// releaseKueueHoldsOf drops Kueue's finalizer from those of pods it holds
// deleted (gang.KueueHoldsDeleted, or, in onLostNode, being deleted and
// stranded); the cleanup calls it with every pod it is removing. Each
// instance is patched once per version seen; a failed patch is tried again
// when the pod changes or on the next look.
func (c *Controller) releaseKueueHoldsOf(ctx context.Context, pods []*corev1.Pod, onLostNode map[types.UID]bool) error {
	if gang.Kind(c.opts.Job) != v1alpha1.GangKueue {
		return nil
	}
	c.kueueMu.Lock()
	defer c.kueueMu.Unlock()
	var held []*corev1.Pod
	for _, p := range pods {
		lost := onLostNode[p.UID] && p.DeletionTimestamp != nil && slices.Contains(p.Finalizers, gang.KueueFinalizer)
		if !gang.KueueHoldsDeleted(p) && !lost {
			continue
		}
		if rv, done := c.kueueReleased[p.UID]; !done || rv != p.ResourceVersion {
			held = append(held, p)
		}
	}
	errs := c.parallel(ctx, len(held), func(i int) error {
		return c.releaseKueueHold(ctx, held[i])
	})
	for i, p := range held {
		if errs[i] == nil {
			c.kueueReleased[p.UID] = p.ResourceVersion
		}
	}
	return joinErrors(errs)
}

// releaseKueueHold removes Kueue's finalizer from pod, only while it is
// that instance and its finalizers are as read (a JSON patch's tests).
func (c *Controller) releaseKueueHold(ctx context.Context, pod *corev1.Pod) error {
	patch, err := json.Marshal([]map[string]any{
		{"op": "test", "path": "/metadata/uid", "value": pod.UID},
		{"op": "test", "path": "/metadata/finalizers", "value": pod.Finalizers},
		{"op": "replace", "path": "/metadata/finalizers", "value": gang.WithoutKueueFinalizer(pod.Finalizers)},
	})
	if err != nil {
		return err
	}
	err = apierr.Retry(ctx, func() error {
		_, err := c.opts.Core.Pods(pod.Namespace).Patch(ctx, pod.Name, types.JSONPatchType, patch, metav1.PatchOptions{})
		return err
	})
	switch {
	case err == nil:
		c.opts.Logger.Info("released a deleted pod Kueue still held", zap.String("pod", pod.Name), zap.String("phase", string(pod.Status.Phase)))
		return nil
	case apierrors.IsNotFound(err):
		return nil
	case apierrors.IsInvalid(err) || apierrors.IsConflict(err):
		// The pod changed since it was read (a failed test): its update
		// brings it back here.
		c.opts.Logger.Debug("pod changed before Kueue's finalizer was dropped", zap.String("pod", pod.Name), zap.Error(err))
		return nil
	}
	return fmt.Errorf("dropping Kueue's finalizer from pod %s: %w", pod.Name, err)
}

// kueueGroup is the Kueue pod group of the job's current attempt, which
// names its Workload.
func (c *Controller) kueueGroup() string {
	return gang.KueueGroupName(c.opts.Identity.JobName, c.jobAttempt)
}

// kueueSays is what Kueue says about the job's pod group while it does not
// admit it: the Workload named after the group. Empty when it says
// nothing; a failed read only loses the detail.
func (c *Controller) kueueSays(ctx context.Context) string {
	if c.opts.Dynamic == nil {
		return ""
	}
	wl, err := c.opts.Dynamic.Resource(gang.KueueWorkloads).Namespace(c.opts.Identity.Namespace).
		Get(ctx, c.kueueGroup(), metav1.GetOptions{})
	if err != nil {
		c.opts.Logger.Warn("reading the pod group's Kueue Workload", zap.Error(err))
		return ""
	}
	return gang.KueueWorkloadSays(wl)
}

// deleteKueueWorkload removes the pod group's Workload with the job's other
// shared objects, once no pod of the job is meant to stay: Kueue's own way
// to end a group that will not finish (the garbage collector would remove
// it only once it notices the last pod gone). A Role without the verb
// leaves it to the garbage collector.
func (c *Controller) deleteKueueWorkload(ctx context.Context) error {
	if c.opts.Dynamic == nil {
		return nil
	}
	workloads := c.opts.Dynamic.Resource(gang.KueueWorkloads).Namespace(c.opts.Identity.Namespace)
	live, err := workloads.Get(ctx, c.kueueGroup(), metav1.GetOptions{})
	if err == nil {
		if !c.ownsWorkload(live.GetOwnerReferences()) {
			return nil // a Workload of that name not made for the job's pods: left alone
		}
		uid := live.GetUID()
		err = workloads.Delete(ctx, c.kueueGroup(), metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
		if apierrors.IsConflict(err) {
			err = nil
		}
	}
	switch {
	case err == nil || apierrors.IsNotFound(err):
		return nil
	case apierrors.IsForbidden(err):
		c.opts.Logger.Warn("leaving the Kueue Workload to the garbage collector", zap.Error(err))
		return nil
	}
	return err
}

// ownsWorkload reports whether a Workload was made by Kueue for the job's
// pod group: owned by pods with the job's replica names.
func (c *Controller) ownsWorkload(refs []metav1.OwnerReference) bool {
	for _, ref := range refs {
		if ref.Kind == "Pod" && c.byName[ref.Name] != nil {
			return true
		}
	}
	return false
}
