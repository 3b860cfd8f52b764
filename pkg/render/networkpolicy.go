package render

import (
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
	own := &metav1.LabelSelector{MatchLabels: JobLabels(id.JobName)}
	return &networkingv1.NetworkPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: networkingv1.SchemeGroupVersion.String(), Kind: "NetworkPolicy"},
		ObjectMeta: jobObjectMeta(id, id.JobName, sharedLabels(job, id.JobName)),
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: *own,
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress:     []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{PodSelector: own.DeepCopy()}}}},
		},
	}
}
