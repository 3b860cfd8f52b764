package executor_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/trainstep/trainstep/internal/testutil"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	"github.com/trainstep/trainstep/executor"
	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/result"
	"github.com/trainstep/trainstep/test/cluster"
)

// KWOK Stage annotations of the test cluster.
const (
	exitAfter   = cluster.AnnotationExitAfter
	exitCode    = cluster.AnnotationExitCode
	exitMessage = cluster.AnnotationTerminationMessage
	exitTimes   = cluster.AnnotationExitTimes
	waitReason  = cluster.AnnotationWaitingReason
)

// jobBuilder builds TrainJob manifests for tests.
type jobBuilder struct{ job v1alpha1.TrainJob }

func newJob(name string, fw v1alpha1.Framework) *jobBuilder {
	return &jobBuilder{job: v1alpha1.TrainJob{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.APIVersion, Kind: v1alpha1.Kind},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       v1alpha1.TrainJobSpec{Framework: fw, ReplicaSpecs: map[v1alpha1.ReplicaType]*v1alpha1.ReplicaSpec{}},
	}}
}

// replicas adds n replicas of type t; annotations go on the pod template.
func (b *jobBuilder) replicas(t v1alpha1.ReplicaType, n int32, annotations map[string]string) *jobBuilder {
	container := testutil.ContainerName(b.job.Spec.Framework)
	if container == "" {
		container = "main"
	}
	b.job.Spec.ReplicaSpecs[t] = &v1alpha1.ReplicaSpec{
		Replicas: &n,
		Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Annotations: annotations},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{
				Name: container, Image: "registry.example/train:1", Command: []string{"python", "train.py"},
			}}},
		},
	}
	return b
}

func (b *jobBuilder) restartPolicy(t v1alpha1.ReplicaType, p v1alpha1.RestartPolicy, retryable ...int32) *jobBuilder {
	b.job.Spec.ReplicaSpecs[t].RestartPolicy = p
	b.job.Spec.ReplicaSpecs[t].RetryableExitCodes = retryable
	return b
}

// perReplica makes a failure restart the failed replica alone (the
// default of a workers-only TensorFlow job is to restart the whole job).
func (b *jobBuilder) perReplica() *jobBuilder {
	b.job.Spec.RunPolicy.FailurePolicy = &v1alpha1.FailurePolicy{Restart: v1alpha1.FailureRestartReplica}
	return b
}

func (b *jobBuilder) with(f func(*v1alpha1.TrainJob)) *jobBuilder {
	f(&b.job)
	return b
}

func (b *jobBuilder) yaml(t testing.TB) []byte {
	t.Helper()
	out, err := yaml.Marshal(b.job)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func exitsAfter(d string, code int) map[string]string {
	return map[string]string{exitAfter: d, exitCode: fmt.Sprint(code)}
}

// runOutcome is what one in-process run produced.
type runOutcome struct {
	res        result.Result
	err        error
	stdout     *testutil.SyncBuffer
	stderr     *testutil.SyncBuffer
	outputsDir string
}

func (o runOutcome) output(t testing.TB, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(o.outputsDir, name))
	if err != nil {
		t.Fatalf("output file %s: %v", name, err)
	}
	return string(b)
}

// testIdentity is the owner identity of a test's runs (--identity): the
// runs of one test re-attach to each other's objects, as the retries of a
// workflow step do; a test that plays another workflow gives its own.
func testIdentity(t testing.TB) string { return "test/" + t.Name() }

func hasFlag(args []string, name string) bool {
	for _, a := range args {
		if a == name || strings.HasPrefix(a, name+"=") {
			return true
		}
	}
	return false
}

