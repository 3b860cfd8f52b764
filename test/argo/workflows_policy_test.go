package argo_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/trainstep/trainstep/internal/testutil"
	"github.com/trainstep/trainstep/test/cluster"
)

// applyWorkflowsPolicy creates deploy/admission/workflows.yaml's policy and
// binding as shipped, but named after ns and bound to ns only.
func applyWorkflowsPolicy(t *testing.T, c *cluster.Cluster, ns string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot(t), "deploy", "admission", "workflows.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	decoder := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var policy admissionv1.ValidatingAdmissionPolicy
	var binding admissionv1.ValidatingAdmissionPolicyBinding
	if err := decoder.Decode(&policy); err != nil {
		t.Fatalf("reading the policy: %v", err)
	}
	if err := decoder.Decode(&binding); err != nil {
		t.Fatalf("reading the binding: %v", err)
	}
	if got := binding.Spec.MatchResources.NamespaceSelector.MatchLabels; got["trainstep.dev/workflows-by-reference"] != "true" {
		t.Fatalf("the shipped binding selects namespaces by %v, the docs say trainstep.dev/workflows-by-reference=true", got)
	}
	policy.Name = "trainstep-workflows-" + ns
	binding.Name, binding.Spec.PolicyName = policy.Name, policy.Name
	binding.Spec.MatchResources.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	admission := c.Client.AdmissionregistrationV1()
	if _, err := admission.ValidatingAdmissionPolicies().Create(ctx, &policy, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating the ValidatingAdmissionPolicy: %v", err)
	}
	if _, err := admission.ValidatingAdmissionPolicyBindings().Create(ctx, &binding, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating the binding: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = admission.ValidatingAdmissionPolicyBindings().Delete(ctx, binding.Name, metav1.DeleteOptions{})
		_ = admission.ValidatingAdmissionPolicies().Delete(ctx, policy.Name, metav1.DeleteOptions{})
	})
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
	applyWorkflowsPolicy(t, c, ns)
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
		return err != nil && strings.Contains(err.Error(), "trainstep-workflows-"+ns)
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
