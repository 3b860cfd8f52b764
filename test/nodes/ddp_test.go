package nodes_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/trainstep/trainstep/executor"
	"github.com/trainstep/trainstep/internal/testutil"
	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/logs"
	"github.com/trainstep/trainstep/pkg/replicapolicy"
	"github.com/trainstep/trainstep/pkg/result"
	"github.com/trainstep/trainstep/pkg/spec"
	"github.com/trainstep/trainstep/test/cluster"
)

// ddpJob is a Kubeflow PyTorchJob as Training Operator takes it: a master and a worker
// running DDP from the env trainstep renders (MASTER_ADDR is the master's Service), rank 0
// checkpointing every 10 steps to a hostPath both nodes see (this machine's directory: the
// shared file system a real job would checkpoint to). A topology spread over the nodes' host
// names (at most one rank more on a node than on another, counting only nodes whose taints
// the ranks tolerate) puts the two ranks on different nodes while both nodes are up, and both
// on the survivor once the other is tainted unreachable or gone. A rank blocked in gloo's
// all-reduce on a dead peer runs no signal handler, and python3 is its container's PID 1,
// which SIGTERM does not kill: it goes only at the end of its grace period, which a whole-job
// restart waits for, so the grace period is 5 s, not 30.
const ddpJob = `
apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata: {name: %[1]s}
spec:
  runPolicy: {backoffLimit: 1, cleanPodPolicy: %[2]s}
  pytorchReplicaSpecs:
    Master: {replicas: 1, restartPolicy: OnFailure, template: {spec: %[3]s}}
    Worker: {replicas: 1, restartPolicy: OnFailure, template: {spec: %[3]s}}
`

const ddpPodSpec = `{containers: [{name: pytorch, image: ` + torchImage + `, imagePullPolicy: Never,
  command: [python3, ` + trainScript + `],
  env: [{name: CKPT_DIR, value: /ckpt}, {name: STEPS, value: "%[2]d"}%[4]s],
  volumeMounts: [{name: ckpt, mountPath: /ckpt}]}],
  volumes: [{name: ckpt, hostPath: {path: %[3]q, type: DirectoryOrCreate}}],
  terminationGracePeriodSeconds: 5,
  topologySpreadConstraints: [{maxSkew: 1, topologyKey: kubernetes.io/hostname, whenUnsatisfiable: DoNotSchedule,
    nodeTaintsPolicy: Honor, labelSelector: {matchLabels: {trainstep.dev/job-name: %[1]s}}}]}`

// testJob is one job of a test: its manifest, namespace and (a DDP job's) checkpoint directory.
type testJob struct {
	c        *cluster.Cluster
	ns, name string
	ckpt     string
	// until is the file in ckpt that ends the training of a newDDPUntil job.
	until    string
	manifest []byte
	// kubeconfig is whom trainstep runs as: the cluster's admin unless set.
	kubeconfig string
}

func newDDP(t *testing.T, c *cluster.Cluster, steps int, cleanPodPolicy string) *testJob {
	t.Helper()
	return newDDPUntil(t, c, steps, cleanPodPolicy, "")
}

// newDDPUntil is newDDP whose ranks train on past steps until the file until exists in the
// job's checkpoint directory (UNTIL_FILE): the test creates it with d.endTraining.
func newDDPUntil(t *testing.T, c *cluster.Cluster, steps int, cleanPodPolicy, until string) *testJob {
	t.Helper()
	d := &testJob{c: c, ns: c.Namespace(t), name: "ddp", until: until}
	d.ckpt = filepath.Join("/var/tmp", "trainstep-nodes-"+d.ns)
	t.Cleanup(func() { _ = os.RemoveAll(d.ckpt) })
	env := ""
	if until != "" {
		env = fmt.Sprintf(", {name: UNTIL_FILE, value: /ckpt/%s}", until)
	}
	spec := fmt.Sprintf(ddpPodSpec, d.name, steps, d.ckpt, env)
	d.manifest = []byte(fmt.Sprintf(ddpJob, d.name, cleanPodPolicy, spec))
	return d
}

// endTraining tells the ranks of a newDDPUntil job to end their training.
func (d *testJob) endTraining(t *testing.T) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(d.ckpt, d.until), nil, 0o644); err != nil {
		t.Fatal(err)
	}
}

// outcome is what one in-process run produced.
type outcome struct {
	res    result.Result
	err    error
	stderr *testutil.SyncBuffer
	log    *observer.ObservedLogs
}

