package executor_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/trainstep/trainstep/executor"
	"github.com/trainstep/trainstep/internal/testutil"
	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/frameworks/mpi"
	"github.com/trainstep/trainstep/pkg/logs"
	"github.com/trainstep/trainstep/pkg/result"
	"github.com/trainstep/trainstep/test/cluster"
)

const (
	ps        = v1alpha1.ReplicaTypePS
	worker    = v1alpha1.ReplicaTypeWorker
	chief     = v1alpha1.ReplicaTypeChief
	master    = v1alpha1.ReplicaTypeMaster
	launcher  = v1alpha1.ReplicaTypeLauncher
	evaluator = v1alpha1.ReplicaTypeEvaluator
)

func TestTensorFlowPSWorkerSucceedsOnWorker0AndCleansRunningPods(t *testing.T) {
	t.Parallel()
	c := cluster.Get(t)
	ns := c.Namespace(t)
	w0 := exitsAfter("2s", 0)
	w0[exitMessage] = `{"accuracy":0.91,"loss":0.2}`
	job := newJob("tf", v1alpha1.FrameworkTensorFlow).replicas(ps, 1, nil).replicas(worker, 2, w0)

	out := runJob(t, c, ns, job.yaml(t))

	if out.err != nil || out.res.Phase != result.PhaseSucceeded {
		t.Fatalf("run: phase %s, err %v; stderr:\n%s", out.res.Phase, out.err, out.stderr)
	}
	for name, want := range map[string]string{"phase": "Succeeded", "reason": "Succeeded", "job-name": "tf", "restarts": "0"} {
		if got := out.output(t, name); got != want {
			t.Errorf("output %s = %q, want %q", name, got, want)
		}
	}
	var metrics map[string]any
	if err := json.Unmarshal([]byte(out.output(t, "metrics.json")), &metrics); err != nil || metrics["accuracy"] != 0.91 {
		t.Errorf("metrics.json = %s (%v), want worker-0's termination message", out.output(t, "metrics.json"), err)
	}
	var replicas []result.ReplicaStatus
	if err := json.Unmarshal([]byte(out.output(t, "replicas.json")), &replicas); err != nil || len(replicas) != 3 {
		t.Errorf("replicas.json = %s, want 3 replicas", out.output(t, "replicas.json"))
	}
	if lines := strings.Split(strings.TrimSpace(out.stdout.String()), "\n"); len(lines) != 1 || !json.Valid([]byte(lines[0])) {
		t.Errorf("stdout must be exactly one JSON line, got %q", out.stdout.String())
	}
	// cleanPodPolicy Running (the TrainJob default): the PS was running and is
	// deleted; the succeeded workers stay. Worker 1 exits about when worker 0
	// does, so it may still have been running when worker 0's success ended
	// the job: then it is deleted too. The job's one Service (the per-job
	// layout, a TrainJob's default) went first: nothing dials a peer after
	// the end.
	pods := livePods(t, c, ns, "tf")
	if _, ok := pods["tf-ps-0"]; ok {
		t.Errorf("after the run: pods %v, want the PS deleted", keys(pods))
	}
	for _, r := range replicas {
		if r.Type != string(worker) {
			continue
		}
		name := fmt.Sprintf("tf-worker-%d", r.Index)
		if _, kept := pods[name]; kept != (r.Phase == string(corev1.PodSucceeded)) {
			t.Errorf("after the run: pods %v; %s ended the job %s, want it kept only if it had succeeded", keys(pods), name, r.Phase)
		}
	}
	if _, ok := pods["tf-worker-0"]; !ok {
		t.Errorf("after the run: pods %v, want worker 0's succeeded pod kept", keys(pods))
	}
	var services []string
	for _, svc := range listServices(t, c, ns, "tf") {
		if svc.DeletionTimestamp == nil {
			services = append(services, svc.Name)
		}
	}
	if len(services) != 0 {
		t.Errorf("after the run: Services %v, want none: the job's Service goes at its end", services)
	}
}

