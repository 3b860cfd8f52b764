package render

import (
	"fmt"
	"strings"

	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/frameworks"
	"github.com/trainstep/trainstep/pkg/gang"
)

// Guard is a job-wide object that protects the replicas rather than runs
// them (a NetworkPolicy, the PodDisruptionBudget), in the unstructured form
// the controller sends.
type Guard struct {
	Kind     string
	Resource schema.GroupVersionResource
	Object   *unstructured.Unstructured
}

// Key names the guard among the job's.
func (g Guard) Key() string { return g.Kind + "/" + g.Object.GetName() }

// Guards are the job's guards, those rendered, in creation order.
func (o *Objects) Guards() []Guard {
	var out []Guard
	add := func(kind string, gvr schema.GroupVersionResource, obj runtime.Object) {
		content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
		if err != nil {
			panic(fmt.Sprintf("converting the job's %s: %v", kind, err)) // rendered types always convert
		}
		out = append(out, Guard{Kind: kind, Resource: gvr, Object: &unstructured.Unstructured{Object: content}})
	}
	for _, np := range o.NetworkPolicies() {
		add("NetworkPolicy", networkingv1.SchemeGroupVersion.WithResource("networkpolicies"), np)
	}
	if o.DisruptionBudget != nil {
		add("PodDisruptionBudget", policyv1.SchemeGroupVersion.WithResource("poddisruptionbudgets"), o.DisruptionBudget)
	}
	return out
}

// DisruptionBudget renders the job's PodDisruptionBudget, named like the
// job, for a job whose ranks restart as a whole or that is gang-scheduled:
// minAvailable is its ranks, so a drain or an eviction cannot take one rank
// and leave the others blocked in a collective on it (the eviction waits;
// trainstep, warned of the drain, stops every rank at once instead). Nil
// for other jobs, whose replicas restart alone.
func DisruptionBudget(job *v1alpha1.TrainJob, id Identity) *policyv1.PodDisruptionBudget {
	var ranks []string
	total := 0
	gangJob := gang.Kind(job) != v1alpha1.GangNone && gang.Kind(job) != ""
	for _, rt := range frameworks.SortedReplicaTypes(job) {
		if frameworks.RestartsWithJob(job, rt) || gangJob && rt != v1alpha1.ReplicaTypeEvaluator {
			ranks = append(ranks, strings.ToLower(string(rt)))
			total += frameworks.Replicas(job, rt)
		}
	}
	if total == 0 {
		return nil
	}
	selector := &metav1.LabelSelector{MatchLabels: JobLabels(id)}
	if len(ranks) < len(job.Spec.ReplicaSpecs) {
		selector.MatchExpressions = []metav1.LabelSelectorRequirement{{Key: v1alpha1.LabelReplicaType, Operator: metav1.LabelSelectorOpIn, Values: ranks}}
	}
	minAvailable := intstr.FromInt32(int32(total))
	return &policyv1.PodDisruptionBudget{
		TypeMeta:   metav1.TypeMeta{APIVersion: policyv1.SchemeGroupVersion.String(), Kind: "PodDisruptionBudget"},
		ObjectMeta: jobObjectMeta(id, id.JobName, JobLabels(id)),
		Spec:       policyv1.PodDisruptionBudgetSpec{MinAvailable: &minAvailable, Selector: selector},
	}
}
