package executor

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/trainstep/trainstep/pkg/result"
)

// ownerOf builds the owner reference every child carries, and the object
// events are recorded on, from the owner flags. The Workflow, when given,
// owns the job's objects: it outlives a step pod that is drained, evicted
// or OOM-killed, so Argo's retry finds the replicas and re-attaches. The
// step pod owns them otherwise (a run by hand that names one), and events
// are recorded on the step pod whenever it is known, where they were
// before. Both live in the step's namespace, and an owner reference cannot
// cross namespaces.
func ownerOf(cfg *Config, jobNamespace string) (*metav1.OwnerReference, runtime.Object, error) {
	if (cfg.OwnerPod == "") != (cfg.OwnerUID == "") {
		return nil, nil, result.Invalidf("--owner-pod and --owner-uid go together (got pod %q, uid %q)", cfg.OwnerPod, cfg.OwnerUID)
	}
	if (cfg.OwnerWorkflow == "") != (cfg.OwnerWorkflowUID == "") {
		return nil, nil, result.Invalidf("--owner-workflow and --owner-workflow-uid go together (got %q, uid %q)", cfg.OwnerWorkflow, cfg.OwnerWorkflowUID)
	}
	if cfg.OwnerWorkflowUID != "" && cfg.WorkflowUID != "" && cfg.OwnerWorkflowUID != cfg.WorkflowUID {
		return nil, nil, result.Invalidf("--owner-workflow-uid %s is not the step's workflow, --workflow-uid %s", cfg.OwnerWorkflowUID, cfg.WorkflowUID)
	}
	var owner, events *metav1.OwnerReference
	if cfg.OwnerPod != "" {
		owner = &metav1.OwnerReference{APIVersion: "v1", Kind: "Pod", Name: cfg.OwnerPod, UID: types.UID(cfg.OwnerUID)}
		events = owner
	}
	if cfg.OwnerWorkflow != "" {
		owner = &metav1.OwnerReference{APIVersion: "argoproj.io/v1alpha1", Kind: "Workflow", Name: cfg.OwnerWorkflow, UID: types.UID(cfg.OwnerWorkflowUID)}
		if events == nil {
			events = owner
		}
	}
	if owner == nil {
		return nil, nil, nil
	}
	ownerNamespace := firstNonEmpty(cfg.PodNamespace, jobNamespace)
	if ownerNamespace != jobNamespace {
		return nil, nil, result.Invalidf("the owner %s %s is in namespace %q but the job runs in %q: an owner reference cannot cross namespaces",
			owner.Kind, owner.Name, ownerNamespace, jobNamespace)
	}
	controller := true
	owner.Controller = &controller
	event := &corev1.ObjectReference{APIVersion: events.APIVersion, Kind: events.Kind, Name: events.Name, Namespace: ownerNamespace, UID: events.UID}
	return owner, event, nil
}
