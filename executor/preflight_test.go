package executor

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"sigs.k8s.io/yaml"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/render"
	"github.com/trainstep/trainstep/pkg/result"
	"github.com/trainstep/trainstep/pkg/spec"
)

func loadJob(t *testing.T, manifest string) *v1alpha1.TrainJob {
	t.Helper()
	job, _, err := spec.Load([]byte(manifest), spec.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return job
}

const tensorflowJob = `
apiVersion: trainstep.dev/v1alpha1
kind: TrainJob
metadata: {name: tf, namespace: ns}
spec:
  framework: tensorflow
  replicaSpecs:
    Worker:
      replicas: 2
      template: {spec: {containers: [{name: tensorflow, image: busybox}]}}
`

const mpiTrainJob = `
apiVersion: trainstep.dev/v1alpha1
kind: TrainJob
metadata: {name: mpi, namespace: ns}
spec:
  framework: mpi
  replicaSpecs:
    Launcher:
      replicas: 1
      template: {spec: {containers: [{name: mpi, image: busybox}]}}
    Worker:
      replicas: 2
      template: {spec: {containers: [{name: mpi, image: busybox}]}}
`

const pytorchGangJob = `
apiVersion: trainstep.dev/v1alpha1
kind: TrainJob
metadata: {name: pt, namespace: ns}
spec:
  framework: pytorch
  runPolicy: {schedulingPolicy: {gang: scheduler-plugins}}
  replicaSpecs:
    Master:
      replicas: 1
      template: {spec: {containers: [{name: pytorch, image: busybox}]}}
`

// plannedPermissions renders manifest as prepare does for its preflight.
func plannedPermissions(t *testing.T, manifest string) []permission {
	t.Helper()
	job := loadJob(t, manifest)
	renderer, err := render.NewRenderer(job, render.Identity{Namespace: "ns", JobName: job.Name})
	if err != nil {
		t.Fatal(err)
	}
	planned, err := renderer.SharedObjects(plannedInputs(job))
	if err != nil {
		t.Fatal(err)
	}
	return requiredPermissions(planned, true, false)
}

func TestRequiredPermissionsFollowTheRenderedObjects(t *testing.T) {
	cases := []struct {
		name      string
		manifest  string
		want, not []string
	}{
		{"tensorflow writes its cluster ConfigMap", tensorflowJob,
			[]string{"create configmaps", "watch configmaps", "delete configmaps", "create pods", "get pods/log", "create services", "create events", "update leases.coordination.k8s.io"},
			[]string{"create secrets", "create podgroups.scheduling.x-k8s.io"}},
		{"mpi writes its hostfile and SSH Secret", mpiTrainJob,
			[]string{"create configmaps", "create secrets", "get secrets", "delete secrets", "patch secrets"},
			[]string{"create podgroups.scheduling.x-k8s.io"}},
		{"a scheduler-plugins gang writes its PodGroup", pytorchGangJob,
			[]string{"create podgroups.scheduling.x-k8s.io", "delete podgroups.scheduling.x-k8s.io"},
			[]string{"create configmaps", "create secrets", "get podgroups.scheduling.x-k8s.io"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := map[string]bool{}
			for _, p := range plannedPermissions(t, tc.manifest) {
				got[p.String()] = true
			}
			for _, w := range tc.want {
				if !got[w] {
					t.Errorf("missing %q in %v", w, got)
				}
			}
			for _, n := range tc.not {
				if got[n] {
					t.Errorf("asks for %q, which the job never uses", n)
				}
			}
		})
	}
}

// TestPreflightOfATensorFlowJobNamesTheMissingConfigMapVerb: a Role that
// grants all but configmaps ends the run Invalid before anything is
// created, naming the verb and resource, whether the authorizer lists its
// rules or only answers access reviews.
func TestPreflightOfATensorFlowJobNamesTheMissingConfigMapVerb(t *testing.T) {
	grantsAllButConfigMaps := func(verb, group, resource string) bool { return resource != "configmaps" }
	for _, incomplete := range []bool{false, true} {
		client := fake.NewClientset()
		reviews := 0
		client.PrependReactor("create", "selfsubjectrulesreviews", func(k8stesting.Action) (bool, runtime.Object, error) {
			status := authorizationv1.SubjectRulesReviewStatus{Incomplete: incomplete}
			if !incomplete {
				status.ResourceRules = []authorizationv1.ResourceRule{
					{Verbs: []string{"*"}, APIGroups: []string{""}, Resources: []string{"pods", "pods/log", "services", "secrets", "events"}},
					{Verbs: []string{"*"}, APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}},
				}
			}
			return true, &authorizationv1.SelfSubjectRulesReview{Status: status}, nil
		})
		client.PrependReactor("create", "selfsubjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
			reviews++
			attrs := a.(k8stesting.CreateAction).GetObject().(*authorizationv1.SelfSubjectAccessReview).Spec.ResourceAttributes
			allowed := grantsAllButConfigMaps(attrs.Verb, attrs.Group, attrs.Resource)
			return true, &authorizationv1.SelfSubjectAccessReview{Status: authorizationv1.SubjectAccessReviewStatus{Allowed: allowed}}, nil
		})
		conn := &connection{authorization: client.AuthorizationV1(), namespace: "ns"}

		err := conn.preflight(context.Background(), time.Second, plannedPermissions(t, tensorflowJob))

		if result.PhaseOf(err).ExitCode() != result.ExitInvalid {
			t.Fatalf("incomplete rules %v: err %v, want Invalid (exit 11)", incomplete, err)
		}
		for _, verb := range []string{"create", "list", "watch", "delete", "patch"} {
			if !strings.Contains(err.Error(), "cannot "+verb+" configmaps") {
				t.Errorf("incomplete rules %v: %q does not name %q", incomplete, err, verb+" configmaps")
			}
		}
		if strings.Contains(err.Error(), "pods") || strings.Contains(err.Error(), "leases") {
			t.Errorf("incomplete rules %v: %q names a granted permission", incomplete, err)
		}
		if incomplete && reviews == 0 {
			t.Errorf("incomplete rules: no access review was asked")
		}
		for _, a := range client.Actions() {
			if a.GetVerb() == "create" && a.GetResource().Group != "authorization.k8s.io" {
				t.Errorf("the preflight created %s", a.GetResource())
			}
		}
	}
}

