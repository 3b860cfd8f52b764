package executor_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/trainstep/trainstep/internal/testutil"
	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/frameworks/mpi"
	"github.com/trainstep/trainstep/pkg/frameworks/tensorflow"
	"github.com/trainstep/trainstep/pkg/result"
	"github.com/trainstep/trainstep/test/cluster"
)

// killedThenRerun starts a run of job owned by a first step pod, waits for
// its n replicas to run, kills it (no teardown), lets exit end replica
// while no step runs, and starts a second run owned by another step pod.
// It returns the second run and the UIDs of the pods it found.
func killedThenRerun(t *testing.T, c *cluster.Cluster, ns, name string, job *jobBuilder, n int, replica, code string) (*process, map[string]string) {
	t.Helper()
	file := writeFile(t, job.yaml(t))
	args := func(o *corev1.Pod) []string {
		return []string{"run", "-f", file, "--kubeconfig", c.Kubeconfig, "-n", ns, "--owner-pod", o.Name, "--owner-uid", string(o.UID), "--lease-duration", "3s"}
	}
	first := startBinary(t, args(ownerPod(t, c, ns, "step-1"))...)
	waitRunning(t, c, ns, name, n)
	_ = first.cmd.Process.Kill()
	first.wait(t, 10*time.Second)
	patchAnnotations(t, c, ns, replica, map[string]string{exitAfter: "0s", exitCode: code})
	testutil.Eventually(t, time.Minute, replica+" to fail while no step runs", func() (bool, error) {
		p, ok := livePods(t, c, ns, name)[replica]
		return ok && p.Status.Phase == corev1.PodFailed, nil
	})
	found := map[string]string{}
	for name, p := range livePods(t, c, ns, name) {
		found[name] = string(p.UID)
	}
	return startBinary(t, args(ownerPod(t, c, ns, "step-2"))...), found
}

// A worker that exits 1 (restartPolicy Never) while no step runs fails the
// job when the next step re-attaches: the failure policy judges what ended
// while nobody watched, it is not replaced in silence.
func TestAWorkerThatFailedWhileNoStepRanFailsTheJob(t *testing.T) {
	t.Parallel()
	c := cluster.Get(t)
	ns := c.Namespace(t)
	job := newJob("away", v1alpha1.FrameworkTensorFlow).replicas(ps, 1, nil).replicas(worker, 2, nil).
		restartPolicy(worker, v1alpha1.RestartPolicyNever)
	second, _ := killedThenRerun(t, c, ns, "away", job, 3, "away-worker-1", "1")
	if code := second.wait(t, time.Minute); code != result.ExitFailed {
		t.Fatalf("the re-attached run exited %d, want %d; stderr:\n%s", code, result.ExitFailed, second.stderr)
	}
	if reason := readOutput(t, second.outputsDir, "reason"); reason != result.ReasonReplicaFailed {
		t.Errorf("reason %q, want %s", reason, result.ReasonReplicaFailed)
	}
	if r := readOutput(t, second.outputsDir, "restarts"); r != "0" {
		t.Errorf("restarts %q, want 0", r)
	}
}

// A rank of a job that restarts as a whole, killed while no step runs: the
// next step restarts every replica at the next job attempt and counts one
// restart, instead of replacing the rank alone beside its stuck peers.
func TestARankKilledWhileNoStepRanRestartsTheWholeJob(t *testing.T) {
	t.Parallel()
	c := cluster.Get(t)
	ns := c.Namespace(t)
	job := newJob("ddpaway", v1alpha1.FrameworkPyTorch).replicas(v1alpha1.ReplicaTypeMaster, 1, nil).replicas(worker, 2, nil).
		restartPolicy(worker, v1alpha1.RestartPolicyExitCode).restartPolicy(v1alpha1.ReplicaTypeMaster, v1alpha1.RestartPolicyExitCode).
		with(func(j *v1alpha1.TrainJob) { limit := int32(3); j.Spec.RunPolicy.BackoffLimit = &limit })
	second, before := killedThenRerun(t, c, ns, "ddpaway", job, 3, "ddpaway-worker-1", "137")
	testutil.Eventually(t, time.Minute, "every replica running again at job attempt 1", func() (bool, error) {
		pods := livePods(t, c, ns, "ddpaway")
		for name, p := range pods {
			if string(p.UID) == before[name] || p.Labels[v1alpha1.LabelJobAttempt] != "1" || p.Status.Phase != corev1.PodRunning {
				return false, nil
			}
		}
		return len(pods) == 3, nil
	})
	patchAnnotations(t, c, ns, "ddpaway-master-0", map[string]string{exitAfter: "0s", exitCode: "0"})
	if code := second.wait(t, time.Minute); code != 0 {
		t.Fatalf("the re-attached run exited %d, want 0; stderr:\n%s", code, second.stderr)
	}
	if r := readOutput(t, second.outputsDir, "restarts"); r != "1" {
		t.Errorf("restarts %q, want 1: the killed rank's restart, counted once", r)
	}
}

// A ConfigMap named like a TensorFlow job's TF_CONFIG cluster, and a
// Secret named like an MPI job's SSH Secret, that the job did not make:
// the run ends Invalid naming them, creates nothing, and deletes nothing.
func TestObjectsInTheJobsWayAreNeitherUsedNorDeleted(t *testing.T) {
	t.Parallel()
	c := cluster.Get(t)
	ns := c.Namespace(t)
	ctx := context.Background()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: tensorflow.ClusterConfigMapName("foo")}, Data: map[string]string{"cluster": "planted"}}
	if _, err := c.Client.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: mpi.SSHSecretName("github-deploy")},
		Data: map[string][]byte{corev1.SSHAuthPrivateKey: []byte("the team's deploy key")}}
	if _, err := c.Client.CoreV1().Secrets(ns).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		job  *jobBuilder
		name string
	}{
		{newJob("foo", v1alpha1.FrameworkTensorFlow).replicas(ps, 1, nil).replicas(worker, 2, nil), "configmap foo-tf-cluster (no trainstep.dev/job-name label"},
		{newJob("github-deploy", v1alpha1.FrameworkMPI).replicas(v1alpha1.ReplicaTypeLauncher, 1, nil).replicas(worker, 2, nil), "secret github-deploy-ssh (no trainstep.dev/job-name label"},
	} {
		out := runJob(t, c, ns, tc.job.yaml(t))
		if out.res.Phase != result.PhaseInvalid || out.res.Reason != result.ReasonNotOwned || !strings.Contains(out.res.Message, tc.name) {
			t.Errorf("%s: %s/%s %q, want Invalid %s naming %s", tc.job.job.Name, out.res.Phase, out.res.Reason, out.res.Message, result.ReasonNotOwned, tc.name)
		}
		if pods := listPods(t, c, ns, tc.job.job.Name); len(pods) != 0 {
			t.Errorf("%s: %d pods left, want none", tc.job.job.Name, len(pods))
		}
	}
	if got, err := c.Client.CoreV1().ConfigMaps(ns).Get(ctx, cm.Name, metav1.GetOptions{}); err != nil || got.Data["cluster"] != "planted" || got.Labels != nil {
		t.Errorf("the ConfigMap after the runs: %v, %v; want it untouched", got, err)
	}
	if got, err := c.Client.CoreV1().Secrets(ns).Get(ctx, secret.Name, metav1.GetOptions{}); err != nil || string(got.Data[corev1.SSHAuthPrivateKey]) != "the team's deploy key" {
		t.Errorf("the Secret after the runs: %v, %v; want it untouched", got, err)
	}
}
