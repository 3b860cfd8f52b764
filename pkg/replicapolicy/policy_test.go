package replicapolicy

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
)

func jobWithWorker(pod corev1.PodSpec) *v1alpha1.TrainJob {
	return &v1alpha1.TrainJob{
		ObjectMeta: metav1.ObjectMeta{Name: "j"},
		Spec: v1alpha1.TrainJobSpec{
			Framework: v1alpha1.FrameworkJAX,
			ReplicaSpecs: map[v1alpha1.ReplicaType]*v1alpha1.ReplicaSpec{
				v1alpha1.ReplicaTypeWorker: {Template: corev1.PodTemplateSpec{Spec: pod}},
			},
		},
	}
}

// The fields the CLI tests do not reach: ephemeral containers, the
// deprecated serviceAccount alias, capabilities spelled CAP_x or in lower
// case; and what a pod that asks for nothing gets: no error.
func TestCheckNamesEveryForbiddenField(t *testing.T) {
	privileged := true
	pod := corev1.PodSpec{
		DeprecatedServiceAccount: "trainstep",
		Containers: []corev1.Container{{Name: "jax", SecurityContext: &corev1.SecurityContext{
			Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"cap_sys_ptrace", "CAP_NET_BIND_SERVICE"}}}}},
		EphemeralContainers: []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{
			Name: "debug", SecurityContext: &corev1.SecurityContext{Privileged: &privileged}}}},
	}
	var got []string
	for _, e := range Check(jobWithWorker(pod), Policy{}) {
		got = append(got, e.Field)
	}
	const p = "spec.replicaSpecs.Worker.template.spec."
	want := []string{p + "serviceAccount", p + "containers[0].securityContext.capabilities.add[0]", p + "ephemeralContainers[0].securityContext.privileged"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("refused fields (-want +got):\n%s", diff)
	}
	if errs := Check(jobWithWorker(pod), Policy{AllowPrivileged: true, ServiceAccounts: []string{"trainstep"}}); len(errs) != 0 {
		t.Errorf("allowed by the policy, still refused: %v", errs)
	}
	if errs := Check(jobWithWorker(corev1.PodSpec{Containers: []corev1.Container{{Name: "jax"}}}), Policy{}); len(errs) != 0 {
		t.Errorf("a plain pod is refused: %v", errs)
	}
}
