package reconcile

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/result"
)

var networkPolicies = networkingv1.SchemeGroupVersion.WithResource("networkpolicies")

// ensureNetworkPolicies creates the job's NetworkPolicies once, before any
// pod, so no replica is ever reachable from outside the job. One an
// earlier attempt of the job left is re-attached to this run's owner; one
// of the same name that is not the job's (another label) ends the run
// Invalid: it is neither used nor, later, deleted.
func (c *Controller) ensureNetworkPolicies(ctx context.Context) error {
	for _, np := range c.opts.Desired.NetworkPolicies() {
		if c.networkPolicyUIDs[np.Name] != "" {
			continue
		}
		client, err := c.networkPolicyClient(np)
		if err != nil {
			return err
		}
		obj, err := toUnstructured(np)
		if err != nil {
			return err
		}
		created, err := client.Create(ctx, obj, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			created, err = c.adoptNetworkPolicy(ctx, client, np)
		}
		if err != nil {
			return fmt.Errorf("creating NetworkPolicy %s: %w", np.Name, err)
		}
		c.networkPolicyUIDs[np.Name] = created.GetUID()
		c.createdAny.Store(true)
	}
	return nil
}

// adoptNetworkPolicy takes over the NetworkPolicy an earlier attempt of
// the job created: its labels must be the job's (name and identity), and
// its spec is what this run renders — written back if it differs, since
// adopting it means trusting what it lets in.
func (c *Controller) adoptNetworkPolicy(ctx context.Context, client dynamic.ResourceInterface, np *networkingv1.NetworkPolicy) (*unstructured.Unstructured, error) {
	existing, err := client.Get(ctx, np.Name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	if !isJobsObject(existing.GetLabels(), np.Labels) {
		return nil, result.Invalid(result.ReasonNotOwned, fmt.Errorf(
			"NetworkPolicy %s/%s exists and is not job %s's (%s): trainstep neither uses nor deletes it; rename the job or remove that object",
			existing.GetNamespace(), existing.GetName(), c.opts.Identity.JobName, DescribeOwnership(existing)))
	}
	rendered, err := toUnstructured(np)
	if err != nil {
		return nil, err
	}
	// A JSON patch applies to that object only (the UID test) and replaces
	// the spec whole, where a merge patch would keep extra selector keys.
	ops := adoptOps(existing.GetUID(), np.OwnerReferences)
	if !holdsRendered(existing.Object["spec"], rendered.Object["spec"]) {
		ops = append(ops, map[string]any{"op": "add", "path": "/spec", "value": np.Spec})
		c.event(corev1.EventTypeWarning, EventRestoredSpec, "NetworkPolicy %s of an earlier attempt did not hold the rendered rules; restored", np.Name)
	}
	patch, err := json.Marshal(ops)
	if err != nil {
		return nil, err
	}
	return client.Patch(ctx, np.Name, types.JSONPatchType, patch, metav1.PatchOptions{})
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

// deleteNetworkPolicies removes the job's NetworkPolicies at the end:
// the objects this run created or re-attached, by UID; one it has not met
// (a teardown before the first sync re-attached an earlier attempt's) is
// read back and deleted, by its UID, when it has the job's labels.
func (c *Controller) deleteNetworkPolicies(ctx context.Context) error {
	var errs []error
	for _, np := range c.opts.Desired.NetworkPolicies() {
		client, err := c.networkPolicyClient(np)
		if err != nil {
			return err
		}
		uid := c.networkPolicyUIDs[np.Name]
		if uid == "" {
			live, err := client.Get(ctx, np.Name, metav1.GetOptions{})
			switch {
			case apierrors.IsNotFound(err):
				continue
			case err != nil:
				errs = append(errs, fmt.Errorf("reading NetworkPolicy %s: %w", np.Name, err))
				continue
			case !isJobsObject(live.GetLabels(), np.Labels):
				continue
			}
			uid = live.GetUID()
		}
		err = client.Delete(ctx, np.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			errs = append(errs, fmt.Errorf("deleting NetworkPolicy %s: %w", np.Name, err))
		}
	}
	return errors.Join(errs...)
}

func (c *Controller) networkPolicyClient(np *networkingv1.NetworkPolicy) (dynamic.ResourceInterface, error) {
	if c.opts.Dynamic == nil {
		return nil, fmt.Errorf("creating NetworkPolicy %s: no dynamic client", np.Name)
	}
	return c.opts.Dynamic.Resource(networkPolicies).Namespace(np.Namespace), nil
}

func toUnstructured(obj runtime.Object) (*unstructured.Unstructured, error) {
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, fmt.Errorf("converting %T: %w", obj, err)
	}
	return &unstructured.Unstructured{Object: maps.Clone(content)}, nil
}
