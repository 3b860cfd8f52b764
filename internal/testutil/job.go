package testutil

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/frameworks"
)

// Replicas gives a job's shape: how many replicas of each type.
type Replicas map[v1alpha1.ReplicaType]int32

// NewJob builds a defaulted TrainJob whose replicas each run one container
// named as the framework's main container (MPI: "main"), changed by edits
// before defaulting.
func NewJob(fw v1alpha1.Framework, name, namespace string, shape Replicas, edits ...func(*v1alpha1.TrainJob)) *v1alpha1.TrainJob {
	job := &v1alpha1.TrainJob{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.APIVersion, Kind: v1alpha1.Kind},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec:       v1alpha1.TrainJobSpec{Framework: fw, ReplicaSpecs: map[v1alpha1.ReplicaType]*v1alpha1.ReplicaSpec{}},
	}
	container := ContainerName(fw)
	for rt, n := range shape {
		n := n
		job.Spec.ReplicaSpecs[rt] = &v1alpha1.ReplicaSpec{
			Replicas: &n,
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				Containers: []corev1.Container{{Name: container, Image: "example.com/train:1"}},
			}},
		}
	}
	for _, edit := range edits {
		edit(job)
	}
	frameworks.SetDefaults(job)
	return job
}

// ContainerName is the name of framework fw's main container, "main" for
// a framework that names none (MPI).
func ContainerName(fw v1alpha1.Framework) string {
	if f, err := frameworks.For(fw); err == nil && f.Conventions().Container != "" {
		return f.Conventions().Container
	}
	return "main"
}