// run is one in-process run of trainstep going on in the background.
type run struct {
	stderr *testutil.SyncBuffer
	log    *observer.ObservedLogs
	done   chan outcome
	// ended is closed once the outcome is in done.
	ended chan struct{}
}

// start runs trainstep in-process in the background with the node-lost timeout given.
func (d *testJob) start(t *testing.T, nodeLostTimeout time.Duration) *run {
	t.Helper()
	core, observed := observer.New(zapcore.InfoLevel)
	r := &run{stderr: &testutil.SyncBuffer{}, log: observed, done: make(chan outcome, 1), ended: make(chan struct{})}
	cfg := executor.Config{
		Spec: d.manifest,
		// The checkpoint is a hostPath that both nodes see (one machine's
		// directory), which the replica policy allows only by this flag.
		SpecOptions:      spec.Options{Policy: replicapolicy.Policy{AllowPrivileged: true}},
		Kubeconfig:       firstSet(d.kubeconfig, d.c.Kubeconfig),
		PodNamespace:     d.ns,
		OutputsDir:       t.TempDir(),
		APITimeout:       30 * time.Second,
		TerminationGrace: 30 * time.Second,
		NodeLostTimeout:  nodeLostTimeout,
		Logs:             logs.ModeAll,
		// As `trainstep run` does: the leaders' status lines are read.
		TrainerStatus: true,
		Logger:        zap.New(zapcore.NewTee(zaptest.NewLogger(t).Core(), core)),
		Stdout:        &testutil.SyncBuffer{},
		Stderr:        r.stderr,
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
		defer cancel()
		res, err := executor.Run(ctx, cfg)
		r.done <- outcome{res: res, err: err, stderr: r.stderr, log: observed}
		close(r.ended)
	}()
	return r
}

// wait returns the run's outcome once it ended.
func (r *run) wait(t *testing.T) outcome {
	t.Helper()
	select {
	case o := <-r.done:
		return o
	case <-time.After(9 * time.Minute):
		t.Fatal("the run did not end within 9 minutes")
		return outcome{}
	}
}

// pods lists the job's pods not being deleted, by name.
func (d *testJob) pods(ctx context.Context) (map[string]corev1.Pod, error) {
	list, err := d.c.Client.CoreV1().Pods(d.ns).List(ctx, metav1.ListOptions{LabelSelector: v1alpha1.LabelJobName + "=" + d.name})
	if err != nil {
		return nil, err
	}
	pods := map[string]corev1.Pod{}
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil {
			pods[p.Name] = p
		}
	}
	return pods, nil
}

// waitTraining waits until both ranks run, on different nodes, and rank 0 has written a
// checkpoint, and returns the pods.
func (d *testJob) waitTraining(t *testing.T) map[string]corev1.Pod {
	t.Helper()
	var pods map[string]corev1.Pod
	testutil.Eventually(t, 3*time.Minute, "both ranks training on different nodes past a checkpoint", func(ctx context.Context) (bool, error) {
		var err error
		if pods, err = d.pods(ctx); err != nil {
			return false, err
		}
		nodes := map[string]bool{}
		for _, p := range pods {
			if p.Status.Phase == corev1.PodRunning {
				nodes[p.Spec.NodeName] = true
			}
		}
		_, err = os.Stat(filepath.Join(d.ckpt, "checkpoint.pt"))
		return len(pods) == 2 && len(nodes) == 2 && err == nil, nil
	}, func() string { return fmt.Sprintf("pods: %s", describePods(pods)) })
	return pods
}

// waitRestartedOn waits until both ranks of the job's restart (job attempt 1) are placed on
// node, where they stay whatever node comes back, or the run ended.
func (d *testJob) waitRestartedOn(t *testing.T, r *run, node string) {
	t.Helper()
	var pods map[string]corev1.Pod
	testutil.Eventually(t, 2*time.Minute, "both ranks of the restarted job placed on "+node, func(ctx context.Context) (bool, error) {
		select {
		case <-r.ended:
			return true, nil
		default:
		}
		var err error
		if pods, err = d.pods(ctx); err != nil {
			return false, err
		}
		placed := 0
		for _, p := range pods {
			if p.Labels[v1alpha1.LabelJobAttempt] == "1" && p.Spec.NodeName == node {
				placed++
			}
		}
		return placed == 2, nil
	}, func() string { return fmt.Sprintf("pods: %s", describePods(pods)) })
}

