package nodes_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"github.com/trainstep/trainstep/internal/testutil"
	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/result"
	"github.com/trainstep/trainstep/test/cluster"
)

// checkpointGrace is the ranks' termination grace period in these tests: time enough to save
// a checkpoint of this small model.
const checkpointGrace = 10

// checkpointDDP is a Kubeflow PyTorchJob of two ranks that restarts as a whole; a rank that
// exits (143, after its checkpoint) is not restarted in place.
const checkpointDDP = `
apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata: {name: %[1]s}
spec:
  runPolicy: {backoffLimit: 1, cleanPodPolicy: None}
  pytorchReplicaSpecs:
    Master: {replicas: 1, restartPolicy: Never, template: {spec: %[2]s}}
    Worker: {replicas: 1, restartPolicy: Never, template: {spec: %[2]s}}
`

// checkpointPodSpec runs the shipped checkpoint-on-notice training
// (workflows/checkpoint/ddp_checkpoint.py) on real PyTorch DDP, one rank per node (the
// topology spread of ddpPodSpec), with its checkpoints on a hostPath both nodes see; each rank
// writes when it heard SIGTERM to /ckpt/sigterm-<rank>.
const checkpointPodSpec = `{containers: [{name: pytorch, image: ` + torchImage + `, imagePullPolicy: Never,
  command: [python3, ` + checkpointScript + `],
  env: [{name: CKPT_DIR, value: /ckpt}, {name: STEPS, value: "%[2]d"}, {name: STEP_DELAY, value: "0.1"},
        {name: REPORT_EVERY, value: "5"}, {name: SIGTERM_MARKER, value: /ckpt/sigterm}%[4]s],
  resources: {requests: {cpu: %[5]s}},
  volumeMounts: [{name: ckpt, mountPath: /ckpt}]}],
  volumes: [{name: ckpt, hostPath: {path: %[3]q, type: DirectoryOrCreate}}],
  terminationGracePeriodSeconds: %[7]d%[6]s}`

// checkpointJob is a job of the shipped checkpoint training: steps steps; periodic > 0 makes
// it a job that only checkpoints every that many steps and ignores SIGTERM (python3 is its
// container's PID 1, which SIGTERM does not kill without a handler); cpu is each rank's CPU
// request; spread puts one rank on each node.
func checkpointJob(t *testing.T, c *cluster.Cluster, name string, steps, periodic int, cpu string, spread bool) *testJob {
	t.Helper()
	d := &testJob{c: c, ns: c.Namespace(t), name: name}
	d.ckpt = filepath.Join("/var/tmp", "trainstep-nodes-"+d.ns)
	if err := os.MkdirAll(d.ckpt, 0o777); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(d.ckpt) })
	env := ""
	if periodic > 0 {
		env = fmt.Sprintf(`, {name: CHECKPOINT_ON_SIGTERM, value: "0"}, {name: CKPT_EVERY, value: "%d"}`, periodic)
	}
	placement := ""
	if spread {
		placement = `,
  topologySpreadConstraints: [{maxSkew: 1, topologyKey: kubernetes.io/hostname, whenUnsatisfiable: DoNotSchedule,
    nodeTaintsPolicy: Honor, labelSelector: {matchLabels: {trainstep.dev/job-name: ` + name + `}}}]`
	}
	spec := fmt.Sprintf(checkpointPodSpec, name, steps, d.ckpt, env, cpu, placement, checkpointGrace)
	d.manifest = []byte(fmt.Sprintf(checkpointDDP, name, spec))
	return d
}

// reportedStep matches rank 0's status lines: the step it reached.
var reportedStep = regexp.MustCompile(`"name": "step", "value": "(\d+)"`)

// waitStep waits until rank 0 reported step at least, both ranks running, and returns the
// pods.
func (d *testJob) waitStep(t *testing.T, r *run, step int) map[string]corev1.Pod {
	t.Helper()
	var pods map[string]corev1.Pod
	testutil.Eventually(t, 3*time.Minute, fmt.Sprintf("both ranks running past step %d", step), func(ctx context.Context) (bool, error) {
		var err error
		if pods, err = d.pods(ctx); err != nil {
			return false, err
		}
		running := 0
		for _, p := range pods {
			if p.Status.Phase == corev1.PodRunning {
				running++
			}
		}
		return running == 2 && lastReported(r) >= step, nil
	}, func() string { return fmt.Sprintf("pods: %s; last step %d", describePods(pods), lastReported(r)) })
	return pods
}

func lastReported(r *run) int {
	m := reportedStep.FindAllStringSubmatch(r.stderr.String(), -1)
	if len(m) == 0 {
		return 0
	}
	n, _ := strconv.Atoi(m[len(m)-1][1])
	return n
}