// shippedRules are the rules of deploy/'s Roles, as a SelfSubjectRulesReview
// reports them: the default Role, and with secrets deploy/secrets/ too.
func shippedRules(t *testing.T, secrets bool) []authorizationv1.ResourceRule {
	t.Helper()
	files := []string{"../deploy/role.yaml"}
	if secrets {
		files = append(files, "../deploy/secrets/role.yaml")
	}
	var rules []authorizationv1.ResourceRule
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var role rbacv1.Role
		if err := yaml.UnmarshalStrict(data, &role); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, r := range role.Rules {
			rules = append(rules, authorizationv1.ResourceRule{Verbs: r.Verbs, APIGroups: r.APIGroups, Resources: r.Resources, ResourceNames: r.ResourceNames})
		}
	}
	return rules
}

// connectionWithRules is a connection whose API server reports rules.
func connectionWithRules(rules []authorizationv1.ResourceRule) *connection {
	client := fake.NewClientset()
	client.PrependReactor("create", "selfsubjectrulesreviews", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, &authorizationv1.SelfSubjectRulesReview{Status: authorizationv1.SubjectRulesReviewStatus{ResourceRules: rules}}, nil
	})
	return &connection{authorization: client.AuthorizationV1(), namespace: "ns"}
}

// The default Role grants no Secrets: a namespace that installs only it
// keeps its Secrets from the step. What a job that keeps a Secret then
// needs is decided by the preflight: an MPI job (its SSH key) is Invalid
// naming the verbs and deploy/secrets/; the progress endpoint is left out
// (its permissions come back denied) and the job runs. With deploy/secrets/
// both are granted.
func TestPreflightWithTheShippedRoles(t *testing.T) {
	for _, p := range []permission{{verb: "get", resource: "secrets"}, {verb: "list", resource: "secrets"}} {
		if allowedByRules(shippedRules(t, false), p) {
			t.Errorf("deploy/role.yaml grants %s: the default Role must keep the namespace's Secrets from the step", p)
		}
	}
	cases := []struct {
		name     string
		manifest string
		secrets  bool
		// invalid: the run ends Invalid naming these; else endpointDenied
		// says whether the endpoint's permissions come back denied.
		invalid        []string
		endpointDenied bool
	}{
		{"tensorflow, default Role", tensorflowJob, false, nil, true},
		{"pytorch, default Role", pytorchGangJob, false, nil, true},
		{"mpi, default Role", mpiTrainJob, false, []string{"cannot create secrets", "cannot get secrets", "cannot delete secrets", "cannot patch secrets", "granted by " + secretsRoleFile}, true},
		{"tensorflow, with deploy/secrets/", tensorflowJob, true, nil, false},
		{"mpi, with deploy/secrets/", mpiTrainJob, true, nil, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			conn := connectionWithRules(shippedRules(t, tc.secrets))
			required := append(plannedPermissions(t, tc.manifest), networkPolicyPermissions()...)
			endpointDenied, err := conn.checkPermissions(context.Background(), time.Second, required, trainerStatusPermissions())
			if tc.invalid != nil {
				if result.PhaseOf(err).ExitCode() != result.ExitInvalid {
					t.Fatalf("err %v, want Invalid (exit 11)", err)
				}
				for _, want := range tc.invalid {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("%q does not name %q", err, want)
					}
				}
				if strings.Contains(err.Error(), defaultRoleFile) {
					t.Errorf("%q names %s, whose rights are all granted", err, defaultRoleFile)
				}
				return
			}
			if err != nil {
				t.Fatalf("err %v, want the job to run", err)
			}
			if got := len(endpointDenied) > 0; got != tc.endpointDenied {
				t.Errorf("the endpoint's denied permissions %v, want denied %v", endpointDenied, tc.endpointDenied)
			}
		})
	}
}

