package framework

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
)

// ReplicaName is the name of one replica's pod (and, under the per-replica
// layout, its Service): <job>-<lower-case type>-<index>, Training Operator
// style.
func ReplicaName(jobName string, rt v1alpha1.ReplicaType, index int) string {
	return fmt.Sprintf("%s-%s-%d", jobName, strings.ToLower(string(rt)), index)
}

// PeerHost is the DNS name the other replicas reach replica index of type
// rt by: under the per-replica layout its own Service's name, the pod's
// name ("<job>-worker-0", as the Training Operator writes it); under the
// per-job layout the pod's hostname in the job's Service
// ("<job>-worker-0.<job>"). Both resolve through the pods' DNS search
// path, "<ns>.svc.<cluster domain>".
func PeerHost(job *v1alpha1.TrainJob, at Placement, rt v1alpha1.ReplicaType, index int) string {
	name := ReplicaName(at.JobName, rt, index)
	if job.Spec.ServiceLayoutOrDefault() == v1alpha1.ServiceLayoutPerJob {
		return name + "." + at.JobName
	}
	return name
}

// Count is how many replicas of type rt the job declares: 0 when the type
// is absent, 1 when unset (the API's default), never negative.
func Count(job *v1alpha1.TrainJob, rt v1alpha1.ReplicaType) int {
	return max(0, int(job.Spec.ReplicaSpecs[rt].ReplicaCount()))
}

// Total is how many replicas of every type the job declares.
func Total(job *v1alpha1.TrainJob) int {
	total := 0
	for rt := range job.Spec.ReplicaSpecs {
		total += Count(job, rt)
	}
	return total
}

// MainContainerIndex is the index of the main container in a pod spec: the
// one named name, else the first; -1 when there are no containers.
func MainContainerIndex(spec *corev1.PodSpec, name string) int {
	if len(spec.Containers) == 0 {
		return -1
	}
	if name != "" {
		for i := range spec.Containers {
			if spec.Containers[i].Name == name {
				return i
			}
		}
	}
	return 0
}

// MainContainer returns the container of spec that the framework's env
// and port go on, or nil when spec has no container.
func (c *Conventions) MainContainer(spec *corev1.PodSpec) *corev1.Container {
	i := MainContainerIndex(spec, c.Container)
	if i < 0 {
		return nil
	}
	return &spec.Containers[i]
}

// PortOf returns the port replicas of type rt listen on: the main
// container's port named as the framework names it (tfjob-port,
// pytorchjob-port, …), else the framework's default port.
func (c *Conventions) PortOf(job *v1alpha1.TrainJob, rt v1alpha1.ReplicaType) int32 {
	spec := job.Spec.ReplicaSpecs[rt]
	if spec == nil {
		return c.Port
	}
	if main := c.MainContainer(&spec.Template.Spec); main != nil {
		for _, p := range main.Ports {
			if p.Name == c.PortName {
				return p.ContainerPort
			}
		}
	}
	return c.Port
}