// sigtermTimes reads when each rank heard SIGTERM (the markers the training writes).
func (d *testJob) sigtermTimes(t *testing.T) map[string]time.Time {
	t.Helper()
	out := map[string]time.Time{}
	for _, rank := range []string{"0", "1"} {
		data, err := os.ReadFile(filepath.Join(d.ckpt, "sigterm-"+rank))
		if err != nil {
			continue
		}
		f, err := strconv.ParseFloat(strings.TrimSpace(string(data)), 64)
		if err != nil {
			t.Fatalf("marker of rank %s: %q", rank, data)
		}
		out[rank] = time.Unix(0, int64(f*1e9))
	}
	return out
}

// checkResumedOnce checks the run's one whole-job restart: a disruption, uncounted, and what
// it cost in steps; it returns that cost.
func checkResumedOnce(t *testing.T, o outcome) int64 {
	t.Helper()
	if o.err != nil || o.res.Phase != result.PhaseSucceeded || o.res.Restarts != 0 {
		t.Fatalf("run: phase %s (%s: %s), restarts %d, error %v; want Succeeded with 0 restarts; log:\n%s",
			o.res.Phase, o.res.Reason, o.res.Message, o.res.Restarts, o.err, lastLines(o.stderr.String(), 40))
	}
	if len(o.res.Resumes) != 1 {
		t.Fatalf("resumes %+v, want the one restart", o.res.Resumes)
	}
	r := o.res.Resumes[0]
	if r.Reason != "disruption" || r.Unit != "steps" || r.Redone == nil || r.StepAfter == nil {
		t.Fatalf("resume %+v, want an uncounted disruption with the steps it cost", r)
	}
	t.Logf("stopped at step %d, resumed at step %d: %d steps redone", *r.StepBefore, *r.StepAfter, *r.Redone)
	return *r.Redone
}

// A drain of a rank's node, with trainstep allowed to watch nodes: the cordon is the notice.
// trainstep stops both ranks at once, gracefully; they agree on a step, rank 0 saves it, and
// the job starts again on the other node, uncounted, from that checkpoint — at most one step
// redone — while the drain waits only for the checkpoint. The same drain of a job that only
// checkpoints every 50 steps and ignores SIGTERM redoes the steps since its last checkpoint
// and holds the drain for the ranks' whole grace period (docs/failures.md compares them).
func TestRealNodesDrainOfARanksNodeCheckpointsEveryRankAtOnce(t *testing.T) {
	c := twoNodes(t)
	for _, tc := range []struct {
		name     string
		periodic int
	}{{"checkpoint on SIGTERM", 0}, {"periodic checkpoints only", 50}} {
		t.Run(tc.name, func(t *testing.T) {
			bothNodesUp(t, c)
			d := checkpointJob(t, c, "drained", 300, tc.periodic, "100m", true)
			r := d.start(t, 0)
			pods := d.waitStep(t, r, 45)
			node := workerPod(t, pods).Spec.NodeName
			other := cluster.RealNodeName
			if node == other {
				other = secondNode
			}
			t.Cleanup(func() { _ = cluster.Cordon(context.Background(), c.Client, node, false) })
			began := time.Now()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			_, err := cluster.Drain(ctx, c.Client, node)
			cancel()
			drained := time.Since(began)
			if err != nil {
				t.Fatalf("draining %s: %v", node, err)
			}
			t.Logf("%s: draining %s took %s", tc.name, node, drained.Round(100*time.Millisecond))
			d.waitRestartedOn(t, r, other)
			if err := cluster.Cordon(context.Background(), c.Client, node, false); err != nil {
				t.Fatal(err)
			}
			o := r.wait(t)
			redone := checkResumedOnce(t, o)
			times := d.sigtermTimes(t)
			if tc.periodic > 0 {
				t.Logf("periodic checkpoints: %d steps redone, the drain held %s", redone, drained.Round(100*time.Millisecond))
				return
			}
			if redone < 0 || redone > 1 {
				t.Errorf("%d steps redone, want at most one: the ranks checkpoint when told to stop", redone)
			}
			if limit := checkpointGrace*time.Second + 30*time.Second; drained > limit {
				t.Errorf("the drain took %s, want at most the ranks' grace period plus 30 s (%s)", drained, limit)
			}
			checkStoppedAtOnce(t, times, o)
			for rank, at := range times {
				if at.Before(began) {
					t.Errorf("rank %s heard SIGTERM at %s, before the drain began at %s", rank, at, began)
				}
			}
			if ckpt, err := os.Stat(filepath.Join(d.ckpt, "checkpoint.pt")); err != nil || ckpt.ModTime().Before(began) {
				t.Errorf("the checkpoint (%v, %v) was not taken after the drain began at %s", ckpt, err, began)
			}
			for _, rep := range o.res.Replicas {
				if rep.Node != other {
					t.Errorf("%s-%d ended on %s, want %s: the restart avoids the drained node", rep.Type, rep.Index, rep.Node, other)
				}
			}
		})
	}
}

