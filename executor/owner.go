package executor

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/trainstep/trainstep/pkg/result"
)

// ownerOf builds the owner reference every child carries, and the object
// events are recorded on, from the owner flags: the step pod, else the
// Workflow, else none. Both live in the step's namespace, and an owner
// reference cannot cross namespaces.
func ownerOf(cfg *Config, jobNamespace string) (*metav1.OwnerReference, runtime.Object, error) {
	var ref metav1.OwnerReference
	switch {
	case cfg.OwnerPod != "" || cfg.OwnerUID != "":
		if cfg.OwnerPod == "" || cfg.OwnerUID == "" {
			return nil, nil, result.Invalidf("--owner-pod and --owner-uid go together (got pod %q, uid %q)", cfg.OwnerPod, cfg.OwnerUID)
		}
		ref = metav1.OwnerReference{APIVersion: "v1", Kind: "Pod", Name: cfg.OwnerPod, UID: types.UID(cfg.OwnerUID)}
	case cfg.OwnerWorkflow != "" || cfg.OwnerWorkflowUID != "":
		if cfg.OwnerWorkflow == "" || cfg.OwnerWorkflowUID == "" {
			return nil, nil, result.Invalidf("--owner-workflow and --owner-workflow-uid go together (got %q, uid %q)", cfg.OwnerWorkflow, cfg.OwnerWorkflowUID)
		}
		ref = metav1.OwnerReference{APIVersion: "argoproj.io/v1alpha1", Kind: "Workflow", Name: cfg.OwnerWorkflow, UID: types.UID(cfg.OwnerWorkflowUID)}
	default:
		return nil, nil, nil
	}
	ownerNamespace := firstNonEmpty(cfg.PodNamespace, jobNamespace)
	if ownerNamespace != jobNamespace {
		return nil, nil, result.Invalidf("the owner %s %s is in namespace %q but the job runs in %q: an owner reference cannot cross namespaces",
			ref.Kind, ref.Name, ownerNamespace, jobNamespace)
	}
	controller := true
	ref.Controller = &controller
	var event runtime.Object = &corev1.ObjectReference{APIVersion: ref.APIVersion, Kind: ref.Kind, Name: ref.Name, Namespace: ownerNamespace, UID: ref.UID}
	if ref.Kind == "" {
		return nil, nil, fmt.Errorf("building the owner reference: no kind")
	}
	return &ref, event, nil
}
