package bench

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/trainstep/trainstep/internal/testutil"
	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/render"
)

// Annotations the test cluster's KWOK Stages read from a live pod.
const (
	// AnnotationExitAfter makes the pod's containers exit (code 0) that long
	// after they started running.
	AnnotationExitAfter = "kwok.trainstep.dev/exit-after"
)

// JobSpec describes the benchmark's job: N TensorFlow workers, nothing else,
// so every worker's TF_CONFIG lists all N addresses (kept once, in the job's
// cluster ConfigMap).
type JobSpec struct {
	Name    string
	Workers int
	// CleanPodPolicy is the job's runPolicy.cleanPodPolicy; empty keeps the default (Running).
	CleanPodPolicy v1alpha1.CleanPodPolicy
	// ExitAfter, when set, is put on the worker template: every worker exits 0
	// that long after it started running.
	ExitAfter string
	// ServiceLayout is the job's spec.serviceLayout; empty keeps the
	// default (PerJob).
	ServiceLayout v1alpha1.ServiceLayout
}

// Layout is the job's Service layout, the default when unset.
func (s JobSpec) Layout() v1alpha1.ServiceLayout {
	spec := v1alpha1.TrainJobSpec{ServiceLayout: s.ServiceLayout}
	return spec.ServiceLayoutOrDefault()
}

// Services is how many Services the job has: one per worker, or one.
func (s JobSpec) Services() int {
	if s.Layout() == v1alpha1.ServiceLayoutPerReplica {
		return s.Workers
	}
	return 1
}

// Manifest is the TrainJob YAML `trainstep run -f` reads.
func (s JobSpec) Manifest() ([]byte, error) {
	replicas := int32(s.Workers)
	template := corev1.PodTemplateSpec{
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name:    testutil.ContainerName(v1alpha1.FrameworkTensorFlow),
			Image:   "registry.example/train:1",
			Command: []string{"python", "train.py"},
		}}},
	}
	if s.ExitAfter != "" {
		template.Annotations = map[string]string{AnnotationExitAfter: s.ExitAfter}
	}
	job := v1alpha1.TrainJob{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.APIVersion, Kind: v1alpha1.Kind},
		ObjectMeta: metav1.ObjectMeta{Name: s.Name},
		Spec: v1alpha1.TrainJobSpec{
			Framework: v1alpha1.FrameworkTensorFlow,
			ReplicaSpecs: map[v1alpha1.ReplicaType]*v1alpha1.ReplicaSpec{
				v1alpha1.ReplicaTypeWorker: {Replicas: &replicas, Template: template},
			},
		},
	}
	if s.CleanPodPolicy != "" {
		policy := s.CleanPodPolicy
		job.Spec.RunPolicy.CleanPodPolicy = &policy
	}
	job.Spec.ServiceLayout = s.ServiceLayout
	out, err := yaml.Marshal(job)
	if err != nil {
		return nil, fmt.Errorf("encoding job %s: %w", s.Name, err)
	}
	return out, nil
}

// DecidingPod is the pod whose end decides a TensorFlow job without a chief: worker-0.
func (s JobSpec) DecidingPod() string {
	return render.PodName(s.Name, v1alpha1.ReplicaTypeWorker, 0)
}