// Without the rights to watch nodes, trainstep learns of a drain only when it evicts a rank,
// and the job's PodDisruptionBudget (every rank) keeps it from evicting one: the drain waits,
// and the job trains on, unharmed, on both nodes.
func TestRealNodesDrainWithoutNodeRightsWaitsOnTheBudget(t *testing.T) {
	c := twoNodes(t)
	bothNodesUp(t, c)
	d := checkpointJob(t, c, "budgeted", 450, 0, "100m", true)
	ctx := context.Background()
	applyDeploy(ctx, t, c, repoRoot(t), d.ns)
	d.kubeconfig = c.KubeconfigForToken(t, c.ServiceAccountToken(t, d.ns, "trainstep"), d.ns)
	r := d.start(t, 0)
	pods := d.waitStep(t, r, 40)
	node := workerPod(t, pods).Spec.NodeName
	t.Cleanup(func() { _ = cluster.Cordon(context.Background(), c.Client, node, false) })
	drainCtx, cancel := context.WithTimeout(ctx, 20*time.Second)
	_, err := cluster.Drain(drainCtx, c.Client, node)
	cancel()
	if err == nil || !strings.Contains(err.Error(), d.name+"-") {
		t.Fatalf("the drain: %v, want it held by the job's budget with a rank left on %s", err, node)
	}
	after, err := d.pods(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for name, p := range pods {
		if q, ok := after[name]; !ok || q.UID != p.UID || q.Status.Phase != corev1.PodRunning {
			t.Errorf("rank %s was disturbed by the held drain: %+v", name, q.Status)
		}
	}
	if err := cluster.Cordon(ctx, c.Client, node, false); err != nil {
		t.Fatal(err)
	}
	o := r.wait(t)
	if o.res.Phase != result.PhaseSucceeded || o.res.Restarts != 0 || len(o.res.Resumes) != 0 {
		t.Errorf("run %s (%s), restarts %d, resumes %+v; want Succeeded, never restarted", o.res.Phase, o.res.Message, o.res.Restarts, o.res.Resumes)
	}
}

// A scheduler preemption of one rank: the pod gets DisruptionTarget, and trainstep stops the
// other rank at once; both hear SIGTERM within 2 s of each other, checkpoint at the step they
// agree on, and the job starts again, uncounted, from that checkpoint.
func TestRealNodesPreemptionStopsEveryRankAtOnce(t *testing.T) {
	c := twoNodes(t)
	bothNodesUp(t, c)
	ctx := context.Background()
	d := checkpointJob(t, c, "preempted", 300, 0, "600m", false)
	r := d.start(t, 0)
	pods := d.waitStep(t, r, 40)
	victim := workerPod(t, pods)
	preemptor := fillNode(ctx, t, c, d.ns, victim.Spec.NodeName)
	t.Logf("pod %s asks for the rest of %s", preemptor, victim.Spec.NodeName)
	testutil.Eventually(t, time.Minute, "the worker preempted", func(ctx context.Context) (bool, error) {
		p, err := c.Client.CoreV1().Pods(d.ns).Get(ctx, victim.Name, metav1.GetOptions{})
		if err != nil || p.UID != victim.UID {
			return true, nil
		}
		for _, cond := range p.Status.Conditions {
			if cond.Type == v1alpha1.PodConditionDisruptionTarget && cond.Reason == "PreemptionByScheduler" {
				return true, nil
			}
		}
		return false, nil
	})
	o := r.wait(t)
	redone := checkResumedOnce(t, o)
	if redone < 0 || redone > 1 {
		t.Errorf("%d steps redone, want at most one", redone)
	}
	checkStoppedAtOnce(t, d.sigtermTimes(t), o)
}

// checkStoppedAtOnce checks that the ranks were stopped together: both heard SIGTERM within
// 2 s of each other. A rank may miss its SIGTERM: the other's, shared through the all-reduce
// of the training loop, stops it at the agreed step, and it exits before its kubelet
// (slow on a loaded machine) delivers its own. Then trainstep's restart, which deletes every
// rank, must have been decided within 2 s of the SIGTERM the other rank heard.
func checkStoppedAtOnce(t *testing.T, times map[string]time.Time, o outcome) {
	t.Helper()
	switch len(times) {
	case 2:
		gap := times["0"].Sub(times["1"]).Abs()
		t.Logf("the ranks heard SIGTERM %s apart", gap)
		if gap > 2*time.Second {
			t.Errorf("the ranks heard SIGTERM %s apart, want within 2 s", gap)
		}
	case 1:
		decided := o.log.FilterMessage("restarting the job").All()
		if len(decided) == 0 {
			t.Fatalf("SIGTERM heard by ranks %v only, and no restart decided", times)
		}
		for rank, heard := range times {
			gap := decided[0].Time.Sub(heard).Abs()
			t.Logf("rank %s heard SIGTERM, the other exited at the agreed step first; the restart that stops every rank was decided %s from it", rank, gap)
			if gap > 2*time.Second {
				t.Errorf("the restart was decided %s from rank %s's SIGTERM, want within 2 s", gap, rank)
			}
		}
	default:
		t.Fatalf("SIGTERM heard by ranks %v, want both", times)
	}
}

// fillNode creates a pod of a higher priority than any job's, on node, that asks for what the
// pods there leave of its CPU plus one core: it fits only once a job's rank is gone, so the
// scheduler preempts one. It exits after 10 s, and returns its name.
func fillNode(ctx context.Context, t *testing.T, c *cluster.Cluster, ns, node string) string {
	t.Helper()
	n, err := c.Client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pods, err := c.Client.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
	if err != nil {
		t.Fatal(err)
	}
	free := n.Status.Allocatable.Cpu().MilliValue()
	smallest := free
	for _, p := range pods.Items {
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		for _, ctr := range p.Spec.Containers {
			req := ctr.Resources.Requests.Cpu().MilliValue()
			free -= req
			if p.Labels[v1alpha1.LabelJobName] != "" && req < smallest {
				smallest = req
			}
		}
	}
	class := "trainstep-test-preemptor-" + ns
	if err := c.CreatePriorityClass(ctx, t, class, 1000000); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("%dm", free+smallest)
	pod, err := c.Client.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "preemptor-"},
		Spec: corev1.PodSpec{
			PriorityClassName: class,
			NodeSelector:      map[string]string{"kubernetes.io/hostname": node},
			RestartPolicy:     corev1.RestartPolicyNever,
			Containers: []corev1.Container{{Name: "main", Image: torchImage, ImagePullPolicy: corev1.PullNever,
				Command:   []string{"python3", "-c", "import time; time.sleep(10)"},
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: mustQuantity(t, want)}}}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating the preemptor: %v", err)
	}
	return pod.Name
}