// workerPod is the job's worker among pods.
func workerPod(t *testing.T, pods map[string]corev1.Pod) corev1.Pod {
	t.Helper()
	for name, p := range pods {
		if strings.Contains(name, "-worker-") {
			return p
		}
	}
	t.Fatalf("no worker among the pods %s", describePods(pods))
	return corev1.Pod{}
}

func describePods(pods map[string]corev1.Pod) string {
	var parts []string
	for name, p := range pods {
		parts = append(parts, fmt.Sprintf("%s %s on %q", name, p.Status.Phase, p.Spec.NodeName))
	}
	return strings.Join(parts, ", ")
}

// checkSucceeded checks that the run succeeded after all its steps with no counted restart,
// and that rank 0's log says so.
func checkSucceeded(t *testing.T, o outcome, steps int) {
	t.Helper()
	if got := checkSucceededPast(t, o, steps); got != steps {
		t.Errorf("metrics %v, want the steps %d of rank 0's termination message", o.res.Metrics, steps)
	}
}

// checkSucceededPast checks that the run succeeded after at least steps steps with no
// counted restart, and that rank 0's log says so; it returns the steps of rank 0's
// termination message.
func checkSucceededPast(t *testing.T, o outcome, steps int) int {
	t.Helper()
	if o.err != nil || o.res.Phase != result.PhaseSucceeded {
		t.Fatalf("run: phase %s (%s: %s), error %v; want Succeeded; replicas' log:\n%s", o.res.Phase, o.res.Reason, o.res.Message, o.err, lastLines(o.stderr.String(), 40))
	}
	if o.res.Restarts != 0 {
		t.Errorf("restarts = %d, want 0", o.res.Restarts)
	}
	got, err := strconv.Atoi(fmt.Sprint(o.res.Metrics["steps"]))
	if err != nil || got < steps {
		t.Errorf("metrics %v, want at least the steps %d in rank 0's termination message", o.res.Metrics, steps)
	}
	if want := fmt.Sprintf("step %d loss", steps); !strings.Contains(o.stderr.String(), want) {
		t.Errorf("the replicas' log lacks %q:\n%s", want, lastLines(o.stderr.String(), 40))
	}
	return got
}

// stepLine is rank 0's log line every 50 steps.
var stepLine = regexp.MustCompile(`step (\d+) loss`)

// lastStep is the last step rank 0 logged in the run so far (0 before the first).
func (r *run) lastStep() int {
	matches := stepLine.FindAllStringSubmatch(r.stderr.String(), -1)
	if len(matches) == 0 {
		return 0
	}
	step, _ := strconv.Atoi(matches[len(matches)-1][1])
	return step
}

// jobRestarts lists the "restarting the job" lines the run logged, with their fields.
func jobRestarts(o outcome) []map[string]any {
	var restarts []map[string]any
	for _, e := range o.log.FilterMessage("restarting the job").All() {
		restarts = append(restarts, e.ContextMap())
	}
	return restarts
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// TestRealNodesPyTorchDDPAcrossNodes trains real DDP with its master on one node and its
// worker on the other: the worker finds the master through its headless Service (the other
// node's CoreDNS answers for it) and gloo's all-reduce runs between the two nodes' pods.
func TestRealNodesPyTorchDDPAcrossNodes(t *testing.T) {
	t.Parallel()
	c := twoNodes(t)
	bothNodesUp(t, c)
	const steps = 2000
	d := newDDP(t, c, steps, "None")
	r := d.start(t, 0)
	o := r.wait(t)
	checkSucceeded(t, o, steps)
	nodes := map[string]string{}
	for _, r := range o.res.Replicas {
		nodes[strings.ToLower(r.Type)] = r.Node
	}
	if nodes["master"] == "" || nodes["worker"] == "" || nodes["master"] == nodes["worker"] {
		t.Errorf("replicas ran on %v, want the master and the worker on different nodes", nodes)
	}
	for _, node := range nodes {
		if node != cluster.RealNodeName && node != secondNode {
			t.Errorf("a replica ran on %q, want one of the real nodes", node)
		}
	}
	if len(jobRestarts(o)) != 0 {
		t.Errorf("the job restarted: %v", jobRestarts(o))
	}
}

func firstSet(values ...string) string {
	for _, v := range values {
		if v != "" {
			return v
		}
	}
	return ""
}