func TestTensorFlowChiefDecidesAndWorkersAreStopped(t *testing.T) {
	t.Parallel()
	c := cluster.Get(t)
	ns := c.Namespace(t)
	job := newJob("tfchief", v1alpha1.FrameworkTensorFlow).
		replicas(chief, 1, exitsAfter("2s", 0)).replicas(ps, 1, nil).replicas(worker, 2, nil)

	out := runJob(t, c, ns, job.yaml(t))

	if out.res.Phase != result.PhaseSucceeded {
		t.Fatalf("phase %s (%s); stderr:\n%s", out.res.Phase, out.res.Message, out.stderr)
	}
	if pods := livePods(t, c, ns, "tfchief"); len(pods) != 1 {
		t.Errorf("after the run: %v, want only the succeeded chief", keys(pods))
	}
}

func TestPyTorchMasterWorkersSucceed(t *testing.T) {
	t.Parallel()
	c := cluster.Get(t)
	ns := c.Namespace(t)
	job := newJob("pt", v1alpha1.FrameworkPyTorch).replicas(master, 1, exitsAfter("2s", 0)).replicas(worker, 2, nil)

	out := runJob(t, c, ns, job.yaml(t))

	if out.res.Phase != result.PhaseSucceeded {
		t.Fatalf("phase %s (%s); stderr:\n%s", out.res.Phase, out.res.Message, out.stderr)
	}
}

func TestMPILauncherWorkersCreateAndCleanHostfileAndSSHSecret(t *testing.T) {
	t.Parallel()
	c := cluster.Get(t)
	ns := c.Namespace(t)
	job := newJob("mpi", v1alpha1.FrameworkMPI).replicas(launcher, 1, exitsAfter("4s", 0)).replicas(worker, 2, nil).
		with(func(j *v1alpha1.TrainJob) {
			all := v1alpha1.CleanPodPolicyAll
			j.Spec.RunPolicy.CleanPodPolicy = &all
		})

	wait := startJob(t, c, ns, job.yaml(t))
	testutil.Eventually(t, time.Minute, "the hostfile ConfigMap and SSH Secret", func() (bool, error) {
		_, cmErr := c.Client.CoreV1().ConfigMaps(ns).Get(context.Background(), mpi.ConfigMapName("mpi"), metav1.GetOptions{})
		s, sErr := c.Client.CoreV1().Secrets(ns).Get(context.Background(), mpi.SSHSecretName("mpi"), metav1.GetOptions{})
		return cmErr == nil && sErr == nil && s.Type == corev1.SecretTypeSSHAuth, nil
	})
	out := wait()

	if out.res.Phase != result.PhaseSucceeded {
		t.Fatalf("phase %s (%s); stderr:\n%s", out.res.Phase, out.res.Message, out.stderr)
	}
	if pods := listPods(t, c, ns, "mpi"); len(pods) != 0 {
		t.Errorf("cleanPodPolicy All left pods %d", len(pods))
	}
	if svcs := listServices(t, c, ns, "mpi"); len(svcs) != 0 {
		t.Errorf("cleanPodPolicy All left services %d", len(svcs))
	}
	if _, err := c.Client.CoreV1().ConfigMaps(ns).Get(context.Background(), mpi.ConfigMapName("mpi"), metav1.GetOptions{}); err == nil {
		t.Error("the hostfile ConfigMap survived the job")
	}
	if _, err := c.Client.CoreV1().Secrets(ns).Get(context.Background(), mpi.SSHSecretName("mpi"), metav1.GetOptions{}); err == nil {
		t.Error("the SSH Secret survived the job")
	}
}

func TestJAXAndXGBoostSucceedByTheirRules(t *testing.T) {
	t.Parallel()
	c := cluster.Get(t)
	ns := c.Namespace(t)
	jax := newJob("jax", v1alpha1.FrameworkJAX).replicas(worker, 2, exitsAfter("2s", 0))
	xgb := newJob("xgb", v1alpha1.FrameworkXGBoost).replicas(master, 1, exitsAfter("2s", 0)).replicas(worker, 2, nil)

	for _, job := range []*jobBuilder{jax, xgb} {
		out := runJob(t, c, ns, job.yaml(t))
		if out.res.Phase != result.PhaseSucceeded {
			t.Errorf("%s: phase %s (%s); stderr:\n%s", job.job.Name, out.res.Phase, out.res.Message, out.stderr)
		}
	}
}

