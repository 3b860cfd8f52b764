package argo_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"

	"github.com/trainstep/trainstep/internal/testutil"
	"github.com/trainstep/trainstep/test/cluster"
)

// applyAdmissionPolicy creates deploy/admission's ValidatingAdmissionPolicy and binding
// as shipped, but named after ns and bound to ns only, so that tests running beside this
// one in the shared cluster are not held to it.
func applyAdmissionPolicy(t *testing.T, c *cluster.Cluster, ns string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot(t), "deploy", "admission", "validatingadmissionpolicy.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	decoder := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var policy admissionv1.ValidatingAdmissionPolicy
	var binding admissionv1.ValidatingAdmissionPolicyBinding
	if err := decoder.Decode(&policy); err != nil {
		t.Fatalf("reading the policy: %v", err)
	}
	if err := decoder.Decode(&binding); err != nil {
		t.Fatalf("reading the binding: %v", err)
	}
	policy.Name = "trainstep-step-" + ns
	binding.Name, binding.Spec.PolicyName = policy.Name, policy.Name
	binding.Spec.MatchResources = &admissionv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
		MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}}}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	admission := c.Client.AdmissionregistrationV1()
	if _, err := admission.ValidatingAdmissionPolicies().Create(ctx, &policy, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating the ValidatingAdmissionPolicy: %v", err)
	}
	if _, err := admission.ValidatingAdmissionPolicyBindings().Create(ctx, &binding, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating the binding: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = admission.ValidatingAdmissionPolicyBindings().Delete(ctx, binding.Name, metav1.DeleteOptions{})
		_ = admission.ValidatingAdmissionPolicies().Delete(ctx, policy.Name, metav1.DeleteOptions{})
	})
}

// The admission policy docs/security.md recommends holds the step's ServiceAccount to
// trainstep's rules in the API server itself: host namespaces, hostPath, privileged
// containers and other ServiceAccounts are refused, so are changes to pods that are not a
// job's and to any pod's image, and Leases of other names; a replica as trainstep renders
// it, and the Lease of a job, pass.
func TestAdmissionPolicyHoldsTheStepsServiceAccount(t *testing.T) {
	t.Parallel()
	c := cluster.Get(t)
	ns := c.Namespace(t)
	applyDeploy(t, c, ns)
	applyAdmissionPolicy(t, c, ns)
	step := kubernetes.NewForConfigOrDie(c.ConfigForToken(c.ServiceAccountToken(t, ns, serviceAccountName)))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	pod := func(name string, labelled bool, edit func(*corev1.PodSpec)) *corev1.Pod {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "example.com/train:1"}}},
		}
		if labelled {
			p.Labels = map[string]string{"trainstep.dev/job-name": "j"}
		}
		if edit != nil {
			edit(&p.Spec)
		}
		return p
	}
	// The policy is compiled after it is created: wait until it refuses.
	testutil.Eventually(t, time.Minute, "the policy refusing a hostNetwork pod", func(ctx context.Context) (bool, error) {
		_, err := step.CoreV1().Pods(ns).Create(ctx, pod("probe", true, func(s *corev1.PodSpec) { s.HostNetwork = true }), metav1.CreateOptions{})
		if err == nil {
			_ = step.CoreV1().Pods(ns).Delete(ctx, "probe", metav1.DeleteOptions{})
			return false, nil
		}
		return strings.Contains(err.Error(), "may not use the host's network"), nil
	})

	privileged := true
	refused := map[string]*corev1.Pod{
		"host's PID namespace": pod("pid", true, func(s *corev1.PodSpec) { s.HostPID = true }),
		"hostPath volume": pod("hostpath", true, func(s *corev1.PodSpec) {
			s.Volumes = []corev1.Volume{{Name: "root", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}}}
		}),
		"may not be privileged": pod("privileged", true, func(s *corev1.PodSpec) {
			s.InitContainers = []corev1.Container{{Name: "init", Image: "example.com/init:1", SecurityContext: &corev1.SecurityContext{Privileged: &privileged}}}
		}),
		"allowed ServiceAccount": pod("sa", true, func(s *corev1.PodSpec) { s.ServiceAccountName = serviceAccountName }),
	}
	for want, p := range refused {
		if _, err := step.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("pod %s: %v, want refused with %q", p.Name, err, want)
		}
	}

	if _, err := step.CoreV1().Pods(ns).Create(ctx, pod("replica", true, nil), metav1.CreateOptions{}); err != nil {
		t.Fatalf("a replica as trainstep renders it: %v", err)
	}
	if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, pod("web", false, nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	patch := func(name, body string) error {
		_, err := step.CoreV1().Pods(ns).Patch(ctx, name, types.StrategicMergePatchType, []byte(body), metav1.PatchOptions{})
		return err
	}
	if err := patch("replica", `{"metadata":{"annotations":{"re-attached":"yes"}}}`); err != nil {
		t.Errorf("patching a job's pod: %v", err)
	}
	if err := patch("web", `{"metadata":{"annotations":{"x":"y"}}}`); err == nil || !strings.Contains(err.Error(), "only the pods of its own jobs") {
		t.Errorf("patching a pod that is no job's: %v, want refused", err)
	}
	if err := patch("replica", `{"spec":{"containers":[{"name":"main","image":"example.com/evil:1"}]}}`); err == nil || !strings.Contains(err.Error(), "never changes a running pod's image") {
		t.Errorf("changing a replica's image: %v, want refused", err)
	}

	lease := func(name string) error {
		_, err := step.CoordinationV1().Leases(ns).Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
		return err
	}
	if err := lease("trainstep-j"); err != nil {
		t.Errorf("the job's Lease: %v", err)
	}
	if err := lease("kube-scheduler"); err == nil || !strings.Contains(err.Error(), "Leases are named trainstep-<job>") {
		t.Errorf("a Lease of another name: %v, want refused", err)
	}
}