func mustQuantity(t *testing.T, s string) resource.Quantity {
	t.Helper()
	q, err := resource.ParseQuantity(s)
	if err != nil {
		t.Fatal(err)
	}
	return q
}

// handOverWorkflow runs a small PyTorch job of the demo trainer through the shipped
// ClusterWorkflowTemplate with both ranks on real-node-2, while the workflow's own pods
// prefer real-node: the step pod starts there.
const handOverWorkflow = `
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata: {generateName: handover-}
spec:
  entrypoint: main
  serviceAccountName: trainstep-executor
  hooks:
    exit:
      templateRef: {name: trainstep, template: cleanup, clusterScope: true}
  affinity:
    nodeAffinity:
      preferredDuringSchedulingIgnoredDuringExecution:
        - weight: 100
          preference: {matchExpressions: [{key: kubernetes.io/hostname, operator: In, values: [` + cluster.RealNodeName + `]}]}
  templates:
    - name: main
      dag:
        tasks:
          - name: train
            templateRef: {name: trainstep, template: train, clusterScope: true}
            arguments:
              parameters:
                - name: job
                  value: |
                    apiVersion: trainstep.dev/v1alpha1
                    kind: TrainJob
                    metadata: {name: handover}
                    spec:
                      framework: pytorch
                      runPolicy: {cleanPodPolicy: None}
                      replicaSpecs:
                        Master:
                          replicas: 1
                          template:
                            spec:
                              nodeSelector: {kubernetes.io/hostname: ` + secondNode + `}
                              containers: [{name: pytorch, image: ` + localImage + `, command: [demo-trainer], args: ["--steps=1100", "--step-delay=100ms"]}]
                        Worker:
                          replicas: 1
                          template:
                            spec:
                              nodeSelector: {kubernetes.io/hostname: ` + secondNode + `}
                              containers: [{name: pytorch, image: ` + localImage + `, command: [demo-trainer], args: ["--steps=1100", "--step-delay=100ms"]}]
`