func TestRetryableExitRecreatesTheReplicaWithTheNextAttempt(t *testing.T) {
	t.Parallel()
	c := cluster.Get(t)
	ns := c.Namespace(t)
	job := newJob("retry", v1alpha1.FrameworkTensorFlow).replicas(worker, 2, nil).
		restartPolicy(worker, v1alpha1.RestartPolicyExitCode).perReplica()

	wait := startJob(t, c, ns, job.yaml(t))
	waitRunning(t, c, ns, "retry", 2)
	first := livePods(t, c, ns, "retry")["retry-worker-1"]
	patchAnnotations(t, c, ns, "retry-worker-1", map[string]string{exitAfter: "0s", exitCode: "137"})
	testutil.Eventually(t, time.Minute, "worker-1 recreated with attempt 1", func() (bool, error) {
		p, ok := livePods(t, c, ns, "retry")["retry-worker-1"]
		return ok && p.UID != first.UID && p.Labels[v1alpha1.LabelAttempt] == "1" && p.Status.Phase == corev1.PodRunning, nil
	})
	patchAnnotations(t, c, ns, "retry-worker-0", map[string]string{exitAfter: "0s", exitCode: "0"})
	out := wait()

	if out.res.Phase != result.PhaseSucceeded || out.res.Restarts != 1 {
		t.Fatalf("phase %s restarts %d (%s), want Succeeded with 1 restart; stderr:\n%s", out.res.Phase, out.res.Restarts, out.res.Message, out.stderr)
	}
}

func TestRetryableExitCodesAreRetried(t *testing.T) {
	t.Parallel()
	c := cluster.Get(t)
	ns := c.Namespace(t)
	job := newJob("codes", v1alpha1.FrameworkTensorFlow).replicas(worker, 2, nil).
		restartPolicy(worker, v1alpha1.RestartPolicyExitCode, 75).perReplica()

	wait := startJob(t, c, ns, job.yaml(t))
	waitRunning(t, c, ns, "codes", 2)
	patchAnnotations(t, c, ns, "codes-worker-1", map[string]string{exitAfter: "0s", exitCode: "75"})
	testutil.Eventually(t, time.Minute, "worker-1 recreated after exit 75", func() (bool, error) {
		p, ok := livePods(t, c, ns, "codes")["codes-worker-1"]
		return ok && p.Labels[v1alpha1.LabelAttempt] == "1", nil
	})
	patchAnnotations(t, c, ns, "codes-worker-0", map[string]string{exitAfter: "0s", exitCode: "0"})
	if out := wait(); out.res.Phase != result.PhaseSucceeded {
		t.Fatalf("phase %s (%s)", out.res.Phase, out.res.Message)
	}
}

func TestPermanentExitFailsTheJobAndStopsEveryOtherReplica(t *testing.T) {
	t.Parallel()
	c := cluster.Get(t)
	ns := c.Namespace(t)
	job := newJob("perm", v1alpha1.FrameworkTensorFlow).replicas(ps, 1, nil).replicas(worker, 3, nil)

	wait := startJob(t, c, ns, job.yaml(t))
	waitRunning(t, c, ns, "perm", 4)
	patchAnnotations(t, c, ns, "perm-worker-1", map[string]string{exitAfter: "0s", exitCode: "1"})
	out := wait()

	if out.res.Phase != result.PhaseFailed || out.res.Reason != result.ReasonReplicaFailed || out.res.Phase.ExitCode() != 10 {
		t.Fatalf("phase %s reason %s, want Failed/ReplicaFailed (exit 10)", out.res.Phase, out.res.Reason)
	}
	// Checked as soon as the run returned: the others are already gone.
	pods := livePods(t, c, ns, "perm")
	if len(pods) != 1 || pods["perm-worker-1"].Status.Phase != corev1.PodFailed {
		t.Errorf("after the failure: %v, want only the failed worker-1", keys(pods))
	}
}

