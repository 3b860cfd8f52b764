package render

import (
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
)

// NetworkPolicy renders the job's NetworkPolicy, named like the job: its
// replicas accept connections only from pods of the same job. A job's
// ports — torch's TCPStore, TensorFlow's gRPC servers, MPI's sshd — serve no
// one else, and without it every pod of the cluster may reach them. The
// step itself never dials a replica (their logs and state come through the
// API server), so it needs no rule. Egress is left open: replicas fetch data
// and report progress to the step.
//
// Only a network plugin that enforces NetworkPolicy makes it hold.
func NetworkPolicy(job *v1alpha1.TrainJob, id Identity) *networkingv1.NetworkPolicy {
	own := &metav1.LabelSelector{MatchLabels: JobLabels(id)}
	return &networkingv1.NetworkPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: networkingv1.SchemeGroupVersion.String(), Kind: "NetworkPolicy"},
		ObjectMeta: jobObjectMeta(id, id.JobName, sharedLabels(job, id)),
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: *own,
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress:     []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{PodSelector: own.DeepCopy()}}}},
		},
	}
}

// StatusNetworkPolicy renders the NetworkPolicy of the step's own pod while
// it serves the job's progress endpoint, named <job>-status: the pod
// labelled with the job's identity (LabelTrainerStatus) accepts
// connections only from the job's pods, and only on the endpoint's port.
// Nothing else connects to a step pod: Argo's containers in it talk to the
// API server, not to each other over the network.
func StatusNetworkPolicy(job *v1alpha1.TrainJob, id Identity) *networkingv1.NetworkPolicy {
	if id.TrainerStatus == nil {
		return nil
	}
	port := intstr.FromInt32(id.TrainerStatus.Port)
	tcp := corev1.ProtocolTCP
	return &networkingv1.NetworkPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: networkingv1.SchemeGroupVersion.String(), Kind: "NetworkPolicy"},
		ObjectMeta: jobObjectMeta(id, v1alpha1.TrainerStatusName(id.JobName), JobLabels(id)),
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{v1alpha1.LabelTrainerStatus: TrainerStatusSelectorValue(id)}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{
				From:  []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: JobLabels(id)}}},
				Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: &port}},
			}},
		},
	}
}
