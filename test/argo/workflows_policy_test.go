package argo_test

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/trainstep/trainstep/internal/testutil"
	"github.com/trainstep/trainstep/test/cluster"
)

// applyWorkflowsPolicy creates deploy/admission/workflows.yaml's policy and
// binding as shipped, but named after ns and bound to ns only, and returns
// the policy's name.
func applyWorkflowsPolicy(t *testing.T, c *cluster.Cluster, ns string) string {
	t.Helper()
	policies, err := testutil.ReadPolicyFile(repoRoot(t), testutil.WorkflowsPolicyFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range policies.Bindings {
		if got := b.Spec.MatchResources.NamespaceSelector.MatchLabels; got["trainstep.dev/workflows-by-reference"] != "true" {
			t.Fatalf("the shipped binding %s selects namespaces by %v, the docs say trainstep.dev/workflows-by-reference=true", b.Name, got)
		}
	}
	policies.ScopeTo(ns)
	applyPolicies(t, c, policies)
	return policies.Policies[0].Name
}

// Under templateReferencing: Strict, Argo still merges a Workflow's own
// spec over the referenced template's. The shipped policy admits a
// Workflow that references a template and passes it parameters, and
// refuses each field that would reach the step pod: a podSpecPatch that
// swaps the step's image, templateDefaults, podMetadata, a
// ServiceAccount, inline templates, and artifact arguments that name a
// Secret. Argo's own updates, which leave the spec alone, still pass.
func TestWorkflowsPolicyAdmitsOnlyTemplateReferences(t *testing.T) {
	c := cluster.Get(t)
	ns := c.Namespace(t)
	c.InstallArgoCRDs(t)
	policy := applyWorkflowsPolicy(t, c, ns)
	workflows := c.Dynamic().Resource(cluster.WorkflowResource).Namespace(ns)
	ctx := context.Background()
	workflow := func(name, spec string) *unstructured.Unstructured {
		t.Helper()
		obj := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte("apiVersion: argoproj.io/v1alpha1\nkind: Workflow\nmetadata: {name: "+name+"}\nspec:\n"+spec), &obj.Object); err != nil {
			t.Fatal(err)
		}
		return obj
	}
	const byReference = `  workflowTemplateRef: {name: trainstep}
  arguments: {parameters: [{name: job, value: "kind: TrainJob"}, {name: set, value: spec.replicaSpecs.Worker.replicas=4}]}
  ttlStrategy: {secondsAfterCompletion: 60}
`
	// The policy is enforced once the API server's cache holds it.
	testutil.Eventually(t, time.Minute, "the policy to refuse an inline template", func() bool {
		_, err := workflows.Create(ctx, workflow("probe", "  templates: [{name: x, container: {image: busybox}}]\n  entrypoint: x\n"), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err != nil && strings.Contains(err.Error(), policy)
	})
	admitted, err := workflows.Create(ctx, workflow("by-reference", byReference), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("a Workflow by reference was refused: %v", err)
	}
	for _, tc := range []struct{ name, spec, refusal string }{
		{"podspecpatch", byReference + "  podSpecPatch: '{\"containers\":[{\"name\":\"main\",\"image\":\"evil\"}]}'\n", "spec.podSpecPatch is not allowed"},
		{"templatedefaults", byReference + "  templateDefaults: {container: {image: evil}}\n", "spec.templateDefaults is not allowed"},
		{"podmetadata", byReference + "  podMetadata: {labels: {trainstep.dev/trainer-status: x}}\n", "spec.podMetadata is not allowed"},
		{"serviceaccount", byReference + "  serviceAccountName: trainstep\n", "spec.serviceAccountName is not allowed"},
		{"inline", "  templates: [{name: x, container: {image: busybox}}]\n  entrypoint: x\n", "by reference"},
		{"s3-artifact", "  workflowTemplateRef: {name: trainstep}\n  arguments: {artifacts: [{name: job-file, s3: {key: k, accessKeySecret: {name: team-b-s3, key: id}}}]}\n", "without credentials"},
	} {
		_, err := workflows.Create(ctx, workflow(tc.name, tc.spec), metav1.CreateOptions{})
		if err == nil || !strings.Contains(err.Error(), tc.refusal) {
			t.Errorf("%s: %v, want a refusal saying %q", tc.name, err, tc.refusal)
		}
	}
	if _, err := workflows.Create(ctx, workflow("raw-artifact", "  workflowTemplateRef: {name: trainstep}\n  arguments: {artifacts: [{name: job-file, raw: {data: \"kind: TrainJob\"}}]}\n"), metav1.CreateOptions{}); err != nil {
		t.Errorf("a raw artifact argument was refused: %v", err)
	}
	// What Argo's controller writes: status and labels, the spec as it was.
	admitted.SetLabels(map[string]string{"workflows.argoproj.io/phase": "Running"})
	if err := unstructured.SetNestedField(admitted.Object, "Running", "status", "phase"); err != nil {
		t.Fatal(err)
	}
	if _, err := workflows.Update(ctx, admitted, metav1.UpdateOptions{}); err != nil {
		t.Errorf("an update that leaves the spec alone was refused: %v", err)
	}
}
