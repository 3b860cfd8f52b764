package frameworks

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/frameworks/framework"
)

// Job-wide defaults no framework changes.
const (
	DefaultScheduleTimeoutSeconds int32 = 300
	DefaultMaxScheduleAttempts    int32 = 3
)

// SetDefaults fills every unset field of job with trainstep's defaults,
// which follow the Kubeflow Training Operator v1.9 and the MPI Operator v2
// where they define one: the job-wide ones here, each replica's from its
// framework's conventions, then the framework's own. It never overwrites
// a value the job declares, so running it twice changes nothing. Validate
// checks the result; a job of an unknown framework gets only the job-wide
// defaults.
func SetDefaults(job *v1alpha1.TrainJob) {
	f := of(job)
	normaliseReplicaTypes(job.Spec.ReplicaSpecs)
	if f != nil {
		for rt, spec := range job.Spec.ReplicaSpecs {
			if spec != nil {
				setReplicaDefaults(f.Conventions(), rt, spec)
			}
		}
	}
	setKueueFromLabels(job)
	setRunPolicyDefaults(&job.Spec.RunPolicy)
	if job.Spec.SuccessPolicy == "" {
		job.Spec.SuccessPolicy = v1alpha1.SuccessPolicyDefault
	}
	if job.Spec.ServiceLayout == "" {
		job.Spec.ServiceLayout = v1alpha1.ServiceLayoutPerJob
	}
	if f != nil {
		f.Default(job)
	}
	setFailurePolicyDefaults(job)
}

// setKueueFromLabels reads Kueue's labels off the job's metadata, as
// Kueue's integrations read them off a Kubeflow job: the queue-name label
// makes the job a Kueue pod group in that LocalQueue (gang kueue, queue),
// the priority-class label its WorkloadPriorityClass. What the spec says
// itself is kept; Validate reports a spec that contradicts a label.
func setKueueFromLabels(job *v1alpha1.TrainJob) {
	queue, priority := job.Labels[v1alpha1.LabelKueueQueueName], job.Labels[v1alpha1.LabelKueuePriorityClass]
	if queue == "" && priority == "" {
		return
	}
	rp := &job.Spec.RunPolicy
	if rp.SchedulingPolicy == nil {
		rp.SchedulingPolicy = &v1alpha1.SchedulingPolicy{}
	}
	sp := rp.SchedulingPolicy
	if queue != "" && sp.Gang == "" {
		sp.Gang = v1alpha1.GangKueue
	}
	if queue != "" && sp.Queue == "" {
		sp.Queue = queue
	}
	if priority != "" && sp.WorkloadPriorityClass == "" {
		sp.WorkloadPriorityClass = priority
	}
}

// setFailurePolicyDefaults fills in what a failure restarts (by framework)
// and, when no rules are given, the rule that preemption, eviction and
// node loss cost nothing.
func setFailurePolicyDefaults(job *v1alpha1.TrainJob) {
	rp := &job.Spec.RunPolicy
	if rp.FailurePolicy == nil {
		rp.FailurePolicy = &v1alpha1.FailurePolicy{}
	}
	fp := rp.FailurePolicy
	if fp.Restart == "" {
		fp.Restart = FailureRestart(job)
	}
	if fp.Rules == nil {
		fp.Rules = DefaultFailureRules()
	}
	for i := range fp.Rules {
		for j := range fp.Rules[i].OnPodConditions {
			if c := &fp.Rules[i].OnPodConditions[j]; c.Status == "" {
				c.Status = corev1.ConditionTrue
			}
		}
	}
}

// DefaultFailureRules are the rules of a job that gives none: a pod
// Kubernetes removed (DisruptionTarget: preemption, eviction, a taint, a
// lost node) is restarted without counting against backoffLimit.
func DefaultFailureRules() []v1alpha1.FailurePolicyRule {
	return []v1alpha1.FailurePolicyRule{{
		Action:          v1alpha1.FailureActionIgnore,
		OnPodConditions: []v1alpha1.PodConditionPattern{{Type: v1alpha1.PodConditionDisruptionTarget, Status: corev1.ConditionTrue}},
	}}
}

// normaliseReplicaTypes renames keys such as "worker" or "ps" to Kubeflow's
// spelling, as the Training Operator does. A key whose canonical spelling is
// also present is left alone, so validation reports it instead of one spec
// silently replacing the other.
func normaliseReplicaTypes(specs map[v1alpha1.ReplicaType]*v1alpha1.ReplicaSpec) {
	for rt, spec := range specs {
		canonical, known := CanonicalReplicaType(string(rt))
		if !known || canonical == rt {
			continue
		}
		if _, taken := specs[canonical]; taken {
			continue
		}
		delete(specs, rt)
		specs[canonical] = spec
	}
}

// CanonicalReplicaType returns Kubeflow's CamelCase spelling of a replica
// type written in any case ("worker" → Worker, "ps" → PS), and whether any
// framework has that type.
func CanonicalReplicaType(s string) (v1alpha1.ReplicaType, bool) {
	for _, f := range table {
		if rt, ok := f.Conventions().Canonical(s); ok {
			return rt, true
		}
	}
	return v1alpha1.ReplicaType(s), false
}

func setReplicaDefaults(c *framework.Conventions, rt v1alpha1.ReplicaType, spec *v1alpha1.ReplicaSpec) {
	if spec.Replicas == nil {
		one := int32(1)
		spec.Replicas = &one
	}
	if spec.RestartPolicy == "" {
		spec.RestartPolicy = v1alpha1.RestartPolicyNever
		if t, ok := c.Type(rt); ok {
			spec.RestartPolicy = t.RestartPolicy
		}
	}
	pod := &spec.Template.Spec
	main := framework.MainContainerIndex(pod, c.Container)
	if main < 0 {
		return
	}
	// An unnamed main container takes the framework's name, so the pod is
	// valid and the operator's conventions find it.
	if pod.Containers[main].Name == "" && c.Container != "" {
		pod.Containers[main].Name = c.Container
	}
	if c.PortName != "" && !hasPortNamed(&pod.Containers[main], c.PortName) {
		pod.Containers[main].Ports = append(pod.Containers[main].Ports,
			corev1.ContainerPort{Name: c.PortName, ContainerPort: c.Port})
	}
}

func hasPortNamed(c *corev1.Container, name string) bool {
	for _, p := range c.Ports {
		if p.Name == name {
			return true
		}
	}
	return false
}

func setRunPolicyDefaults(p *v1alpha1.RunPolicy) {
	if p.CleanPodPolicy == nil {
		running := v1alpha1.CleanPodPolicyRunning
		p.CleanPodPolicy = &running
	}
	if p.SchedulingPolicy == nil {
		p.SchedulingPolicy = &v1alpha1.SchedulingPolicy{}
	}
	sp := p.SchedulingPolicy
	if sp.Gang == "" {
		sp.Gang = v1alpha1.GangNone
	}
	if sp.ScheduleTimeoutSeconds == nil {
		timeout := DefaultScheduleTimeoutSeconds
		sp.ScheduleTimeoutSeconds = &timeout
	}
	if sp.MaxScheduleAttempts == nil {
		attempts := DefaultMaxScheduleAttempts
		sp.MaxScheduleAttempts = &attempts
	}
}
