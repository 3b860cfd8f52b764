package testutil

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// AdmissionPolicyFile is the shipped ValidatingAdmissionPolicy and its binding, below the
// repository root.
const AdmissionPolicyFile = "deploy/admission/validatingadmissionpolicy.yaml"

// AdmissionPolicy reads the shipped ValidatingAdmissionPolicy and its binding below root. With
// a namespace, both are named after it and the binding matches that namespace alone, so that
// tests sharing a cluster are not held to it; without, they are as shipped, for every namespace.
func AdmissionPolicy(root, namespace string) (*admissionv1.ValidatingAdmissionPolicy, *admissionv1.ValidatingAdmissionPolicyBinding, error) {
	data, err := os.ReadFile(filepath.Join(root, AdmissionPolicyFile))
	if err != nil {
		return nil, nil, err
	}
	docs := strings.Split(string(data), "\n---\n")
	if len(docs) != 2 {
		return nil, nil, fmt.Errorf("%s holds %d documents, want the policy and its binding", AdmissionPolicyFile, len(docs))
	}
	policy := &admissionv1.ValidatingAdmissionPolicy{}
	binding := &admissionv1.ValidatingAdmissionPolicyBinding{}
	if err := yaml.UnmarshalStrict([]byte(docs[0]), policy); err != nil {
		return nil, nil, fmt.Errorf("%s: the policy: %w", AdmissionPolicyFile, err)
	}
	if err := yaml.UnmarshalStrict([]byte(docs[1]), binding); err != nil {
		return nil, nil, fmt.Errorf("%s: the binding: %w", AdmissionPolicyFile, err)
	}
	if namespace != "" {
		policy.Name += "-" + namespace
		binding.Name, binding.Spec.PolicyName = policy.Name, policy.Name
		binding.Spec.MatchResources = &admissionv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
			MatchLabels: map[string]string{"kubernetes.io/metadata.name": namespace}}}
	}
	return policy, binding, nil
}
