package reconcile

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"

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

// ensureNetworkPolicy creates the job's NetworkPolicy once, before any pod,
// so no replica is ever reachable from outside the job. One an earlier
// attempt of the job left is re-attached to this run's owner; one of the
// same name that is not the job's (another label) ends the run Invalid:
// it is neither used nor, later, deleted.
func (c *Controller) ensureNetworkPolicy(ctx context.Context) error {
	np := c.opts.Desired.NetworkPolicy
	if np == nil || c.networkPolicyUID != "" {
		return nil
	}
	client, err := c.networkPolicyClient()
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
	c.networkPolicyUID = created.GetUID()
	c.createdAny.Store(true)
	return nil
}

// adoptNetworkPolicy takes over the NetworkPolicy an earlier attempt of
// the job created: its labels must be the job's.
func (c *Controller) adoptNetworkPolicy(ctx context.Context, client dynamic.ResourceInterface, np *networkingv1.NetworkPolicy) (*unstructured.Unstructured, error) {
	existing, err := client.Get(ctx, np.Name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	if !isJobsObject(existing.GetLabels(), np.Labels) {
		return nil, result.Invalid(result.ReasonInvalidSpec, fmt.Errorf(
			"NetworkPolicy %s/%s exists and is not job %s's (labels %v, owners %s): rename the job or remove that object",
			existing.GetNamespace(), existing.GetName(), c.opts.Identity.JobName, existing.GetLabels(), describeOwners(existing.GetOwnerReferences())))
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"ownerReferences": np.OwnerReferences,
		"uid":             existing.GetUID(), // the patch applies to that object only
	}})
	if err != nil {
		return nil, err
	}
	return client.Patch(ctx, np.Name, types.MergePatchType, patch, metav1.PatchOptions{})
}

// isJobsObject reports whether an object's labels carry the job's name and,
// when the job's objects carry one, its workflow.
func isJobsObject(have, want map[string]string) bool {
	for _, key := range []string{v1alpha1.LabelJobName, v1alpha1.LabelWorkflow} {
		if w, ok := want[key]; ok && have[key] != w {
			return false
		}
	}
	return true
}

func describeOwners(refs []metav1.OwnerReference) string {
	if len(refs) == 0 {
		return "none"
	}
	out := ""
	for i, r := range refs {
		if i > 0 {
			out += ", "
		}
		out += r.Kind + "/" + r.Name
	}
	return out
}

// deleteNetworkPolicy removes the job's NetworkPolicy at the end: exactly
// the object this run created or re-attached (UID precondition).
func (c *Controller) deleteNetworkPolicy(ctx context.Context) error {
	np := c.opts.Desired.NetworkPolicy
	if np == nil || c.networkPolicyUID == "" {
		return nil
	}
	client, err := c.networkPolicyClient()
	if err != nil {
		return err
	}
	uid := c.networkPolicyUID
	err = client.Delete(ctx, np.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("deleting NetworkPolicy %s: %w", np.Name, err)
	}
	return nil
}

func (c *Controller) networkPolicyClient() (dynamic.ResourceInterface, error) {
	np := c.opts.Desired.NetworkPolicy
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