func TestBackoffLimitCountsRecreations(t *testing.T) {
	t.Parallel()
	c := cluster.Get(t)
	ns := c.Namespace(t)
	// Every evaluator instance dies with 137 one second after it runs.
	job := newJob("backoff", v1alpha1.FrameworkTensorFlow).replicas(worker, 1, nil).
		replicas(evaluator, 1, exitsAfter("1s", 137)).restartPolicy(evaluator, v1alpha1.RestartPolicyExitCode).
		with(func(j *v1alpha1.TrainJob) { two := int32(2); j.Spec.RunPolicy.BackoffLimit = &two })

	out := runJob(t, c, ns, job.yaml(t))

	if out.res.Phase != result.PhaseFailed || out.res.Reason != result.ReasonBackoffLimitExceeded {
		t.Fatalf("phase %s reason %s (%s), want Failed/BackoffLimitExceeded", out.res.Phase, out.res.Reason, out.res.Message)
	}
	if out.res.Restarts != 2 {
		t.Errorf("restarts = %d, want the 2 recreations made before the third failure", out.res.Restarts)
	}
}

func TestInPlaceRestartsCountTowardBackoffLimit(t *testing.T) {
	t.Parallel()
	c := cluster.Get(t)
	ns := c.Namespace(t)
	flaky := map[string]string{exitAfter: "1s", exitCode: "1", exitTimes: "2"}
	build := func(name string, limit int32, workerExit map[string]string) []byte {
		return newJob(name, v1alpha1.FrameworkTensorFlow).
			replicas(ps, 1, flaky).restartPolicy(ps, v1alpha1.RestartPolicyOnFailure).
			replicas(worker, 1, workerExit).
			with(func(j *v1alpha1.TrainJob) { j.Spec.RunPolicy.BackoffLimit = &limit }).yaml(t)
	}

	tight := runJob(t, c, ns, build("inplace1", 1, nil))
	if tight.res.Reason != result.ReasonBackoffLimitExceeded {
		t.Errorf("backoffLimit 1 with 2 in-place restarts: %s/%s (%s), want BackoffLimitExceeded", tight.res.Phase, tight.res.Reason, tight.res.Message)
	}
	enough := runJob(t, c, ns, build("inplace2", 2, exitsAfter("8s", 0)))
	if enough.res.Phase != result.PhaseSucceeded || enough.res.Restarts != 2 {
		t.Errorf("backoffLimit 2 with 2 in-place restarts: %s restarts %d (%s), want Succeeded with restarts 2", enough.res.Phase, enough.res.Restarts, enough.res.Message)
	}
}

func TestElasticPyTorchSurvivesLosingAWorkerAboveMinReplicas(t *testing.T) {
	t.Parallel()
	c := cluster.Get(t)
	ns := c.Namespace(t)
	job := newJob("elastic", v1alpha1.FrameworkPyTorch).replicas(worker, 3, nil).
		with(func(j *v1alpha1.TrainJob) {
			minR, maxR := int32(2), int32(3)
			j.Spec.ElasticPolicy = &v1alpha1.ElasticPolicy{MinReplicas: &minR, MaxReplicas: &maxR}
		}).restartPolicy(worker, v1alpha1.RestartPolicyNever)

	log, record := recordLog()
	wait := startJob(t, c, ns, job.yaml(t), record)
	waitRunning(t, c, ns, "elastic", 3)
	at := log.waitLine(t, time.Minute, 0, "worker 3/3 running")
	patchAnnotations(t, c, ns, "elastic-worker-2", map[string]string{exitAfter: "0s", exitCode: "1"})
	// trainstep decides on a sync's view before it logs that sync's
	// progress: once it shows the loss, the decision on it was taken.
	log.waitLine(t, time.Minute, at, "worker 2/3 running")
	if pods := livePods(t, c, ns, "elastic"); pods["elastic-worker-0"].Status.Phase != corev1.PodRunning {
		t.Fatalf("after worker-2 failed: %v, want worker-0 still Running", phases(pods))
	}
	patchAnnotations(t, c, ns, "elastic-worker-0", map[string]string{exitAfter: "0s", exitCode: "0"})
	if out := wait(); out.res.Phase != result.PhaseSucceeded {
		t.Fatalf("phase %s/%s (%s), want Succeeded: losing one of three workers, above minReplicas 2, must not end the job", out.res.Phase, out.res.Reason, out.res.Message)
	}
}

