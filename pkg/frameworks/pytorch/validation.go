package pytorch

import (
	"fmt"
	"strconv"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/frameworks/framework"
)

var rdzvBackends = []v1alpha1.RDZVBackend{v1alpha1.BackendC10D, v1alpha1.BackendETCD, v1alpha1.BackendETCDv2}

// OwnFields implements framework.Framework.
func (Framework) OwnFields(spec *v1alpha1.TrainJobSpec) []framework.OwnField {
	return []framework.OwnField{
		{Path: "nprocPerNode", Set: spec.NprocPerNode != nil},
		{Path: "elasticPolicy", Set: spec.ElasticPolicy != nil},
	}
}

// Validate implements framework.Framework, as Training Operator v1.9's
// webhook (pytorchjob_webhook.go): a Master runs alone, a job of workers
// only has at least one, an elastic job has workers within its bounds.
func (Framework) Validate(job *v1alpha1.TrainJob) field.ErrorList {
	errs := replicaRules(job)
	s := &job.Spec
	spec := field.NewPath("spec")
	if s.NprocPerNode != nil && !validNprocPerNode(*s.NprocPerNode) {
		errs = append(errs, field.Invalid(spec.Child("nprocPerNode"), *s.NprocPerNode, "must be a positive number, auto, cpu or gpu"))
	}
	if s.ElasticPolicy != nil {
		errs = append(errs, validateElasticPolicy(job, spec.Child("elasticPolicy"))...)
	}
	return errs
}

func replicaRules(job *v1alpha1.TrainJob) field.ErrorList {
	specs := job.Spec.ReplicaSpecs
	_, master := specs[v1alpha1.ReplicaTypeMaster]
	_, worker := specs[v1alpha1.ReplicaTypeWorker]
	errs := framework.ExactlyOne(job, v1alpha1.ReplicaTypeMaster, "a pytorch Master runs rank 0; leave it out for a job of workers only")
	if !master && job.Spec.ElasticPolicy == nil {
		errs = append(errs, framework.AtLeastOne(job, v1alpha1.ReplicaTypeWorker, "a pytorch job without a Master runs on its workers")...)
	}
	switch {
	case !worker && job.Spec.ElasticPolicy != nil:
		errs = append(errs, framework.Required(job, v1alpha1.ReplicaTypeWorker, "must be configured if elastic policy is used")...)
	case !worker && !master:
		errs = append(errs, framework.Required(job, v1alpha1.ReplicaTypeWorker, "pytorch needs a Master or Workers")...)
	}
	return errs
}

func validNprocPerNode(v string) bool {
	switch v {
	case "auto", "cpu", "gpu":
		return true
	}
	n, err := strconv.Atoi(v)
	return err == nil && n > 0
}

