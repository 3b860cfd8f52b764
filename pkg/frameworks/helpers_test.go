package frameworks_test

import (
	"testing"

	"github.com/trainstep/trainstep/internal/testutil"

	corev1 "k8s.io/api/core/v1"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/frameworks"
)

// replicas is a job's shape: how many replicas of each type.
type replicas = testutil.Replicas

// newJob builds a defaulted job whose replicas each run one container named
// as the framework's main container (MPI: "main"), changed by edits. Jobs
// of the Training Operator's frameworks are laid out as its Kubeflow
// manifests are (spec.serviceLayout PerReplica), so their env is the
// operator's, transcribed from its tests; an edit may choose PerJob.
func newJob(fw v1alpha1.Framework, name, namespace string, shape replicas, edits ...func(*v1alpha1.TrainJob)) *v1alpha1.TrainJob {
	if fw != v1alpha1.FrameworkMPI {
		edits = append([]func(*v1alpha1.TrainJob){withLayout(v1alpha1.ServiceLayoutPerReplica)}, edits...)
	}
	return testutil.NewJob(fw, name, namespace, shape, edits...)
}

// withLayout sets spec.serviceLayout.
func withLayout(layout v1alpha1.ServiceLayout) func(*v1alpha1.TrainJob) {
	return func(job *v1alpha1.TrainJob) { job.Spec.ServiceLayout = layout }
}

// withPort sets the framework's named port of rt's main container.
func withPort(rt v1alpha1.ReplicaType, port int32) func(*v1alpha1.TrainJob) {
	return func(job *v1alpha1.TrainJob) {
		name, _ := frameworks.Port(job, rt)
		c := &job.Spec.ReplicaSpecs[rt].Template.Spec.Containers[0]
		c.Ports = append(c.Ports, corev1.ContainerPort{Name: name, ContainerPort: port})
	}
}

// withSidecar adds a second container to rt's pods.
func withSidecar(rt v1alpha1.ReplicaType) func(*v1alpha1.TrainJob) {
	return func(job *v1alpha1.TrainJob) {
		spec := &job.Spec.ReplicaSpecs[rt].Template.Spec
		spec.Containers = append(spec.Containers, corev1.Container{Name: "sidecar", Image: "example.com/sidecar:1"})
	}
}

// configured returns the pod spec of one replica after the framework
// configured a copy of its template.
func configured(t *testing.T, job *v1alpha1.TrainJob, rt v1alpha1.ReplicaType, index int) *corev1.PodSpec {
	t.Helper()
	spec := job.Spec.ReplicaSpecs[rt].Template.Spec.DeepCopy()
	at := frameworks.Placement{JobName: job.Name, Namespace: job.Namespace}
	if err := frameworks.ConfigurePod(job, at, frameworks.ReplicaRef{Type: rt, Index: index}, spec); err != nil {
		t.Fatalf("ConfigurePod(%s/%d): %v", rt, index, err)
	}
	return spec
}

func ptr[T any](v T) *T { return &v }

func env(pairs ...string) []corev1.EnvVar {
	out := make([]corev1.EnvVar, 0, len(pairs)/2)
	for i := 0; i+1 < len(pairs); i += 2 {
		out = append(out, corev1.EnvVar{Name: pairs[i], Value: pairs[i+1]})
	}
	return out
}
