package executor_test

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/trainstep/trainstep/executor"
	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/result"
	"github.com/trainstep/trainstep/test/cluster"
)

// TestAPodTheNamespaceRefusesIsInvalidAndCreatesNothing: in a namespace that enforces
// PodSecurity restricted, a job whose replicas ask for nothing of the profile ends Invalid
// (exit 11) at once, with the API server's reasons, before any of its objects exists,
// rather than Transient after --api-timeout of refused pod creates; the same job with a
// restricted-ready pod template runs to the end.
func TestAPodTheNamespaceRefusesIsInvalidAndCreatesNothing(t *testing.T) {
	t.Parallel()
	c := cluster.Get(t)
	ns := c.Namespace(t)
	c.EnforceRestricted(t, ns)

	job := newJob("refused", v1alpha1.FrameworkTensorFlow).replicas(worker, 2, exitsAfter("2s", 0))
	start := time.Now()
	out := runJob(t, c, ns, job.yaml(t), func(cfg *executor.Config) { cfg.APITimeout = time.Minute })
	if out.res.Phase.ExitCode() != result.ExitInvalid || !strings.Contains(out.res.Message, `violates PodSecurity "restricted:latest"`) ||
		!strings.Contains(out.res.Message, "refused-worker-0") {
		t.Fatalf("phase %s reason %s message %q, want Invalid (exit 11) naming the pod and PodSecurity's refusal", out.res.Phase, out.res.Reason, out.res.Message)
	}
	if took := time.Since(start); took > 30*time.Second {
		t.Errorf("took %s: the refusal was retried", took)
	}
	checkNothingOfTheJob(t, c, ns, "refused")

	nonRoot, escalate := true, false
	ready := newJob("admitted", v1alpha1.FrameworkTensorFlow).replicas(worker, 2, exitsAfter("2s", 0)).with(func(j *v1alpha1.TrainJob) {
		spec := &j.Spec.ReplicaSpecs[worker].Template.Spec
		spec.SecurityContext = &corev1.PodSecurityContext{RunAsNonRoot: &nonRoot,
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}}
		spec.Containers[0].SecurityContext = &corev1.SecurityContext{AllowPrivilegeEscalation: &escalate,
			Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}}
	})
	if out := runJob(t, c, ns, ready.yaml(t)); out.res.Phase != result.PhaseSucceeded {
		t.Fatalf("restricted-ready job: phase %s reason %s message %q, want Succeeded", out.res.Phase, out.res.Reason, out.res.Message)
	}
}
