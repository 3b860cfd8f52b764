package reconcile

import (
	"context"
	"encoding/json"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
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
		live, gerr := client.Get(ctx, pg.GetName(), metav1.GetOptions{})
		if gerr != nil {
			return fmt.Errorf("reading PodGroup %s that already exists: %w", pg.GetName(), gerr)
		}
		if live.GetLabels()[v1alpha1.LabelJobName] != c.opts.Identity.JobName {
			return notOwned("PodGroup", pg.GetName(), live)
		}
		patch, perr := json.Marshal(map[string]any{"metadata": map[string]any{"ownerReferences": pg.GetOwnerReferences()}})
		if perr != nil {
			return perr
		}
		_, err = client.Patch(ctx, pg.GetName(), types.MergePatchType, patch, metav1.PatchOptions{})
	}
	if err != nil {
		return fmt.Errorf("creating PodGroup %s: %w", pg.GetName(), err)
	}
	c.podGroupCreated = true
	return nil
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
	case live.GetLabels()[v1alpha1.LabelJobName] != c.opts.Identity.JobName:
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
