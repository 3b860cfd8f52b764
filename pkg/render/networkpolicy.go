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
	return NetworkPolicyAdmitting(job, id, IngressAllowance{})
}

// IngressAllowance is what a job's NetworkPolicy admits besides the job's
// own pods: connections from every pod of Namespaces (by name), to Ports
// of the job's pods (by number or a container port's name), or to every
// port when Ports is empty. A monitoring namespace's Prometheus scraping
// the replicas' metrics port is the usual case.
type IngressAllowance struct {
	Namespaces []string
	Ports      []intstr.IntOrString
}

// NetworkPolicyAdmitting renders the job's NetworkPolicy (NetworkPolicy)
// with a second ingress rule for allow, when it names namespaces.
func NetworkPolicyAdmitting(job *v1alpha1.TrainJob, id Identity, allow IngressAllowance) *networkingv1.NetworkPolicy {
	own := &metav1.LabelSelector{MatchLabels: JobLabels(id)}
	np := &networkingv1.NetworkPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: networkingv1.SchemeGroupVersion.String(), Kind: "NetworkPolicy"},
		ObjectMeta: jobObjectMeta(id, id.JobName, sharedLabels(job, id)),
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: *own,
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress:     []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{PodSelector: own.DeepCopy()}}}},
		},
	}
	if len(allow.Namespaces) > 0 {
		rule := networkingv1.NetworkPolicyIngressRule{From: []networkingv1.NetworkPolicyPeer{{NamespaceSelector: &metav1.LabelSelector{
			MatchExpressions: []metav1.LabelSelectorRequirement{{
				Key: corev1.LabelMetadataName, Operator: metav1.LabelSelectorOpIn, Values: append([]string{}, allow.Namespaces...),
			}},
		}}}}
		for _, port := range allow.Ports {
			rule.Ports = append(rule.Ports, networkingv1.NetworkPolicyPort{Protocol: ptrTo(corev1.ProtocolTCP), Port: ptrTo(port)})
		}
		np.Spec.Ingress = append(np.Spec.Ingress, rule)
	}
	return np
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
