package argo_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/trainstep/trainstep/test/cluster"
)

// serviceAccountName is the identity templates/ run steps as and deploy/ creates.
const serviceAccountName = "trainstep"

// applyDeploy creates every object deploy/kustomization.yaml lists in ns,
// as they are in the files: what `kubectl apply -k deploy/ -n ns` does; then
// the same for each of additions, directories of deploy/ (`kubectl apply -k
// deploy/secrets/ -n ns`).
func applyDeploy(t *testing.T, c *cluster.Cluster, ns string, additions ...string) {
	t.Helper()
	applyKustomization(t, c, ns, "deploy")
	for _, a := range additions {
		applyKustomization(t, c, ns, filepath.Join("deploy", a))
	}
}

// applyKustomization creates the objects the kustomization.yaml of dir
// (relative to the repository) lists, in ns.
func applyKustomization(t *testing.T, c *cluster.Cluster, ns, dir string) {
	t.Helper()
	dir = filepath.Join(repoRoot(t), dir)
	var kust kustomization
	readYAML(t, filepath.Join(dir, "kustomization.yaml"), &kust, true)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, file := range kust.Resources {
		path := filepath.Join(dir, file)
		var meta metav1.TypeMeta
		readYAML(t, path, &meta, false)
		var err error
		switch meta.Kind {
		case "ServiceAccount":
			var sa corev1.ServiceAccount
			readYAML(t, path, &sa, true)
			_, err = c.Client.CoreV1().ServiceAccounts(ns).Create(ctx, &sa, metav1.CreateOptions{})
		case "Role":
			var role rbacv1.Role
			readYAML(t, path, &role, true)
			_, err = c.Client.RbacV1().Roles(ns).Create(ctx, &role, metav1.CreateOptions{})
		case "RoleBinding":
			var binding rbacv1.RoleBinding
			readYAML(t, path, &binding, true)
			_, err = c.Client.RbacV1().RoleBindings(ns).Create(ctx, &binding, metav1.CreateOptions{})
		case "ConfigMap":
			var cm corev1.ConfigMap
			readYAML(t, path, &cm, true)
			_, err = c.Client.CoreV1().ConfigMaps(ns).Create(ctx, &cm, metav1.CreateOptions{})
		default:
			t.Fatalf("%s: kind %q: teach applyKustomization to create it", path, meta.Kind)
		}
		if err != nil {
			t.Fatalf("applying %s: %v", path, err)
		}
	}
}

// readYAML decodes a YAML file into obj; strict rejects unknown fields.
func readYAML(t *testing.T, path string, obj any, strict bool) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if strict {
		err = yaml.UnmarshalStrict(data, obj)
	} else {
		err = yaml.Unmarshal(data, obj)
	}
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// access is one request a step makes of the API server.
type access struct {
	group, resource, subresource, verb string
}

// secretsNeeds is what an MPI job's step, or one serving the progress
// endpoint, does with Secrets, all by name: only deploy/secrets/ grants it.
var secretsNeeds = func() []access {
	var out []access
	for _, v := range []string{"create", "get", "delete", "patch"} {
		out = append(out, access{"", "secrets", "", v})
	}
	return out
}()

// stepNeeds is every request a trainstep step makes in its namespace but
// those on Secrets (secretsNeeds), by who makes it: trainstep itself
// (replicas, their services, the MPI hostfile, events on the step pod,
// re-attaching after a retry, the job's NetworkPolicy, gang PodGroups) and
// Argo's wait container in the same pod (the WorkflowTaskResult that
// carries the output parameters to the DAG).
var stepNeeds = func() []access {
	var out []access
	add := func(group, resource, subresource string, verbs ...string) {
		for _, v := range verbs {
			out = append(out, access{group, resource, subresource, v})
		}
	}
	crud := []string{"create", "get", "list", "watch", "delete", "patch"}
	for _, r := range []string{"pods", "services", "configmaps"} {
		add("", r, "", crud...)
	}
	add("", "pods", "log", "get")
	add("", "events", "", "create", "patch")
	add("networking.k8s.io", "networkpolicies", "", "create", "get", "patch", "delete")
	add("scheduling.x-k8s.io", "podgroups", "", crud...)
	add("scheduling.volcano.sh", "podgroups", "", crud...)
	add("argoproj.io", "workflowtaskresults", "", "create", "patch")
	return out
}()

// canI asks the API server, as the client's identity, whether it may do a
// in namespace ns (empty: cluster-wide).
func canI(t *testing.T, client kubernetes.Interface, ns string, a access) bool {
	t.Helper()
	review, err := client.AuthorizationV1().SelfSubjectAccessReviews().Create(context.Background(), &authorizationv1.SelfSubjectAccessReview{
		Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
			Namespace: ns, Group: a.group, Resource: a.resource, Subresource: a.subresource, Verb: a.verb,
		}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("SelfSubjectAccessReview %+v: %v", a, err)
	}
	return review.Status.Allowed
}

