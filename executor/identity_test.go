package executor

import (
	"context"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/trainstep/trainstep/pkg/result"
)

// identityWorld is an API server that knows one step pod, controlled by a
// Workflow, and answers a SelfSubjectReview as for the token given.
func identityWorld(t *testing.T, user authenticationv1.UserInfo) *connection {
	t.Helper()
	yes := true
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "pipeline-train-1", Namespace: "ml", UID: "pod-uid-1",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "argoproj.io/v1alpha1", Kind: "Workflow", Name: "pipeline", UID: "wf-uid", Controller: &yes}}}}
	client := fake.NewClientset(pod)
	client.PrependReactor("create", "selfsubjectreviews", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, &authenticationv1.SelfSubjectReview{Status: authenticationv1.SelfSubjectReviewStatus{UserInfo: user}}, nil
	})
	return &connection{core: client.CoreV1(), authentication: client.AuthenticationV1(), namespace: "ml"}
}

// The step pod's bound token, as the API server reports it.
var stepPodUser = authenticationv1.UserInfo{Username: "system:serviceaccount:ml:trainstep",
	Extra: map[string]authenticationv1.ExtraValue{extraPodName: {"pipeline-train-1"}, extraPodUID: {"pod-uid-1"}}}

func TestIdentityOfAWorkflowStepIsProvenFromItsPod(t *testing.T) {
	ctx := context.Background()
	workflowStep := func(uid, node string) *Config {
		return &Config{WorkflowUID: uid, WorkflowNode: node, OwnerPod: "pipeline-train-1", OwnerUID: "pod-uid-1", APITimeout: time.Second}
	}
	got, err := proveIdentity(ctx, workflowStep("wf-uid", "pipeline.train(2)"), identityWorld(t, stepPodUser))
	if err != nil {
		t.Fatal(err)
	}
	if want := WorkflowIdentity("wf-uid", "pipeline.train"); got.key != want || got.workflow != "pipeline" || got.reattach != "" {
		t.Errorf("identity %+v, want key %s of workflow pipeline, nothing to re-attach by hand", got, want)
	}
	if len(got.key) != identityLength || strings.Trim(got.key, "0123456789abcdef") != "" {
		t.Errorf("identity %q is not %d hex digits: a label value", got.key, identityLength)
	}

	for _, tc := range []struct {
		name string
		cfg  *Config
		user authenticationv1.UserInfo
		want string
	}{
		{"another workflow's UID", workflowStep("victim-wf-uid", "victim.train"), stepPodUser, "belongs to workflow pipeline (uid wf-uid), not to --workflow-uid victim-wf-uid"},
		{"credentials not bound to a pod", workflowStep("wf-uid", "pipeline.train"), authenticationv1.UserInfo{Username: "kubernetes-admin"}, "not bound to a pod"},
		{"another pod named as the owner", &Config{WorkflowUID: "wf-uid", WorkflowNode: "pipeline.train", OwnerPod: "victim-step", OwnerUID: "x", APITimeout: time.Second},
			stepPodUser, "--owner-pod victim-step (uid x) is not the pod the step runs in"},
		{"a node without its workflow", &Config{WorkflowNode: "pipeline.train"}, stepPodUser, "go together"},
		{"--identity beside a workflow", &Config{WorkflowUID: "wf-uid", WorkflowNode: "pipeline.train", Identity: "mine"}, stepPodUser, "--identity is for runs outside Argo"},
		{"a token of another namespace", workflowStep("wf-uid", "pipeline.train"), authenticationv1.UserInfo{Username: "system:serviceaccount:other:trainstep", Extra: stepPodUser.Extra}, `namespace "other"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := proveIdentity(ctx, tc.cfg, identityWorld(t, tc.user))
			if result.PhaseOf(err) != result.PhaseInvalid || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err %v, want Invalid saying %q", err, tc.want)
			}
		})
	}
}

func TestIdentityOfARunByHand(t *testing.T) {
	ctx := context.Background()
	conn := identityWorld(t, authenticationv1.UserInfo{Username: "kubernetes-admin"})
	a, err := proveIdentity(ctx, &Config{Identity: "nightly"}, conn)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := proveIdentity(ctx, &Config{Identity: "nightly"}, conn)
	if a.key != b.key || a.reattach != "nightly" {
		t.Errorf("two runs given --identity nightly: %+v and %+v, want the same key and nightly to re-attach with", a, b)
	}
	if a.key == WorkflowIdentity("nightly", "") {
		t.Error("--identity hashes like a workflow step's identity: a run by hand could present one")
	}
	own1, _ := proveIdentity(ctx, &Config{}, conn)
	own2, _ := proveIdentity(ctx, &Config{}, conn)
	if own1.key == own2.key || own1.reattach == "" {
		t.Errorf("two runs without an identity: %+v and %+v, want each its own, and one to re-attach with", own1, own2)
	}
	if again, _ := proveIdentity(ctx, &Config{Identity: own1.reattach}, conn); again.key != own1.key {
		t.Errorf("--identity=%s gives %s, want the logged run's %s", own1.reattach, again.key, own1.key)
	}
}