// baseConfig is how the tests run the executor against the test cluster.
func baseConfig(t testing.TB, c *cluster.Cluster, ns string, manifest []byte) executor.Config {
	return executor.Config{
		Identity:         testIdentity(t),
		Spec:             manifest,
		Kubeconfig:       c.Kubeconfig,
		PodNamespace:     ns,
		QPS:              200,
		Burst:            400,
		OutputsDir:       t.TempDir(),
		APITimeout:       30 * time.Second,
		TerminationGrace: 30 * time.Second,
		Logger:           zaptest.NewLogger(t),
	}
}

// runJob runs the executor in-process to the job's end.
func runJob(t testing.TB, c *cluster.Cluster, ns string, manifest []byte, edits ...func(*executor.Config)) runOutcome {
	t.Helper()
	cfg := baseConfig(t, c, ns, manifest)
	for _, e := range edits {
		e(&cfg)
	}
	stdout, stderr := &testutil.SyncBuffer{}, &testutil.SyncBuffer{}
	cfg.Stdout, cfg.Stderr = stdout, stderr
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	res, err := executor.Run(ctx, cfg)
	return runOutcome{res: res, err: err, stdout: stdout, stderr: stderr, outputsDir: cfg.OutputsDir}
}

// startJob runs the executor in the background; wait returns its outcome.
func startJob(t testing.TB, c *cluster.Cluster, ns string, manifest []byte, edits ...func(*executor.Config)) (wait func() runOutcome) {
	t.Helper()
	done := make(chan runOutcome, 1)
	go func() { done <- runJob(t, c, ns, manifest, edits...) }()
	return func() runOutcome {
		select {
		case o := <-done:
			return o
		case <-time.After(4 * time.Minute):
			t.Fatal("the run did not end within 4 minutes")
			return runOutcome{}
		}
	}
}

// runLog records what a run logs, so that a test can wait for the line
// that shows trainstep acted on a change: the progress line of a sync is
// logged after the creates and deletes that sync decided were sent.
type runLog struct{ logs *observer.ObservedLogs }

// recordLog tees the run's log into the returned runLog; pass record to
// runJob or startJob.
func recordLog() (l *runLog, record func(*executor.Config)) {
	core, logs := observer.New(zapcore.InfoLevel)
	return &runLog{logs: logs}, func(cfg *executor.Config) {
		cfg.Logger = zap.New(zapcore.NewTee(cfg.Logger.Core(), core))
	}
}

// mark is where the next line logged will be: waitLine from there looks
// only at what comes after.
func (l *runLog) mark() int { return l.logs.Len() }

// waitLine waits for a line logged at or after from whose message holds
// every part, and returns the position after it.
func (l *runLog) waitLine(t testing.TB, timeout time.Duration, from int, parts ...string) int {
	t.Helper()
	next := -1
	testutil.Eventually(t, timeout, fmt.Sprintf("a log line with %q", parts), func() bool {
		next = l.find(from, parts...)
		return next >= 0
	}, func() string { return "lines logged: " + l.messages(from) })
	return next
}

// find returns the position after the first line logged at or after from
// whose message holds every part, -1 when there is none yet.
func (l *runLog) find(from int, parts ...string) int {
	entries := l.logs.All()
	for i := from; i < len(entries); i++ {
		if containsAll(entries[i].Message, parts) {
			return i + 1
		}
	}
	return -1
}

func (l *runLog) messages(from int) string {
	var out []string
	for i, e := range l.logs.All() {
		if i >= from {
			out = append(out, e.Message)
		}
	}
	return strings.Join(out, "\n")
}

func containsAll(s string, parts []string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}

func listPods(t testing.TB, c *cluster.Cluster, ns, job string) []corev1.Pod {
	t.Helper()
	pods, err := c.Client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: v1alpha1.LabelJobName + "=" + job})
	if err != nil {
		t.Fatal(err)
	}
	return pods.Items
}

func listServices(t testing.TB, c *cluster.Cluster, ns, job string) []corev1.Service {
	t.Helper()
	svcs, err := c.Client.CoreV1().Services(ns).List(context.Background(), metav1.ListOptions{LabelSelector: v1alpha1.LabelJobName + "=" + job})
	if err != nil {
		t.Fatal(err)
	}
	return svcs.Items
}