// checkStepAccess proves, as the deployed ServiceAccount (with deploy/secrets/
// applied), that it may do everything a step does in ns, and nothing outside ns.
func checkStepAccess(t *testing.T, client kubernetes.Interface, ns string) {
	t.Helper()
	for _, a := range append(slices.Clone(stepNeeds), secretsNeeds...) {
		if !canI(t, client, ns, a) {
			t.Errorf("the %s ServiceAccount cannot %s %s/%s %s in its namespace", serviceAccountName, a.verb, a.group, a.resource, a.subresource)
		}
	}
	denied := []struct {
		ns string
		a  access
	}{
		{"default", access{"", "pods", "", "create"}},
		{"kube-system", access{"", "secrets", "", "get"}},
		{"", access{"", "nodes", "", "list"}},
		{"", access{"", "namespaces", "", "get"}},
		{ns, access{"argoproj.io", "workflows", "", "delete"}},
		{ns, access{"rbac.authorization.k8s.io", "roles", "", "create"}},
	}
	for _, d := range denied {
		if canI(t, client, d.ns, d.a) {
			t.Errorf("the %s ServiceAccount may %s %s/%s in %q: the Role grants more than a step needs", serviceAccountName, d.a.verb, d.a.group, d.a.resource, d.ns)
		}
	}
}

// TestDeployLetsEveryStepReportItsOutputs applies deploy/ and checks, as the
// trainstep-executor ServiceAccount (the identity the examples give their other steps,
// such as preprocess and evaluate), that it may write the WorkflowTaskResult through which
// Argo's executor hands a step's outputs on, and nothing a trainstep step does; and that
// the namespace's default ServiceAccount, which every pod naming none runs as (replicas
// included), may not: a pod on it could forge the outputs of the workflow's steps.
func TestDeployLetsEveryStepReportItsOutputs(t *testing.T) {
	t.Parallel()
	c := cluster.Get(t)
	ns := c.Namespace(t)
	applyDeploy(t, c, ns)
	client := kubernetes.NewForConfigOrDie(c.ConfigForToken(c.ServiceAccountToken(t, ns, "trainstep-executor")))
	defaultClient := kubernetes.NewForConfigOrDie(c.ConfigForToken(c.ServiceAccountToken(t, ns, "default")))
	for _, verb := range []string{"create", "patch"} {
		if !canI(t, client, ns, access{"argoproj.io", "workflowtaskresults", "", verb}) {
			t.Errorf("the trainstep-executor ServiceAccount cannot %s workflowtaskresults: the examples' steps cannot hand their outputs on", verb)
		}
		if canI(t, defaultClient, ns, access{"argoproj.io", "workflowtaskresults", "", verb}) {
			t.Errorf("the default ServiceAccount may %s workflowtaskresults: any pod naming no ServiceAccount could forge step outputs", verb)
		}
	}
	for _, a := range stepNeeds {
		if a.resource != "workflowtaskresults" && canI(t, client, ns, a) {
			t.Errorf("the trainstep-executor ServiceAccount may %s %s/%s %s: deploy/ grants it more than Argo's executor needs", a.verb, a.group, a.resource, a.subresource)
		}
	}
	if canI(t, client, "default", access{"argoproj.io", "workflowtaskresults", "", "create"}) {
		t.Errorf("the trainstep-executor ServiceAccount of %s may create workflowtaskresults in namespace default: deploy/ reaches outside its namespace", ns)
	}
}

// TestTheDefaultRoleKeepsTheNamespacesSecrets: deploy/ alone lets the step
// read, list or change none of its namespace's Secrets; deploy/secrets/, the
// addition for MPI jobs and the progress endpoint, grants exactly the verbs
// they use (by name: no list, no watch), still only in its namespace.
func TestTheDefaultRoleKeepsTheNamespacesSecrets(t *testing.T) {
	t.Parallel()
	c := cluster.Get(t)
	ns := c.Namespace(t)
	applyDeploy(t, c, ns)
	step := kubernetes.NewForConfigOrDie(c.ConfigForToken(c.ServiceAccountToken(t, ns, serviceAccountName)))
	for _, a := range secretsNeeds {
		if canI(t, step, ns, a) {
			t.Errorf("with deploy/ alone the %s ServiceAccount may %s secrets", serviceAccountName, a.verb)
		}
	}
	for _, a := range stepNeeds {
		if !canI(t, step, ns, a) {
			t.Errorf("with deploy/ alone the %s ServiceAccount cannot %s %s/%s %s", serviceAccountName, a.verb, a.group, a.resource, a.subresource)
		}
	}

	for _, verb := range []string{"get", "list", "watch"} {
		if canI(t, step, ns, access{"", "secrets", "", verb}) {
			t.Errorf("with deploy/ alone the %s ServiceAccount may %s secrets", serviceAccountName, verb)
		}
	}

	applyKustomization(t, c, ns, "deploy/secrets")
	for _, verb := range []string{"list", "watch"} {
		if canI(t, step, ns, access{"", "secrets", "", verb}) {
			t.Errorf("deploy/secrets/ lets the %s ServiceAccount %s secrets: a step reads its Secrets by name only", serviceAccountName, verb)
		}
	}
	for _, a := range secretsNeeds {
		if !canI(t, step, ns, a) {
			t.Errorf("with deploy/secrets/ the %s ServiceAccount cannot %s secrets", serviceAccountName, a.verb)
		}
		if canI(t, step, "default", a) {
			t.Errorf("deploy/secrets/ lets the %s ServiceAccount %s secrets in namespace default", serviceAccountName, a.verb)
		}
	}
}
