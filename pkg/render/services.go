package render

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/frameworks"
)

// headlessService renders one of the job's headless Services, laid out as
// the job's spec.serviceLayout says.
//
// Under PerReplica (the Training Operator's Kubeflow manifests) every
// replica gets a Service named like its pod and selecting only that pod,
// as the Training Operator v1.9 creates them. Their env names peers
// "<job>-worker-0" or "<job>-worker-0.<ns>.svc": that is the Service's own
// DNS name, and for a headless Service with a selector the cluster DNS
// answers it with the selected pod's IP. So the pod needs no hostname or
// subdomain, and none is set (a subdomain would only add a second name).
//
// Under PerJob (TrainJobs, MPI) the job gets one Service named after it,
// without ports, selecting all its pods; each pod's hostname and subdomain
// make "<pod>.<job>" (and "<pod>.<job>.<ns>.svc") resolve, the names in
// the env and MPI's hostfile. One Service instead of one per replica saves
// the control plane, per replica, a Service and the Endpoints and
// EndpointSlice written for it, as JobSet and MPI Operator v2 do.
//
// publishNotReadyAddresses makes the names resolve as soon as a pod has an
// IP, before any readiness probe passes, so replicas can rendezvous while
// they start.
//
// Renderer.Service renders the first kind, Renderer.SharedObjects the second.
func headlessService(id Identity, name string, own, selector map[string]string, ports []corev1.ServicePort) *corev1.Service {
	return &corev1.Service{
		TypeMeta: typeMeta("Service"),
		ObjectMeta: metav1.ObjectMeta{
			Name:            name,
			Namespace:       id.Namespace,
			Labels:          withExtraLabels(id, own),
			OwnerReferences: ownerReferences(id),
		},
		Spec: corev1.ServiceSpec{
			ClusterIP:                corev1.ClusterIPNone,
			Selector:                 selector,
			Ports:                    append([]corev1.ServicePort(nil), ports...),
			PublishNotReadyAddresses: true,
		},
	}
}

// servicePorts exposes the named ports of the main container of rt, as the
// Training Operator does, and the framework's port even when the container
// does not declare it (the env points peers at it either way). Unnamed
// ports are left out: a Service with several ports needs every one named.
func servicePorts(job *v1alpha1.TrainJob, rt v1alpha1.ReplicaType) []corev1.ServicePort {
	var ports []corev1.ServicePort
	seen := map[string]bool{}
	if main := frameworks.MainContainer(job, rt); main != nil {
		for _, p := range main.Ports {
			if p.Name == "" || seen[p.Name] {
				continue
			}
			seen[p.Name] = true
			ports = append(ports, servicePort(p.Name, p.ContainerPort))
		}
	}
	if name, port := frameworks.Port(job, rt); name != "" && !seen[name] {
		ports = append(ports, servicePort(name, port))
	}
	return ports
}

// servicePort targets the same port on the pod. The API server would
// default targetPort to port anyway; spelling it out keeps printed
// manifests free of "targetPort: 0".
func servicePort(name string, port int32) corev1.ServicePort {
	return corev1.ServicePort{Name: name, Port: port, TargetPort: intstr.FromInt32(port)}
}
