package reconcile

import (
	"context"
	"strings"
	"testing"

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
	id := render.Identity{Namespace: "team-a", JobName: "ddp", Owner: &metav1.OwnerReference{APIVersion: "v1", Kind: "Pod", Name: "step-2", UID: "uid-step-2"}}
	job := &v1alpha1.TrainJob{Spec: v1alpha1.TrainJobSpec{Framework: v1alpha1.FrameworkPyTorch}}
	c := &Controller{opts: Options{Dynamic: dyn, Identity: id, Desired: &render.Objects{NetworkPolicy: render.NetworkPolicy(job, id)}}}
	return c, dyn
}

func TestNetworkPolicyIsCreatedOnceAndDeletedByUID(t *testing.T) {
	c, dyn := networkPolicyController(t)
	ctx := context.Background()
	for range 2 {
		if err := c.ensureNetworkPolicy(ctx); err != nil {
			t.Fatal(err)
		}
	}
	creates := 0
	for _, a := range dyn.Actions() {
		if a.GetVerb() == "create" {
			creates++
		}
	}
	if creates != 1 || c.networkPolicyUID == "" {
		t.Errorf("%d creates, uid %q: want one create and its UID kept", creates, c.networkPolicyUID)
	}
	if err := c.deleteNetworkPolicy(ctx); err != nil {
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
	earlier := &networkingv1.NetworkPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "NetworkPolicy"},
		ObjectMeta: metav1.ObjectMeta{Name: "ddp", Namespace: "team-a", UID: "uid-np", Labels: map[string]string{v1alpha1.LabelJobName: "ddp"}},
	}
	c, dyn := networkPolicyController(t, earlier)
	ctx := context.Background()
	if err := c.ensureNetworkPolicy(ctx); err != nil {
		t.Fatalf("adopting the earlier attempt's: %v", err)
	}
	got, err := dyn.Resource(networkPolicies).Namespace("team-a").Get(ctx, "ddp", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if refs := got.GetOwnerReferences(); len(refs) != 1 || refs[0].UID != "uid-step-2" || c.networkPolicyUID != "uid-np" {
		t.Errorf("owners %v, uid %q: want this step as owner and the object's UID kept", refs, c.networkPolicyUID)
	}

	foreign := earlier.DeepCopy()
	foreign.Labels = map[string]string{"team": "frontend"}
	c, dyn = networkPolicyController(t, foreign)
	err = c.ensureNetworkPolicy(ctx)
	if result.PhaseOf(err) != result.PhaseInvalid || !strings.Contains(err.Error(), "NetworkPolicy team-a/ddp exists and is not job ddp's") {
		t.Fatalf("ensure: %v, want Invalid naming the NetworkPolicy", err)
	}
	if err := c.deleteNetworkPolicy(ctx); err != nil {
		t.Fatal(err)
	}
	got, err = dyn.Resource(networkPolicies).Namespace("team-a").Get(ctx, "ddp", metav1.GetOptions{})
	if err != nil || len(got.GetOwnerReferences()) != 0 || got.GetLabels()["team"] != "frontend" {
		t.Errorf("the foreign NetworkPolicy was changed or deleted: %v (%v)", got, err)
	}
}