// phases names each pod with its phase.
func phases(pods map[string]corev1.Pod) []string {
	var out []string
	for name, p := range pods {
		out = append(out, name+"="+string(p.Status.Phase))
	}
	slices.Sort(out)
	return out
}

func TestStuckImagePullFailsAfterTheStuckTimeout(t *testing.T) {
	t.Parallel()
	c := cluster.Get(t)
	ns := c.Namespace(t)
	job := newJob("stuck", v1alpha1.FrameworkTensorFlow).replicas(ps, 1, map[string]string{waitReason: "ImagePullBackOff"}).replicas(worker, 1, nil)

	start := time.Now()
	out := runJob(t, c, ns, job.yaml(t), func(c *executor.Config) { c.StuckTimeout = 3 * time.Second })

	if out.res.Phase != result.PhaseFailed || out.res.Reason != "ImagePullBackOff" {
		t.Fatalf("phase %s reason %s (%s), want Failed/ImagePullBackOff", out.res.Phase, out.res.Reason, out.res.Message)
	}
	if time.Since(start) < 3*time.Second {
		t.Errorf("failed before the stuck timeout")
	}
}

func TestActiveDeadlineFailsAndRemovesEveryReplica(t *testing.T) {
	t.Parallel()
	c := cluster.Get(t)
	ns := c.Namespace(t)
	job := newJob("deadline", v1alpha1.FrameworkTensorFlow).replicas(ps, 1, nil).replicas(worker, 2, nil).
		with(func(j *v1alpha1.TrainJob) { s := int64(4); j.Spec.RunPolicy.ActiveDeadlineSeconds = &s })

	out := runJob(t, c, ns, job.yaml(t))

	if out.res.Phase != result.PhaseFailed || out.res.Reason != result.ReasonDeadlineExceeded {
		t.Fatalf("phase %s reason %s, want Failed/DeadlineExceeded", out.res.Phase, out.res.Reason)
	}
	if pods := livePods(t, c, ns, "deadline"); len(pods) != 0 {
		t.Errorf("replicas left after the deadline: %v", keys(pods))
	}
}

func TestOverridesReachTheRenderedPods(t *testing.T) {
	t.Parallel()
	c := cluster.Get(t)
	ns := c.Namespace(t)
	job := newJob("override", v1alpha1.FrameworkTensorFlow).replicas(worker, 1, exitsAfter("3s", 0))

	out := runJob(t, c, ns, job.yaml(t), func(cfg *executor.Config) {
		cfg.SpecOptions.Sets = []string{"spec.replicaSpecs.Worker.replicas=3"}
		cfg.SpecOptions.Envs = []string{"LEARNING_RATE=0.01"}
		cfg.SpecOptions.Images = []string{"Worker=registry.example/train:2"}
		cfg.SpecOptions.Args = []string{"--epochs=2"}
	})

	if out.res.Phase != result.PhaseSucceeded {
		t.Fatalf("phase %s (%s)", out.res.Phase, out.res.Message)
	}
	pods := livePods(t, c, ns, "override")
	if len(pods) != 3 {
		t.Fatalf("--set replicas=3 gave %d worker pods", len(pods))
	}
	main := pods["override-worker-2"].Spec.Containers[0]
	if main.Image != "registry.example/train:2" || !containsEnv(main.Env, "LEARNING_RATE", "0.01") || !contains(main.Args, "--epochs=2") {
		t.Errorf("overrides missing from worker-2: image %s args %v", main.Image, main.Args)
	}
}

func TestBadSetPathIsInvalidAndCreatesNothing(t *testing.T) {
	t.Parallel()
	c := cluster.Get(t)
	ns := c.Namespace(t)
	job := newJob("badset", v1alpha1.FrameworkTensorFlow).replicas(worker, 1, nil)

	out := runJob(t, c, ns, job.yaml(t), func(cfg *executor.Config) {
		cfg.SpecOptions.Sets = []string{"spec.replicaSpecs.Worker.replicas.deeper=3"}
	})

	if out.res.Phase.ExitCode() != result.ExitInvalid || !strings.Contains(out.res.Message, "spec.replicaSpecs.Worker.replicas") {
		t.Fatalf("phase %s message %q, want Invalid naming the path", out.res.Phase, out.res.Message)
	}
	if out.output(t, "phase") != "Invalid" {
		t.Errorf("phase output %q", out.output(t, "phase"))
	}
	if pods := listPods(t, c, ns, "badset"); len(pods) != 0 {
		t.Errorf("an invalid run created %d pods", len(pods))
	}
}

