package cluster

import (
	"context"
	"fmt"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// kwokUser is the identity kwok acts as (its client certificate's common name).
const kwokUser = "kwok"

// kwokDeleteGuard names the admission policy that lets kwok delete only pods
// already being deleted.
const kwokDeleteGuard = "trainstep-kwok-deletes-only-terminating-pods"

// installKWOKDeleteGuard makes kwok delete pods as a kubelet does. kwok
// finishes a graceful deletion by deleting the pod by name, without a UID
// precondition, and it sometimes does so twice; the second delete then hits
// a replacement created under the same name in between — a replica removed
// by the fake node that no real kubelet would remove. This policy refuses
// kwok's delete of a pod that is not being deleted.
func (c *Cluster) installKWOKDeleteGuard(ctx context.Context) error {
	fail := admissionregistrationv1.Fail
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: kwokDeleteGuard},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: &fail,
			MatchConstraints: &admissionregistrationv1.MatchResources{
				ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
					RuleWithOperations: admissionregistrationv1.RuleWithOperations{
						Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Delete},
						Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}},
					},
				}},
			},
			MatchConditions: []admissionregistrationv1.MatchCondition{{
				Name: "kwok", Expression: fmt.Sprintf("request.userInfo.username == %q", kwokUser),
			}},
			Validations: []admissionregistrationv1.Validation{{
				Expression: "has(oldObject.metadata.deletionTimestamp)",
				Message:    "the fake node deletes only pods already being deleted, as a kubelet does",
			}},
		},
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: kwokDeleteGuard},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        kwokDeleteGuard,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
		},
	}
	api := c.Client.AdmissionregistrationV1()
	if _, err := api.ValidatingAdmissionPolicies().Create(ctx, policy, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating the kwok delete guard policy: %w", err)
	}
	if _, err := api.ValidatingAdmissionPolicyBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating the kwok delete guard binding: %w", err)
	}
	return nil
}
