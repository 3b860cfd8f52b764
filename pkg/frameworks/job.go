package frameworks

import (
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/frameworks/framework"
)

// The values callers pass around, named here so that they ask one package.
type (
	ReplicaRef    = framework.ReplicaRef
	Placement     = framework.Placement
	SuccessRule   = framework.SuccessRule
	SSHKeyPair    = framework.SSHKeyPair
	PodConfigurer = framework.PodConfigurer
	ElasticBounds = framework.ElasticBounds
)

// Elastic returns the job's elastic bounds; ok is false for a job that is
// not elastic.
func Elastic(job *v1alpha1.TrainJob) (bounds ElasticBounds, ok bool) {
	if e, is := of(job).(framework.Elastic); is {
		return e.Elastic(job)
	}
	return ElasticBounds{}, false
}

// Replicas returns how many replicas of type rt trainstep may create: 0
// when the type is absent, 1 when unset (the API's default), never
// negative; an elastic job's elastic type as many as it has slots.
func Replicas(job *v1alpha1.TrainJob, rt v1alpha1.ReplicaType) int {
	if e, ok := Elastic(job); ok && rt == e.Type && job.Spec.ReplicaSpecs[rt] != nil {
		return max(0, int(e.Slots()))
	}
	return framework.Count(job, rt)
}

// TotalReplicas returns how many replicas of every type trainstep may
// create.
func TotalReplicas(job *v1alpha1.TrainJob) int {
	total := 0
	for rt := range job.Spec.ReplicaSpecs {
		total += Replicas(job, rt)
	}
	return total
}

// GangSize is how many pods a gang of the job waits for at its start:
// every replica, an elastic job's elastic type as many as it starts with.
func GangSize(job *v1alpha1.TrainJob) int32 {
	total := int32(TotalReplicas(job))
	if e, ok := Elastic(job); ok {
		total -= int32(Replicas(job, e.Type)) - e.AtStart()
	}
	return total
}

// MainContainer returns the main container of replica type rt, pointing
// into the job's template (changes to it change the job), or nil when the
// type is absent or has no container.
func MainContainer(job *v1alpha1.TrainJob, rt v1alpha1.ReplicaType) *corev1.Container {
	spec := job.Spec.ReplicaSpecs[rt]
	if spec == nil {
		return nil
	}
	return MainContainerOf(job, &spec.Template.Spec)
}

// MainContainerOf returns the container of spec (a copy of a replica's
// pod template) that the framework's env and port go on, or nil when spec
// has no container.
func MainContainerOf(job *v1alpha1.TrainJob, spec *corev1.PodSpec) *corev1.Container {
	if i := MainContainerIndex(job, spec); i >= 0 {
		return &spec.Containers[i]
	}
	return nil
}

// MainContainerIndex is the index of the main container in spec, -1 when
// it has none.
func MainContainerIndex(job *v1alpha1.TrainJob, spec *corev1.PodSpec) int {
	return framework.MainContainerIndex(spec, conventions(job).Container)
}

// Port returns the port replicas of type rt listen on and the name of
// that port: the main container's port named as the framework names it,
// else the framework's default. The name is "" for a framework without a
// port (MPI).
func Port(job *v1alpha1.TrainJob, rt v1alpha1.ReplicaType) (name string, port int32) {
	c := conventions(job)
	return c.PortName, c.PortOf(job, rt)
}

// SuccessRuleFor returns the success rule of job's framework; the zero rule
// for an unknown framework (validation rejects those).
func SuccessRuleFor(job *v1alpha1.TrainJob) SuccessRule {
	if f := of(job); f != nil {
		return f.SuccessRule(job)
	}
	return SuccessRule{}
}

// Leaders returns the replicas whose logs stream by default: the one that
// decides success (chief, master, launcher), else index 0 of the first type
// whose replicas decide it (worker-0).
func Leaders(job *v1alpha1.TrainJob) []ReplicaRef {
	rule := SuccessRuleFor(job)
	if rule.Leader != nil {
		return []ReplicaRef{*rule.Leader}
	}
	for _, types := range [][]v1alpha1.ReplicaType{rule.AllOf, rule.AnyOf} {
		for _, rt := range types {
			if Replicas(job, rt) > 0 {
				return []ReplicaRef{{Type: rt, Index: 0}}
			}
		}
	}
	return nil
}

// conventions returns the job's framework's conventions; empty ones for
// an unknown framework.
func conventions(job *v1alpha1.TrainJob) *framework.Conventions {
	if f := of(job); f != nil {
		return f.Conventions()
	}
	return &framework.Conventions{}
}

// replicaType returns what the job's framework says of type rt.
func replicaType(job *v1alpha1.TrainJob, rt v1alpha1.ReplicaType) framework.ReplicaType {
	t, _ := conventions(job).Type(rt)
	return t
}

// MetricsFrom returns the replica a job's metricsFrom names
// ("<Type>/<index>", the type in any case), and false when it names none.
func MetricsFrom(job *v1alpha1.TrainJob) (ReplicaRef, bool) {
	if job.Spec.MetricsFrom == "" {
		return ReplicaRef{}, false
	}
	rt, index, err := parseMetricsFrom(job.Spec.MetricsFrom)
	if err != nil {
		return ReplicaRef{}, false
	}
	return ReplicaRef{Type: rt, Index: index}, true
}

// parseMetricsFrom splits a metricsFrom value "<Type>/<index>"; the type is
// returned in Kubeflow's spelling.
func parseMetricsFrom(s string) (v1alpha1.ReplicaType, int, error) {
	typ, idx, ok := strings.Cut(s, "/")
	if !ok || typ == "" {
		return "", 0, fmt.Errorf("must be <Type>/<index>, e.g. Worker/0")
	}
	index, err := strconv.Atoi(idx)
	if err != nil || index < 0 {
		return "", 0, fmt.Errorf("must be <Type>/<index> with a non-negative index, e.g. Worker/0")
	}
	rt, _ := CanonicalReplicaType(typ)
	return rt, index, nil
}

// ScalesOnMetrics reports whether the job's replica count follows metrics
// (an elastic PyTorch job's elasticPolicy.metrics).
func ScalesOnMetrics(job *v1alpha1.TrainJob) bool {
	e, ok := Elastic(job)
	return ok && e.OnMetrics
}

// AllReplicas lists every replica trainstep may create for the job, in
// creation order: types as frameworks.SortedReplicaTypes orders them (the
// deciding replica first), replicas by index.
func AllReplicas(job *v1alpha1.TrainJob) []ReplicaRef {
	refs := make([]ReplicaRef, 0, TotalReplicas(job))
	for _, rt := range SortedReplicaTypes(job) {
		for i := 0; i < Replicas(job, rt); i++ {
			refs = append(refs, ReplicaRef{Type: rt, Index: i})
		}
	}
	return refs
}

// SortedReplicaTypes returns the job's replica types in a stable order,
// the deciding replica first, so that rendering, logs and outputs never
// depend on map iteration.
func SortedReplicaTypes(job *v1alpha1.TrainJob) []v1alpha1.ReplicaType {
	return framework.SortedReplicaTypes(job)
}
