package executor

import (
	"context"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

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
			[]string{"create configmaps", "create secrets", "get secrets", "watch secrets"},
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