func TestLogsEventsAndProgress(t *testing.T) {
	t.Parallel()
	c := cluster.Get(t)
	ns := c.Namespace(t)
	owner := ownerPod(t, c, ns, "step")
	c.SetLogs(t, ns, "logs-worker-0", "tensorflow", "epoch 1 loss 0.5\nepoch 2 loss 0.25\n")
	c.SetLogs(t, ns, "logs-ps-0", "tensorflow", "ps serving\n")
	job := newJob("logs", v1alpha1.FrameworkTensorFlow).replicas(ps, 1, nil).replicas(worker, 1, exitsAfter("4s", 0))
	progress := t.TempDir() + "/progress"

	out := runJob(t, c, ns, job.yaml(t), func(cfg *executor.Config) {
		cfg.OwnerPod, cfg.OwnerUID = owner.Name, string(owner.UID)
		cfg.ProgressFile = progress
	})

	if out.res.Phase != result.PhaseSucceeded {
		t.Fatalf("phase %s (%s)", out.res.Phase, out.res.Message)
	}
	stderr := out.stderr.String()
	if !strings.Contains(stderr, "[worker-0] epoch 2 loss 0.25") {
		t.Errorf("the leader's log lines are missing from stderr:\n%s", stderr)
	}
	if strings.Contains(stderr, "[ps-0]") {
		t.Errorf("--logs=leaders streamed the PS:\n%s", stderr)
	}
	if b, err := readFile(progress); err != nil || !regexp.MustCompile(`^\d+/2$`).MatchString(b) {
		t.Errorf("progress file = %q (%v), want N/2", b, err)
	}
	testutil.Eventually(t, 30*time.Second, "Created and Succeeded events on the owner", func() (bool, error) {
		events, err := c.Client.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{FieldSelector: "involvedObject.name=step"})
		if err != nil {
			return false, err
		}
		reasons := map[string]bool{}
		for _, e := range events.Items {
			reasons[e.Reason] = true
		}
		return reasons["Created"] && reasons["Succeeded"], nil
	})

}

func TestLogModesAllAndNone(t *testing.T) {
	t.Parallel()
	c := cluster.Get(t)
	ns := c.Namespace(t)
	for _, mode := range []string{"all", "none"} {
		name := "logs" + mode
		c.SetLogs(t, ns, name+"-worker-0", "tensorflow", "worker says hi\n")
		c.SetLogs(t, ns, name+"-ps-0", "tensorflow", "ps says hi\n")
		job := newJob(name, v1alpha1.FrameworkTensorFlow).replicas(ps, 1, nil).replicas(worker, 1, exitsAfter("4s", 0))
		out := runJob(t, c, ns, job.yaml(t), func(cfg *executor.Config) { cfg.Logs = logs.Mode(mode) })
		if out.res.Phase != result.PhaseSucceeded {
			t.Fatalf("%s: phase %s (%s)", mode, out.res.Phase, out.res.Message)
		}
		stderr := out.stderr.String()
		gotWorker, gotPS := strings.Contains(stderr, "[worker-0] worker says hi"), strings.Contains(stderr, "[ps-0] ps says hi")
		if want := mode == "all"; gotWorker != want || gotPS != want {
			t.Errorf("--logs=%s: worker lines %v, ps lines %v; stderr:\n%s", mode, gotWorker, gotPS, stderr)
		}
	}
}

func readFile(path string) (string, error) {
	b, err := os.ReadFile(path)
	return string(b), err
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func containsEnv(env []corev1.EnvVar, name, value string) bool {
	for _, e := range env {
		if e.Name == name && e.Value == value {
			return true
		}
	}
	return false
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
