package testutil

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"
)

// AdmissionPolicyFile holds the shipped ValidatingAdmissionPolicies for the step's
// ServiceAccount and their bindings, below the repository root.
const AdmissionPolicyFile = "deploy/admission/validatingadmissionpolicy.yaml"

// WorkflowsPolicyFile holds the shipped ValidatingAdmissionPolicy for Workflows under
// templateReferencing: Strict and its binding, below the repository root.
const WorkflowsPolicyFile = "deploy/admission/workflows.yaml"

// AdmissionPolicies are shipped ValidatingAdmissionPolicies and their bindings.
type AdmissionPolicies struct {
	Policies []*admissionv1.ValidatingAdmissionPolicy
	Bindings []*admissionv1.ValidatingAdmissionPolicyBinding
}

// ReadAdmissionPolicies reads AdmissionPolicyFile below root. With a namespace, every policy
// and binding is named after it and every binding matches that namespace alone, so that
// tests sharing a cluster are not held to them; without, they are as shipped, for every
// namespace.
func ReadAdmissionPolicies(root, namespace string) (*AdmissionPolicies, error) {
	out, err := ReadPolicyFile(root, AdmissionPolicyFile)
	if err != nil {
		return nil, err
	}
	if namespace != "" {
		out.ScopeTo(namespace)
	}
	return out, nil
}

// ReadPolicyFile reads the policies and bindings of file below root, as shipped.
func ReadPolicyFile(root, file string) (*AdmissionPolicies, error) {
	data, err := os.ReadFile(filepath.Join(root, file))
	if err != nil {
		return nil, err
	}
	out := &AdmissionPolicies{}
	for i, doc := range strings.Split(string(data), "\n---\n") {
		var meta metav1.TypeMeta
		if err := yaml.Unmarshal([]byte(doc), &meta); err != nil {
			return nil, fmt.Errorf("%s (document %d): %w", file, i+1, err)
		}
		var into any
		switch meta.Kind {
		case "ValidatingAdmissionPolicy":
			p := &admissionv1.ValidatingAdmissionPolicy{}
			out.Policies, into = append(out.Policies, p), p
		case "ValidatingAdmissionPolicyBinding":
			b := &admissionv1.ValidatingAdmissionPolicyBinding{}
			out.Bindings, into = append(out.Bindings, b), b
		default:
			return nil, fmt.Errorf("%s (document %d): kind %q", file, i+1, meta.Kind)
		}
		if err := yaml.UnmarshalStrict([]byte(doc), into); err != nil {
			return nil, fmt.Errorf("%s (document %d): %w", file, i+1, err)
		}
	}
	if len(out.Policies) == 0 || len(out.Policies) != len(out.Bindings) {
		return nil, fmt.Errorf("%s holds %d policies and %d bindings, want one binding per policy", file, len(out.Policies), len(out.Bindings))
	}
	return out, nil
}

// ScopeTo names every policy and binding after namespace and has every binding
// match that namespace alone, so that tests sharing a cluster are not held to them.
func (a *AdmissionPolicies) ScopeTo(namespace string) {
	for _, p := range a.Policies {
		p.Name += "-" + namespace
	}
	for _, b := range a.Bindings {
		b.Name += "-" + namespace
		b.Spec.PolicyName += "-" + namespace
		b.Spec.MatchResources = &admissionv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
			MatchLabels: map[string]string{"kubernetes.io/metadata.name": namespace}}}
	}
}

// Apply creates every policy and binding, as `kubectl apply -f` of the file does.
func (a *AdmissionPolicies) Apply(ctx context.Context, client kubernetes.Interface) error {
	admission := client.AdmissionregistrationV1()
	for _, p := range a.Policies {
		if _, err := admission.ValidatingAdmissionPolicies().Create(ctx, p, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating ValidatingAdmissionPolicy %s: %w", p.Name, err)
		}
	}
	for _, b := range a.Bindings {
		if _, err := admission.ValidatingAdmissionPolicyBindings().Create(ctx, b, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating ValidatingAdmissionPolicyBinding %s: %w", b.Name, err)
		}
	}
	return nil
}

// Delete removes every binding and policy Apply created, as far as it can.
func (a *AdmissionPolicies) Delete(ctx context.Context, client kubernetes.Interface) {
	admission := client.AdmissionregistrationV1()
	for _, b := range a.Bindings {
		_ = admission.ValidatingAdmissionPolicyBindings().Delete(ctx, b.Name, metav1.DeleteOptions{})
	}
	for _, p := range a.Policies {
		_ = admission.ValidatingAdmissionPolicies().Delete(ctx, p.Name, metav1.DeleteOptions{})
	}
}