func validateElasticPolicy(job *v1alpha1.TrainJob, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	ep := job.Spec.ElasticPolicy
	if ep.MinReplicas != nil && *ep.MinReplicas < 1 {
		errs = append(errs, field.Invalid(p.Child("minReplicas"), *ep.MinReplicas, "must be >= 1"))
	}
	if ep.MinReplicas != nil && ep.MaxReplicas != nil && *ep.MinReplicas > *ep.MaxReplicas {
		errs = append(errs, field.Invalid(p.Child("maxReplicas"), *ep.MaxReplicas,
			fmt.Sprintf("must be >= minReplicas (%d)", *ep.MinReplicas)))
	}
	// A count below 0 or over MaxReplicas already has its error.
	if worker := job.Spec.ReplicaSpecs[v1alpha1.ReplicaTypeWorker]; worker != nil && worker.ReplicaCount() >= 0 && worker.ReplicaCount() <= framework.MaxReplicas {
		n := worker.ReplicaCount()
		if (ep.MinReplicas != nil && n < *ep.MinReplicas) || (ep.MaxReplicas != nil && n > *ep.MaxReplicas) {
			errs = append(errs, field.Invalid(framework.ReplicasPath(v1alpha1.ReplicaTypeWorker), n,
				fmt.Sprintf("must be within elasticPolicy's [minReplicas, maxReplicas] = [%s, %s]", int32String(ep.MinReplicas), int32String(ep.MaxReplicas))))
		}
	}
	if ep.RDZVBackend != nil && !contains(rdzvBackends, *ep.RDZVBackend) {
		errs = append(errs, field.NotSupported(p.Child("rdzvBackend"), *ep.RDZVBackend, rdzvBackends))
	}
	if ep.RDZVPort != nil && (*ep.RDZVPort < 1 || *ep.RDZVPort > 65535) {
		errs = append(errs, field.Invalid(p.Child("rdzvPort"), *ep.RDZVPort, "must be between 1 and 65535"))
	}
	if ep.MaxRestarts != nil && *ep.MaxRestarts < 0 {
		errs = append(errs, field.Invalid(p.Child("maxRestarts"), *ep.MaxRestarts, "must be >= 0"))
	}
	for i, m := range ep.Metrics {
		errs = append(errs, validateElasticMetric(m, p.Child("metrics").Index(i))...)
	}
	if len(ep.Metrics) > 0 && ep.GrowIntoCapacity != nil && *ep.GrowIntoCapacity {
		errs = append(errs, field.Forbidden(p.Child("growIntoCapacity"), "not with metrics: the metrics decide how many workers the job has"))
	}
	if ep.NProcPerNode != nil {
		if job.Spec.NprocPerNode != nil {
			// training-operator v1.9 pytorchjob_webhook.go rejects the pair.
			errs = append(errs, field.Forbidden(p.Child("nProcPerNode"), "must not be used with spec.nprocPerNode"))
		} else if *ep.NProcPerNode < 1 {
			errs = append(errs, field.Invalid(p.Child("nProcPerNode"), *ep.NProcPerNode, "must be >= 1"))
		}
	}
	return errs
}

// validateElasticMetric accepts what trainstep evaluates: Resource metrics
// (cpu, memory) with a Utilization or AverageValue target.
func validateElasticMetric(m autoscalingv2.MetricSpec, p *field.Path) field.ErrorList {
	if m.Type != autoscalingv2.ResourceMetricSourceType {
		return field.ErrorList{field.NotSupported(p.Child("type"), m.Type, []autoscalingv2.MetricSourceType{autoscalingv2.ResourceMetricSourceType})}
	}
	if m.Resource == nil {
		return field.ErrorList{field.Required(p.Child("resource"), "a Resource metric names its resource and target")}
	}
	var errs field.ErrorList
	r, t := m.Resource, m.Resource.Target
	if r.Name != corev1.ResourceCPU && r.Name != corev1.ResourceMemory {
		errs = append(errs, field.NotSupported(p.Child("resource", "name"), string(r.Name), []string{string(corev1.ResourceCPU), string(corev1.ResourceMemory)}))
	}
	tp := p.Child("resource", "target")
	switch t.Type {
	case autoscalingv2.UtilizationMetricType:
		if t.AverageUtilization == nil || *t.AverageUtilization < 1 {
			errs = append(errs, field.Required(tp.Child("averageUtilization"), "a Utilization target needs a percentage >= 1"))
		}
	case autoscalingv2.AverageValueMetricType:
		if t.AverageValue == nil || t.AverageValue.Sign() <= 0 {
			errs = append(errs, field.Required(tp.Child("averageValue"), "an AverageValue target needs a quantity > 0"))
		}
	default:
		errs = append(errs, field.NotSupported(tp.Child("type"), t.Type, []autoscalingv2.MetricTargetType{autoscalingv2.UtilizationMetricType, autoscalingv2.AverageValueMetricType}))
	}
	return errs
}

func contains[T comparable](values []T, v T) bool {
	for _, x := range values {
		if x == v {
			return true
		}
	}
	return false
}

func int32String(p *int32) string {
	if p == nil {
		return "unset"
	}
	return strconv.Itoa(int(*p))
}