// A drain of the node the step pod runs on, under the real Argo controller: the eviction
// marks the step pod with DisruptionTarget, the step hands the job over (exit 12, nothing
// deleted), Argo retries the step on the other node, and the retry re-attaches to the same
// replica pods, which train on to the end: the workflow succeeds with the retried attempt's
// outputs, and the job never lost its replicas.
func TestRealNodesDrainOfTheStepsNodeHandsTheJobOver(t *testing.T) {
	c := twoNodes(t)
	bothNodesUp(t, c)
	root := repoRoot(t)
	dyn, err := dynamic.NewForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	importTrainstepImage(ctx, t, c, root)
	applyClusterTemplate(ctx, t, dyn, root)
	ns := c.Namespace(t)
	applyDeploy(ctx, t, c, root, ns)
	wf := &unstructured.Unstructured{}
	if err := yaml.UnmarshalStrict([]byte(handOverWorkflow), &wf.Object); err != nil {
		t.Fatal(err)
	}
	run := submitWorkflow(ctx, t, dyn, ns, wf)
	// The job's replicas train, and the step pod runs on real-node.
	var replicas map[string]types.UID
	var step string
	testutil.Eventually(t, 4*time.Minute, "both replicas running and the step pod on "+cluster.RealNodeName, func(ctx context.Context) (bool, error) {
		pods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		replicas, step = map[string]types.UID{}, ""
		for _, p := range pods.Items {
			switch {
			case p.Labels[v1alpha1.LabelJobName] != "" && p.Status.Phase == corev1.PodRunning:
				replicas[p.Name] = p.UID
			case strings.Contains(p.Name, "-train-") && p.Spec.NodeName == cluster.RealNodeName && p.Status.Phase == corev1.PodRunning:
				step = p.Name
			}
		}
		return len(replicas) == 2 && step != "", nil
	}, func() string { return podsOf(c, ns) })
	followLogOnFailure(t, c, ns, step, "main")
	// Argo re-creates the pod of an attempt it still records Pending instead of
	// retrying it: drained then, the job goes on in the same attempt. The drain
	// comes once Argo records the attempt Running, so that it shows the retry.
	testutil.Eventually(t, 2*time.Minute, "Argo to record the train attempt Running", func(ctx context.Context) (bool, error) {
		live, err := run.workflows.Get(ctx, run.name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		nodes, err := cluster.WorkflowNodes(live)
		if err != nil {
			return false, err
		}
		for _, n := range nodes {
			if n.DisplayName == "train(0)" && n.Phase == "Running" {
				return true, nil
			}
		}
		return false, nil
	}, func() string { return podsOf(c, ns) })
	time.Sleep(5 * time.Second) // the step holds the job's lease and watches
	t.Cleanup(func() { _ = cluster.Cordon(context.Background(), c.Client, cluster.RealNodeName, false) })
	drainCtx, cancelDrain := context.WithTimeout(ctx, 2*time.Minute)
	drainStarted := time.Now()
	evicted, err := cluster.Drain(drainCtx, c.Client, cluster.RealNodeName)
	cancelDrain()
	if err != nil {
		t.Fatalf("draining %s: %v", cluster.RealNodeName, err)
	}
	t.Logf("drained %s in %s: evicted %v", cluster.RealNodeName, time.Since(drainStarted).Round(100*time.Millisecond), evicted)
	if !slices.Contains(evicted, ns+"/"+step) {
		t.Fatalf("the drain did not evict the step pod %s: %v", step, evicted)
	}
	wf, phase := run.waitEnd(t, c, 6*time.Minute)
	train := trainOutputs(t, wf)
	if phase != "Succeeded" || train["phase"] != "Succeeded" {
		t.Fatalf("Workflow %s: phase %s, train outputs %v; want Succeeded; nodes: %s; %s", run.name, phase, train, nodeSummary(wf), podsOf(c, ns))
	}
	attempts := 0
	nodes, err := cluster.WorkflowNodes(wf)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		if strings.HasPrefix(n.DisplayName, "train(") {
			attempts++
		}
	}
	if attempts < 2 {
		t.Errorf("the train step ran %d attempts, want the drained one and its retry; nodes: %s", attempts, nodeSummary(wf))
	}
	pods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: v1alpha1.LabelJobName})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if uid, ok := replicas[p.Name]; !ok || uid != p.UID {
			t.Errorf("replica %s (%s) is not the pod the first attempt made (%s): the job lost its replicas", p.Name, p.UID, uid)
		}
	}
	if train["restarts"] != "0" {
		t.Errorf("restarts %s, want 0", train["restarts"])
	}
}
