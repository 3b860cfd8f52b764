package render

import (
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/frameworks"
	"github.com/trainstep/trainstep/pkg/frameworks/framework"
	"github.com/trainstep/trainstep/pkg/gang"
)

// Environment trainstep adds to every replica's main container, so a
// training script can tell which replica it is whatever the framework.
const (
	EnvJobName      = "TRAINSTEP_JOB_NAME"
	EnvReplicaType  = "TRAINSTEP_REPLICA_TYPE"
	EnvReplicaIndex = "TRAINSTEP_REPLICA_INDEX"
	// EnvTerminationMessagePath names the file whose content becomes the
	// replica's termination message, the job's metrics: the container's
	// terminationMessagePath in a cluster (the kubelet reads at most 4 KiB
	// of it), a file of its own for a local process. One name on both
	// backends, so a script writes its metrics the same way everywhere.
	EnvTerminationMessagePath = "TRAINSTEP_TERMINATION_MESSAGE_PATH"
	// EnvJobAttempt is the job's whole-job attempt the pod belongs to (0
	// first), and EnvRestartReason why the attempt before it ended:
	// "disruption" (a preemption, a drain, an eviction: not the job's
	// fault; uncounted), "failure" (counted against backoffLimit), ""
	// on the first attempt. Read through the downward API from the pod's
	// own label and annotation, so the pod spec is the same whatever the
	// attempt: a training script resumes from its checkpoint when told to.
	EnvJobAttempt    = "TRAINSTEP_JOB_ATTEMPT"
	EnvRestartReason = "TRAINSTEP_RESTART_REASON"
)

// PodName is the name of a replica's pod: "<job>-<lower-case type>-<index>".
// A recreated replica keeps its name; its attempt label tells them apart.
func PodName(jobName string, rt v1alpha1.ReplicaType, index int) string {
	return framework.ReplicaName(jobName, rt, index)
}

// Pod renders replica index of type rt. attempt counts its recreations
// (0 for the first pod) and is written to the trainstep.dev/attempt label.
//
// Pod prepares the whole job for this one pod, which for TensorFlow means
// building every replica's address: a caller rendering many replicas uses
// NewRenderer once and its Pod method instead.
func Pod(job *v1alpha1.TrainJob, id Identity, rt v1alpha1.ReplicaType, index int, attempt int) (*corev1.Pod, error) {
	if err := checkReplica(job, "pod", rt, index); err != nil {
		return nil, err
	}
	r, err := NewRenderer(job, id)
	if err != nil {
		return nil, err
	}
	return r.Pod(rt, index, attempt)
}

// checkReplica says whether job has replica index of type rt, whose pod or
// service (kind) is being rendered.
func checkReplica(job *v1alpha1.TrainJob, kind string, rt v1alpha1.ReplicaType, index int) error {
	replica := frameworks.ReplicaRef{Type: rt, Index: index}
	if job.Spec.ReplicaSpecs[rt] == nil {
		return fmt.Errorf("rendering %s %s: the job has no %s replicas", kind, replica, rt)
	}
	if n := frameworks.Replicas(job, rt); index < 0 || index >= n {
		return fmt.Errorf("rendering %s %s: index out of range, the job has %d %s replicas", kind, replica, n, rt)
	}
	return nil
}

// Pod renders replica index of type rt, as the package function Pod does.
// attempt counts its recreations (0 for the first pod) and is written to
// the trainstep.dev/attempt label.
func (r *Renderer) Pod(rt v1alpha1.ReplicaType, index int, attempt int) (*corev1.Pod, error) {
	if err := checkReplica(r.job, "pod", rt, index); err != nil {
		return nil, err
	}
	replica := frameworks.ReplicaRef{Type: rt, Index: index}
	spec := r.job.Spec.ReplicaSpecs[rt]
	template := spec.Template.DeepCopy()
	podSpec := template.Spec
	podSpec.RestartPolicy = podRestartPolicy(frameworks.InPlaceRestartPolicy(r.job, rt))
	if podSpec.AutomountServiceAccountToken == nil {
		// Training code has no business with the API server: a replica gets
		// a token only when its template asks for one.
		podSpec.AutomountServiceAccountToken = ptr.To(false)
	}
	if sp := r.job.Spec.RunPolicy.SchedulingPolicy; sp != nil && sp.PriorityClass != "" {
		podSpec.PriorityClassName = sp.PriorityClass
	}
	if err := r.pods.ConfigurePod(replica, &podSpec); err != nil {
		return nil, fmt.Errorf("rendering pod %s: %w", replica, err)
	}
	if main := frameworks.MainContainerOf(r.job, &podSpec); main != nil {
		main.Env = append(main.Env,
			corev1.EnvVar{Name: EnvJobName, Value: r.id.JobName},
			corev1.EnvVar{Name: EnvReplicaType, Value: strings.ToLower(string(rt))},
			corev1.EnvVar{Name: EnvReplicaIndex, Value: strconv.Itoa(index)},
			corev1.EnvVar{Name: EnvTerminationMessagePath, Value: terminationMessagePath(main)},
			fromPod(EnvJobAttempt, "metadata.labels['"+v1alpha1.LabelJobAttempt+"']"),
			fromPod(EnvRestartReason, "metadata.annotations['"+v1alpha1.AnnotationRestartReason+"']"),
		)
	}
	setHostname(&podSpec, r.layout, r.id.JobName, rt, index)
	if r.id.TrainerStatus != nil {
		r.addTrainerStatus(&podSpec)
	}

	pod := &corev1.Pod{
		TypeMeta: typeMeta("Pod"),
		ObjectMeta: metav1.ObjectMeta{
			Name:            PodName(r.id.JobName, rt, index),
			Namespace:       r.id.Namespace,
			Labels:          podLabels(template.Labels, r.id, rt, index, attempt),
			Annotations:     podAnnotations(template.Annotations, r.job.Spec.Framework),
			OwnerReferences: ownerReferences(r.id),
		},
		Spec: podSpec,
	}
	applyGang(pod, r.gang)
	return pod, nil
}

// fromPod is an env var the downward API reads from the pod's field path.
func fromPod(name, fieldPath string) corev1.EnvVar {
	return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: fieldPath}}}
}

// setHostname gives a pod of a job under the per-job layout its hostname
// and the job's Service as subdomain, which make "<pod>.<job>" resolve to
// it (see services.go); a template's own are replaced, as the MPI Operator
// replaces them. Under the per-replica layout peers dial the replica's own
// Service, and the template's hostname and subdomain are left as they are.
func setHostname(spec *corev1.PodSpec, layout v1alpha1.ServiceLayout, jobName string, rt v1alpha1.ReplicaType, index int) {
	if layout != v1alpha1.ServiceLayoutPerJob {
		return
	}
	spec.Hostname = PodName(jobName, rt, index)
	spec.Subdomain = jobName
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
	own := ReplicaLabels(id, rt, index)
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

// terminationMessagePath is where the kubelet reads c's termination message.
func terminationMessagePath(c *corev1.Container) string {
	if c.TerminationMessagePath != "" {
		return c.TerminationMessagePath
	}
	return corev1.TerminationMessagePathDefault
}
