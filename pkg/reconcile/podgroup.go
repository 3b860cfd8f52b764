package reconcile

import (
	"context"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
)

// ensurePodGroup creates the job's PodGroup (Kubernetes, scheduler-plugins
// or Volcano) once, before any pod. One left by an earlier attempt of the
// job is re-attached to this run's owner.
func (c *Controller) ensurePodGroup(ctx context.Context) error {
	pg := c.opts.Desired.PodGroup
	if pg == nil || c.podGroupCreated {
		return nil
	}
	client, err := c.podGroupClient()
	if err != nil {
		return err
	}
	_, err = client.Create(ctx, pg, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		err = c.adoptPodGroup(ctx, client, pg)
	}
	if err != nil {
		return fmt.Errorf("creating PodGroup %s: %w", pg.GetName(), err)
	}
	c.podGroupCreated = true
	return nil
}

// adoptPodGroup takes over the PodGroup an earlier attempt of the job
// created: it must carry the job's name and identity, and its spec (the
// gang's size, queue and priority) is what this run renders — written back
// if it differs.
func (c *Controller) adoptPodGroup(ctx context.Context, client dynamic.ResourceInterface, pg *unstructured.Unstructured) error {
	live, err := client.Get(ctx, pg.GetName(), metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("reading PodGroup %s that already exists: %w", pg.GetName(), err)
	}
	if !c.ofThisJob(live.GetLabels()) {
		return notOwned("PodGroup", pg.GetName(), live)
	}
	ops := adoptOps(live.GetUID(), pg.GetOwnerReferences())
	if !holdsRendered(live.Object["spec"], pg.Object["spec"]) {
		ops = append(ops, map[string]any{"op": "add", "path": "/spec", "value": pg.Object["spec"]})
		c.event(corev1.EventTypeWarning, EventRestoredSpec, "PodGroup %s of an earlier attempt did not hold the rendered gang; restored", pg.GetName())
	}
	patch, err := json.Marshal(ops)
	if err != nil {
		return err
	}
	_, err = client.Patch(ctx, pg.GetName(), types.JSONPatchType, patch, metav1.PatchOptions{})
	return err
}

// deletePodGroup removes the job's PodGroup at the end.
func (c *Controller) deletePodGroup(ctx context.Context) error {
	pg := c.opts.Desired.PodGroup
	if pg == nil {
		return nil
	}
	client, err := c.podGroupClient()
	if err != nil {
		return err
	}
	live, err := client.Get(ctx, pg.GetName(), metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return fmt.Errorf("reading PodGroup %s: %w", pg.GetName(), err)
	case !c.ofThisJob(live.GetLabels()):
		return nil // not the job's: left alone
	}
	uid := live.GetUID()
	err = client.Delete(ctx, pg.GetName(), metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("deleting PodGroup %s: %w", pg.GetName(), err)
	}
	return nil
}

func (c *Controller) podGroupClient() (dynamic.ResourceInterface, error) {
	pg := c.opts.Desired.PodGroup
	if c.opts.Dynamic == nil {
		return nil, fmt.Errorf("creating PodGroup %s: no dynamic client", pg.GetName())
	}
	gvr := schema.FromAPIVersionAndKind(pg.GetAPIVersion(), pg.GetKind()).GroupVersion().WithResource("podgroups")
	return c.opts.Dynamic.Resource(gvr).Namespace(pg.GetNamespace()), nil
}
