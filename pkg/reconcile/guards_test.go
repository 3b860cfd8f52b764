package reconcile

import (
	"context"
	"maps"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/types"

	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/render"
	"github.com/trainstep/trainstep/pkg/result"
)

var networkPolicies = networkingv1.SchemeGroupVersion.WithResource("networkpolicies")

func networkPolicyController(t *testing.T, existing ...runtime.Object) (*Controller, *dynamicfake.FakeDynamicClient) {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := networkingv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(scheme,
		map[schema.GroupVersionResource]string{networkPolicies: "NetworkPolicyList"}, existing...)
	// The API server gives every object a UID; the fake does not.
	dyn.PrependReactor("create", "networkpolicies", func(a k8stesting.Action) (bool, runtime.Object, error) {
		obj := a.(k8stesting.CreateAction).GetObject().(*unstructured.Unstructured)
		obj.SetUID("uid-created")
		return false, nil, nil
	})
	id := render.Identity{Namespace: "team-a", JobName: "ddp", OwnerID: "id-of-this-step",
		Owner: &metav1.OwnerReference{APIVersion: "v1", Kind: "Pod", Name: "step-2", UID: "uid-step-2"}}
	job := &v1alpha1.TrainJob{Spec: v1alpha1.TrainJobSpec{Framework: v1alpha1.FrameworkPyTorch}}
	c := &Controller{
		opts:      Options{Dynamic: dyn, Identity: id, Desired: &render.Objects{NetworkPolicy: render.NetworkPolicy(job, id)}, Logger: zap.NewNop()},
		guardUIDs: map[string]types.UID{},
	}
	return c, dyn
}

// earlierNetworkPolicy is the job's NetworkPolicy as an earlier attempt
// of the step left it, with the identity given.
func earlierNetworkPolicy(t *testing.T, identity string) *unstructured.Unstructured {
	t.Helper()
	job := &v1alpha1.TrainJob{Spec: v1alpha1.TrainJobSpec{Framework: v1alpha1.FrameworkPyTorch}}
	np := render.NetworkPolicy(job, render.Identity{Namespace: "team-a", JobName: "ddp", OwnerID: identity})
	np.UID = "uid-np"
	obj, err := toUnstructured(np)
	if err != nil {
		t.Fatal(err)
	}
	return obj
}

func TestNetworkPolicyIsCreatedOnceAndDeletedByUID(t *testing.T) {
	c, dyn := networkPolicyController(t)
	ctx := context.Background()
	for range 2 {
		if err := c.ensureGuards(ctx); err != nil {
			t.Fatal(err)
		}
	}
	creates := 0
	for _, a := range dyn.Actions() {
		if a.GetVerb() == "create" {
			creates++
		}
	}
	if creates != 1 || c.guardUIDs["NetworkPolicy/ddp"] == "" {
		t.Errorf("%d creates, uid %q: want one create and its UID kept", creates, c.guardUIDs["NetworkPolicy/ddp"])
	}
	if err := c.deleteGuards(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := dyn.Resource(networkPolicies).Namespace("team-a").Get(ctx, "ddp", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("after the delete: %v, want NotFound", err)
	}
}

// A retried step re-attaches the NetworkPolicy of an earlier attempt (its
// owner becomes this step); one of the job's name without the job's label
// ends the run Invalid and stays as it was.
func TestNetworkPolicyOfTheJobIsAdoptedAndAForeignOneRefused(t *testing.T) {
	earlier := earlierNetworkPolicy(t, "id-of-this-step")
	c, dyn := networkPolicyController(t, earlier)
	ctx := context.Background()
	if err := c.ensureGuards(ctx); err != nil {
		t.Fatalf("adopting the earlier attempt's: %v", err)
	}
	got, err := dyn.Resource(networkPolicies).Namespace("team-a").Get(ctx, "ddp", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if refs := got.GetOwnerReferences(); len(refs) != 1 || refs[0].UID != "uid-step-2" || c.guardUIDs["NetworkPolicy/ddp"] != "uid-np" {
		t.Errorf("owners %v, uid %q: want this step as owner and the object's UID kept", refs, c.guardUIDs["NetworkPolicy/ddp"])
	}

	for name, labels := range map[string]map[string]string{
		"no job label":                {"team": "frontend"},
		"the job's name, no identity": {v1alpha1.LabelJobName: "ddp"},
		"another step's identity":     {v1alpha1.LabelJobName: "ddp", v1alpha1.LabelIdentity: "id-of-another-workflow"},
	} {
		t.Run(name, func(t *testing.T) {
			foreign := earlier.DeepCopy()
			foreign.SetLabels(labels)
			c, dyn := networkPolicyController(t, foreign)
			err := c.ensureGuards(ctx)
			if result.PhaseOf(err) != result.PhaseInvalid || !strings.Contains(err.Error(), "NetworkPolicy team-a/ddp exists and is not job ddp's") {
				t.Fatalf("ensure: %v, want Invalid naming the NetworkPolicy", err)
			}
			if err := c.deleteGuards(ctx); err != nil {
				t.Fatal(err)
			}
			got, err := dyn.Resource(networkPolicies).Namespace("team-a").Get(ctx, "ddp", metav1.GetOptions{})
			if err != nil || len(got.GetOwnerReferences()) != 0 || !maps.Equal(got.GetLabels(), labels) {
				t.Errorf("the foreign NetworkPolicy was changed or deleted: %v (%v)", got, err)
			}
		})
	}
}

// Adopting a NetworkPolicy means trusting what it lets in: one of the
// job's identity whose rules were widened (a pod selector that admits
// every pod) is written back to the rendered rules, whole.
func TestAdoptedNetworkPolicyIsRestoredToTheRenderedRules(t *testing.T) {
	earlier := earlierNetworkPolicy(t, "id-of-this-step")
	widened := map[string]any{"podSelector": map[string]any{}, "ingress": []any{map[string]any{}}, "policyTypes": []any{"Ingress"}}
	earlier.Object["spec"] = widened
	c, dyn := networkPolicyController(t, earlier)
	ctx := context.Background()
	if err := c.ensureGuards(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := dyn.Resource(networkPolicies).Namespace("team-a").Get(ctx, "ddp", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want, err := toUnstructured(c.opts.Desired.NetworkPolicy)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want.Object["spec"], got.Object["spec"]); diff != "" {
		t.Errorf("the adopted NetworkPolicy's spec (-rendered +live):\n%s", diff)
	}
}
