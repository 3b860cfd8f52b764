package render

import (
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/frameworks"
	"github.com/trainstep/trainstep/pkg/gang"
)

// Environment trainstep adds to every replica's main container, so a
// training script can tell which replica it is whatever the framework.
const (
	EnvJobName      = "TRAINSTEP_JOB_NAME"
	EnvReplicaType  = "TRAINSTEP_REPLICA_TYPE"
	EnvReplicaIndex = "TRAINSTEP_REPLICA_INDEX"
)

// PodName is the name of a replica's pod: "<job>-<lower-case type>-<index>".
// A recreated replica keeps its name; its attempt label tells them apart.
func PodName(jobName string, rt v1alpha1.ReplicaType, index int) string {
	return v1alpha1.ReplicaName(jobName, rt, index)
}

// Pod renders replica index of type rt. attempt counts its recreations
// (0 for the first pod) and is written to the trainstep.dev/attempt label.
func Pod(job *v1alpha1.TrainJob, id Identity, rt v1alpha1.ReplicaType, index int, attempt int) (*corev1.Pod, error) {
	replica := frameworks.ReplicaRef{Type: rt, Index: index}
	spec := job.Spec.ReplicaSpecs[rt]
	if spec == nil {
		return nil, fmt.Errorf("rendering pod %s: the job has no %s replicas", replica, rt)
	}
	if index < 0 || index >= frameworks.Replicas(job, rt) {
		return nil, fmt.Errorf("rendering pod %s: index out of range, the job has %d %s replicas", replica, frameworks.Replicas(job, rt), rt)
	}
	fw, err := frameworks.For(job.Spec.Framework)
	if err != nil {
		return nil, fmt.Errorf("rendering pod %s: %w", replica, err)
	}

	template := spec.Template.DeepCopy()
	podSpec := template.Spec
	podSpec.RestartPolicy = podRestartPolicy(spec.RestartPolicy)
	if sp := job.Spec.RunPolicy.SchedulingPolicy; sp != nil && sp.PriorityClass != "" {
		podSpec.PriorityClassName = sp.PriorityClass
	}
	if err := fw.ConfigurePod(job, placement(id), replica, &podSpec); err != nil {
		return nil, fmt.Errorf("rendering pod %s: %w", replica, err)
	}
	if main := frameworks.MainContainer(job.Spec.Framework, &podSpec); main != nil {
		main.Env = append(main.Env,
			corev1.EnvVar{Name: EnvJobName, Value: id.JobName},
			corev1.EnvVar{Name: EnvReplicaType, Value: strings.ToLower(string(rt))},
			corev1.EnvVar{Name: EnvReplicaIndex, Value: strconv.Itoa(index)},
		)
	}
	// Per-replica frameworks need no hostname or subdomain: peers dial the
	// replica's own headless Service (see services.go).

	pod := &corev1.Pod{
		TypeMeta: typeMeta("Pod"),
		ObjectMeta: metav1.ObjectMeta{
			Name:            PodName(id.JobName, rt, index),
			Namespace:       id.Namespace,
			Labels:          podLabels(template.Labels, id, rt, index, attempt),
			Annotations:     podAnnotations(template.Annotations, job.Spec.Framework),
			OwnerReferences: ownerReferences(id),
		},
		Spec: podSpec,
	}
	applyGang(pod, gang.ForPods(job, id.JobName))
	return pod, nil
}

// applyGang adds the gang kind's keys to a rendered pod. The gang's own
// labels and annotations win over the template's (the scheduler must find
// the group), but a schedulerName set in the template is kept: the
// scheduler-plugins profile name is chosen by whoever installs it.
func applyGang(pod *corev1.Pod, s gang.PodSettings) {
	for k, v := range s.Labels {
		pod.Labels[k] = v
	}
	for k, v := range s.Annotations {
		pod.Annotations[k] = v
	}
	if s.SchedulerName != "" && (pod.Spec.SchedulerName == "" || pod.Spec.SchedulerName == corev1.DefaultSchedulerName) {
		pod.Spec.SchedulerName = s.SchedulerName
	}
	pod.Spec.SchedulingGates = append(pod.Spec.SchedulingGates, s.Gates...)
}

// podRestartPolicy maps a replica's restart policy onto the pod. Under
// ExitCode trainstep decides about retries, so the kubelet must not restart.
func podRestartPolicy(p v1alpha1.RestartPolicy) corev1.RestartPolicy {
	switch p {
	case v1alpha1.RestartPolicyOnFailure:
		return corev1.RestartPolicyOnFailure
	case v1alpha1.RestartPolicyAlways:
		return corev1.RestartPolicyAlways
	}
	return corev1.RestartPolicyNever
}

// podLabels layers the template's labels, the extra labels and trainstep's
// own, the later winning.
func podLabels(template map[string]string, id Identity, rt v1alpha1.ReplicaType, index, attempt int) map[string]string {
	own := ReplicaLabels(id.JobName, rt, index)
	own[v1alpha1.LabelAttempt] = strconv.Itoa(attempt)
	out := withExtraLabels(id, own)
	for k, v := range template {
		if _, set := out[k]; !set {
			out[k] = v
		}
	}
	return out
}

func podAnnotations(template map[string]string, fw v1alpha1.Framework) map[string]string {
	out := make(map[string]string, len(template)+1)
	for k, v := range template {
		out[k] = v
	}
	out[v1alpha1.AnnotationFramework] = string(fw)
	return out
}