// TestMissingPermissionsNamesTheFileThatGrantsEach: a denied permission is
// named with the deploy/ file whose Role grants it, in the order asked.
func TestMissingPermissionsNamesTheFileThatGrantsEach(t *testing.T) {
	err := missingPermissions("team-a", []permission{
		{verb: "create", resource: "pods"},
		{verb: "create", resource: "secrets"},
		{verb: "get", resource: "pods", subresource: "log"},
		{verb: "get", resource: "secrets"},
	})
	want := `missing permission in namespace "team-a": cannot create pods, cannot get pods/log (granted by deploy/role.yaml); ` +
		`cannot create secrets, cannot get secrets (granted by deploy/secrets/role.yaml)`
	if err == nil || err.Error() != want {
		t.Errorf("got %v\nwant %s", err, want)
	}
	if result.PhaseOf(err).ExitCode() != result.ExitInvalid {
		t.Errorf("phase %s, want Invalid", result.PhaseOf(err))
	}
	if missingPermissions("team-a", nil) != nil {
		t.Error("no denied permission is an error")
	}
}

// TestADeniedProgressEndpointLeavesItOut: with the endpoint's permissions
// denied, the run prepares no endpoint the replicas would be told of (no
// port in the identity, no material for a Secret), and still reads
// statuses from the leaders' log lines.
func TestADeniedProgressEndpointLeavesItOut(t *testing.T) {
	job := loadJob(t, tensorflowJob)
	cfg := &Config{TrainerStatus: true, OwnerPod: "step", OwnerUID: "uid", TrainerStatusAddress: "127.0.0.1:0", Logger: zap.NewNop()}
	id := render.Identity{Namespace: "ns", JobName: job.Name}
	var in render.Inputs
	e, err := prepareTrainerStatus(context.Background(), cfg, &connection{namespace: "ns"}, job, []permission{{verb: "create", resource: "secrets"}}, &id, &in)
	if err != nil {
		t.Fatal(err)
	}
	if e == nil || e.listener != nil {
		t.Fatalf("endpoint %+v: want one that listens on nothing", e)
	}
	if id.TrainerStatus != nil || in.TrainerStatus != nil {
		t.Errorf("the replicas would be told of an endpoint: identity %+v, inputs %+v", id.TrainerStatus, in.TrainerStatus)
	}
}

// TestMayWatchNodesAsksOnlyWhenTheRulesCouldGrantIt: rules without nodes
// (complete) answer no with no request; rules with them (a RoleBinding's
// may not grant them) or incomplete rules leave it to access reviews.
func TestMayWatchNodesAsksOnlyWhenTheRulesCouldGrantIt(t *testing.T) {
	podRules := []authorizationv1.ResourceRule{{Verbs: []string{"*"}, APIGroups: []string{""}, Resources: []string{"pods"}}}
	nodeRules := append(podRules, authorizationv1.ResourceRule{Verbs: []string{"get", "list", "watch"}, APIGroups: []string{""}, Resources: []string{"nodes"}})
	tests := []struct {
		name       string
		rules      *authorizationv1.SubjectRulesReviewStatus
		reviewSays bool
		want       bool
		reviews    int
	}{
		{"no nodes in complete rules", &authorizationv1.SubjectRulesReviewStatus{ResourceRules: podRules}, true, false, 0},
		{"get alone in complete rules", &authorizationv1.SubjectRulesReviewStatus{ResourceRules: append(podRules,
			authorizationv1.ResourceRule{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"nodes"}})}, true, false, 0},
		{"nodes in the rules, granted", &authorizationv1.SubjectRulesReviewStatus{ResourceRules: nodeRules}, true, true, 3},
		{"nodes in the rules, by a RoleBinding", &authorizationv1.SubjectRulesReviewStatus{ResourceRules: nodeRules}, false, false, 1},
		{"incomplete rules", &authorizationv1.SubjectRulesReviewStatus{Incomplete: true}, true, true, 3},
		{"no rules read", nil, false, false, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			client := fake.NewClientset()
			reviews := 0
			client.PrependReactor("create", "selfsubjectaccessreviews", func(k8stesting.Action) (bool, runtime.Object, error) {
				reviews++
				return true, &authorizationv1.SelfSubjectAccessReview{Status: authorizationv1.SubjectAccessReviewStatus{Allowed: tc.reviewSays}}, nil
			})
			conn := &connection{authorization: client.AuthorizationV1(), namespace: "ns", rules: tc.rules}
			if got := conn.mayWatchNodes(context.Background()); got != tc.want || reviews != tc.reviews {
				t.Errorf("mayWatchNodes = %v after %d access reviews, want %v after %d", got, reviews, tc.want, tc.reviews)
			}
		})
	}
}
