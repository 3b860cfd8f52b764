package reconcile

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/render"
	"github.com/trainstep/trainstep/pkg/result"
)

// Guards are the job-wide objects that protect its replicas rather than
// run them: the NetworkPolicies (who may connect to the replicas and to
// the step's endpoint) and the PodDisruptionBudget (how many ranks a
// drain may take at once). Each is created before any pod, re-attached
// (its spec restored) by a run of the job's identity, refused by name when
// another owner's, and deleted by UID with the job.

// ensureGuards creates the job's guards once, before any pod, so no
// replica is ever reachable from outside the job or evictable one rank at
// a time. One an earlier attempt of the job left is re-attached to this
// run's owner; one of the same name that is not the job's ends the run
// Invalid: it is neither used nor, later, deleted. The guards go out
// together: none depends on another, and a sweep's many steps each wait
// one round trip for them, not one per guard.
func (c *Controller) ensureGuards(ctx context.Context) error {
	var missing []render.Guard
	for _, g := range c.opts.Desired.Guards() {
		if c.guardUIDs[g.Key()] == "" {
			missing = append(missing, g)
		}
	}
	uids := make([]types.UID, len(missing))
	errs := c.parallel(ctx, len(missing), func(i int) error {
		g := missing[i]
		client, err := c.guardClient(g)
		if err != nil {
			return err
		}
		created, err := client.Create(ctx, g.Object, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			created, err = c.adoptGuard(ctx, client, g)
		}
		if err != nil {
			return fmt.Errorf("creating %s %s: %w", g.Kind, g.Object.GetName(), err)
		}
		uids[i] = created.GetUID()
		c.createdAny.Store(true)
		return nil
	})
	for i, g := range missing {
		if uids[i] != "" {
			c.guardUIDs[g.Key()] = uids[i]
		}
	}
	return joinErrors(errs)
}

// adoptGuard takes over the guard an earlier attempt of the job created:
// its labels must be the job's (name and identity), and its spec is what
// this run renders — written back if it differs, since adopting it means
// trusting what it lets in or through.
func (c *Controller) adoptGuard(ctx context.Context, client dynamic.ResourceInterface, g render.Guard) (*unstructured.Unstructured, error) {
	name := g.Object.GetName()
	existing, err := client.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	if !isJobsObject(existing.GetLabels(), g.Object.GetLabels()) {
		return nil, result.Invalid(result.ReasonNotOwned, fmt.Errorf(
			"%s %s/%s exists and is not job %s's (%s): trainstep neither uses nor deletes it; rename the job or remove that object",
			g.Kind, existing.GetNamespace(), name, c.opts.Identity.JobName, DescribeOwnership(existing)))
	}
	// A JSON patch applies to that object only (the UID test) and replaces
	// the spec whole, where a merge patch would keep extra selector keys.
	ops := adoptOps(existing.GetUID(), g.Object.GetOwnerReferences())
	if !holdsRendered(existing.Object["spec"], g.Object.Object["spec"]) {
		ops = append(ops, map[string]any{"op": "add", "path": "/spec", "value": g.Object.Object["spec"]})
		c.event(corev1.EventTypeWarning, EventRestoredSpec, "%s %s of an earlier attempt did not hold the rendered spec; restored", g.Kind, name)
	}
	patch, err := json.Marshal(ops)
	if err != nil {
		return nil, err
	}
	return client.Patch(ctx, name, types.JSONPatchType, patch, metav1.PatchOptions{})
}

// isJobsObject reports whether an object's labels carry the job's name, its
// identity and, when the job's objects carry one, its workflow.
func isJobsObject(have, want map[string]string) bool {
	for _, key := range []string{v1alpha1.LabelJobName, v1alpha1.LabelIdentity, v1alpha1.LabelWorkflow} {
		if w, ok := want[key]; ok && have[key] != w {
			return false
		}
	}
	return have[v1alpha1.LabelIdentity] == want[v1alpha1.LabelIdentity]
}

// adoptOps are the JSON patch operations that re-attach the object uid to
// this run's owners: a test of the UID, so the patch changes that object
// only (when it has one: a fake client's objects have none), and the
// owners, [] when the run has none (an earlier attempt's are cleared).
func adoptOps(uid types.UID, owners []metav1.OwnerReference) []map[string]any {
	var ops []map[string]any
	if uid != "" {
		ops = append(ops, map[string]any{"op": "test", "path": "/metadata/uid", "value": uid})
	}
	if owners == nil {
		owners = []metav1.OwnerReference{}
	}
	return append(ops, map[string]any{"op": "add", "path": "/metadata/ownerReferences", "value": owners})
}

// deleteGuards removes the job's guards at the end: the objects this run
// created or re-attached, by UID; one it has not met (a teardown before the
// first sync re-attached an earlier attempt's) is read back and deleted, by
// its UID, when it has the job's labels.
func (c *Controller) deleteGuards(ctx context.Context) error {
	var errs []error
	for _, g := range c.opts.Desired.Guards() {
		client, err := c.guardClient(g)
		if err != nil {
			return err
		}
		name := g.Object.GetName()
		uid := c.guardUIDs[g.Key()]
		if uid == "" {
			live, err := client.Get(ctx, name, metav1.GetOptions{})
			switch {
			case apierrors.IsNotFound(err):
				continue
			case err != nil:
				errs = append(errs, fmt.Errorf("reading %s %s: %w", g.Kind, name, err))
				continue
			case !isJobsObject(live.GetLabels(), g.Object.GetLabels()):
				continue
			}
			uid = live.GetUID()
		}
		err = client.Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			errs = append(errs, fmt.Errorf("deleting %s %s: %w", g.Kind, name, err))
		}
	}
	return errors.Join(errs...)
}

func (c *Controller) guardClient(g render.Guard) (dynamic.ResourceInterface, error) {
	if c.opts.Dynamic == nil {
		return nil, fmt.Errorf("creating %s %s: no dynamic client", g.Kind, g.Object.GetName())
	}
	return c.opts.Dynamic.Resource(g.Resource).Namespace(g.Object.GetNamespace()), nil
}

func toUnstructured(obj runtime.Object) (*unstructured.Unstructured, error) {
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, fmt.Errorf("converting %T: %w", obj, err)
	}
	return &unstructured.Unstructured{Object: maps.Clone(content)}, nil
}