// livePods counts the job's pods not being deleted.
func livePods(t testing.TB, c *cluster.Cluster, ns, job string) map[string]corev1.Pod {
	out := map[string]corev1.Pod{}
	for _, p := range listPods(t, c, ns, job) {
		if p.DeletionTimestamp == nil {
			out[p.Name] = p
		}
	}
	return out
}

func waitRunning(t testing.TB, c *cluster.Cluster, ns, job string, n int) {
	t.Helper()
	testutil.Eventually(t, 90*time.Second, fmt.Sprintf("%d running pods of %s", n, job), func() (bool, error) {
		running := 0
		for _, p := range livePods(t, c, ns, job) {
			if p.Status.Phase == corev1.PodRunning {
				running++
			}
		}
		return running == n, nil
	})
}

// patchAnnotations patches annotations onto one live pod (KWOK reads them live).
func patchAnnotations(t testing.TB, c *cluster.Cluster, ns, pod string, ann map[string]string) {
	t.Helper()
	var parts []string
	for k, v := range ann {
		parts = append(parts, fmt.Sprintf("%q:%q", k, v))
	}
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%s}}}`, strings.Join(parts, ","))
	if _, err := c.Client.CoreV1().Pods(ns).Patch(context.Background(), pod, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatalf("patching %s: %v", pod, err)
	}
}

// ownerPod creates a running pod that stands for the Argo step pod.
func ownerPod(t testing.TB, c *cluster.Cluster, ns, name string) *corev1.Pod {
	t.Helper()
	pod, err := c.Client.CoreV1().Pods(ns).Create(context.Background(), &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "trainstep:test"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating owner pod: %v", err)
	}
	return pod
}

var (
	buildOnce sync.Once
	binary    string
	buildErr  error
)

// trainstepBinary builds cmd/trainstep once per test run.
func trainstepBinary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		_, file, _, _ := runtime.Caller(0)
		root := filepath.Join(filepath.Dir(file), "..", "..")
		dir, err := os.MkdirTemp("", "trainstep-bin-")
		if err != nil {
			buildErr = err
			return
		}
		binary = filepath.Join(dir, "trainstep")
		cmd := exec.Command("go", "build", "-o", binary, "./cmd/trainstep")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("building trainstep: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binary
}

// process is a trainstep binary running as a subprocess.
type process struct {
	cmd            *exec.Cmd
	stdout, stderr *testutil.SyncBuffer
	done           chan struct{}
	outputsDir     string
}

func startBinary(t testing.TB, args ...string) *process {
	t.Helper()
	p := &process{stdout: &testutil.SyncBuffer{}, stderr: &testutil.SyncBuffer{}, done: make(chan struct{}), outputsDir: t.TempDir()}
	args = append(args, "--outputs-dir", p.outputsDir, "--log-format", "console")
	if len(args) > 0 && args[0] == "run" && !hasFlag(args, "--identity") && !hasFlag(args, "--workflow-uid") {
		// A test's runs are retries of one another: they share an identity,
		// as the attempts of one workflow step do.
		args = append(args, "--identity", testIdentity(t))
	}
	p.cmd = exec.Command(trainstepBinary(t), args...)
	p.cmd.Stdout, p.cmd.Stderr = p.stdout, p.stderr
	p.cmd.Env = append(os.Environ(), "KUBECONFIG=")
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		<-p.done
		if t.Failed() {
			t.Logf("trainstep stderr:\n%s", p.stderr.String())
		}
	})
	return p
}

func (p *process) wait(t testing.TB, timeout time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
		return p.cmd.ProcessState.ExitCode()
	case <-time.After(timeout):
		t.Fatalf("trainstep did not exit within %s; stderr:\n%s", timeout, p.stderr.String())
		return -1
	}
}

func writeFile(t testing.TB, data []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "job.yaml")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}
