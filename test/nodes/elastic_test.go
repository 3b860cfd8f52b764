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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/trainstep/trainstep/internal/testutil"
	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/result"
	"github.com/trainstep/trainstep/test/cluster"
)

// elasticSlot is an extended resource the elastic test gives each node, one per worker, so
// that the test decides how many workers each node holds.
const elasticSlot corev1.ResourceName = "trainstep.dev/elastic-slot"

// elasticSteps is how far the elastic ranks train: long enough that they still train at
// world size 3 when the lost-node test kills the node, once its DDP jobs, started beside
// them, train too (at least 20 ms a step: 40 s). A world of fewer than 3 ranks trains on
// past it (FINAL_WORLD), so the job ends only once the lost worker is back.
const elasticSteps = 2000

// elasticJob is a Kubeflow PyTorchJob with elasticPolicy 2..3, every worker running Debian's
// torch.distributed.run on the env trainstep renders (see test/e2e's elastic tests for
// PET_TEE and PET_REDIRECTS), checkpointing every 10 steps to a hostPath both nodes see. The
// collectives time out after 20 s, so the survivors of a dead machine fail instead of
// waiting on it for 30 minutes; a 5 s last call closes a rendezvous of fewer than 3 workers
// soon; the agents look for a waiting worker every 2 s.
const elasticJob = `
apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata: {name: elastic}
spec:
  elasticPolicy:
    rdzvBackend: c10d
    minReplicas: 2
    maxReplicas: 3
    maxRestarts: 10
    rdzvConf: [{key: last_call_timeout, value: "5"}]
  nprocPerNode: "1"
  runPolicy: {cleanPodPolicy: None}
  pytorchReplicaSpecs:
    Worker:
      replicas: 3
      restartPolicy: OnFailure
      template:
        spec:
          containers:
            - name: pytorch
              image: ` + torchImage + `
              imagePullPolicy: Never
              command: [python3, -m, torch.distributed.run, ` + elasticScript + `]
              env:
                - {name: CKPT_DIR, value: /ckpt}
                - {name: STEPS, value: "%[2]d"}
                - {name: STEP_SECONDS, value: "0.02"}
                - {name: FINAL_WORLD, value: "3"}
                - {name: COLLECTIVE_TIMEOUT, value: "20"}
                - {name: PET_MONITOR_INTERVAL, value: "2"}
                - {name: PET_TEE, value: "1"}
                - {name: PET_REDIRECTS, value: "1"}
              resources:
                requests: {` + string(elasticSlot) + `: 1}
                limits: {` + string(elasticSlot) + `: 1}
              volumeMounts: [{name: ckpt, mountPath: /ckpt}]
          volumes: [{name: ckpt, hostPath: {path: %[1]q, type: DirectoryOrCreate}}]
`

// setElasticSlots advertises n elastic slots on node (as a device plugin advertises GPUs; 0
// takes them away) and waits until the kubelet made them allocatable, what the scheduler
// reads. The test's end takes them away again.
func setElasticSlots(t *testing.T, c *cluster.Cluster, node string, n int) {
	t.Helper()
	path := "/status/capacity/" + strings.ReplaceAll(string(elasticSlot), "/", "~1")
	patch := fmt.Sprintf(`[{"op":"add","path":%q,"value":"%d"}]`, path, n)
	if n == 0 {
		patch = fmt.Sprintf(`[{"op":"remove","path":%q}]`, path)
	}
	testutil.Eventually(t, time.Minute, fmt.Sprintf("%d elastic slots allocatable on %s", n, node), func(ctx context.Context) (bool, error) {
		got, err := c.Client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		q, ok := got.Status.Allocatable[elasticSlot]
		if q.Value() == int64(n) && (ok || n == 0) {
			return true, nil
		}
		_, has := got.Status.Capacity[elasticSlot]
		if has || n > 0 {
			// Patched again while the kubelet has not caught up: the same value.
			_, err = c.Client.CoreV1().Nodes().Patch(ctx, node, types.JSONPatchType, []byte(patch), metav1.PatchOptions{}, "status")
		}
		return false, err
	})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		remove := fmt.Sprintf(`[{"op":"remove","path":%q}]`, path)
		_, _ = c.Client.CoreV1().Nodes().Patch(ctx, node, types.JSONPatchType, []byte(remove), metav1.PatchOptions{}, "status")
	})
}

// workerPods lists the elastic job's workers not being deleted.
func (d *testJob) workerPods(ctx context.Context) ([]corev1.Pod, error) {
	pods, err := d.pods(ctx)
	if err != nil {
		return nil, err
	}
	var workers []corev1.Pod
	for _, p := range pods {
		if p.Labels[v1alpha1.LabelReplicaType] == "worker" {
			workers = append(workers, p)
		}
	}
	return workers, nil
}

// onNode counts the pods placed on node.
func onNode(pods []corev1.Pod, node string) int {
	n := 0
	for _, p := range pods {
		if p.Spec.NodeName == node {
			n++
		}
	}
	return n
}

// since is what the replicas logged after offset bytes of the run's log.
func (r *run) since(offset int) string { return r.stderr.String()[offset:] }

// logShows waits until the replicas' log after offset matches re, and returns where the match
// ends.
func (r *run) logShows(t *testing.T, timeout time.Duration, offset int, re *regexp.Regexp, d *testJob) int {
	t.Helper()
	end := 0
	testutil.Eventually(t, timeout, fmt.Sprintf("the replicas' log showing %q", re), func() bool {
		if loc := re.FindStringIndex(r.since(offset)); loc != nil {
			end = offset + loc[1]
			return true
		}
		return false
	}, func() string {
		pods, _ := d.pods(context.Background())
		return fmt.Sprintf("pods: %s\nthe replicas' log:\n%s", describePods(pods), lastLines(r.since(offset), 30))
	})
	return end
}

// worldSizes lists trainstep's "elastic world size changed" lines as from->to.
func worldSizes(o outcome) []string {
	var sizes []string
	for _, e := range o.log.FilterMessage("elastic world size changed").All() {
		m := e.ContextMap()
		sizes = append(sizes, fmt.Sprintf("%v->%v", m["from"], m["to"]))
	}
	return sizes
}

// elasticJobRun is the elastic job of the lost-node test: a 2..3 PyTorchJob of real
// torchrun with two workers on the survivor (worker 0, the rendezvous host, among them) and
// the third on the victim. Where the workers go is the slots': the survivor advertises two,
// the victim one, and only once two workers are placed on the survivor.
type elasticJobRun struct {
	d *testJob
	r *run
	// lostIndex is the worker on the victim.
	lostIndex int
	// killedAt and shrunk are offsets in the replicas' log: at the kill, and where the
	// survivors logged their world of 2.
	killedAt, shrunk int
	// replacement is the lost worker's replacement, as first seen, unplaced.
	replacement corev1.Pod
}

// startElastic starts the elastic job with --node-lost-timeout 5s and returns once its three
// workers run, two on first and one on victim.
func startElastic(t *testing.T, c *cluster.Cluster, first, victim string) *elasticJobRun {
	t.Helper()
	setElasticSlots(t, c, first, 2)
	d := &testJob{c: c, ns: c.Namespace(t), name: "elastic"}
	d.ckpt = filepath.Join("/var/tmp", "trainstep-nodes-"+d.ns)
	t.Cleanup(func() { _ = os.RemoveAll(d.ckpt) })
	d.manifest = []byte(fmt.Sprintf(elasticJob, d.ckpt, elasticSteps))
	e := &elasticJobRun{d: d, r: d.start(t, 5*time.Second), lostIndex: -1}

	var workers []corev1.Pod
	testutil.Eventually(t, 2*time.Minute, "two workers placed on "+first+", worker 0 among them", func(ctx context.Context) (bool, error) {
		var err error
		workers, err = d.workerPods(ctx)
		return len(workers) == 3 && onNode(workers, first) == 2 && workerOn(workers, 0) == first, err
	}, func() string { return describeWorkers(workers) })
	setElasticSlots(t, c, victim, 1)
	testutil.Eventually(t, 2*time.Minute, "the third worker running on "+victim, func(ctx context.Context) (bool, error) {
		var err error
		workers, err = d.workerPods(ctx)
		running := 0
		for _, p := range workers {
			if p.Status.Phase == corev1.PodRunning {
				running++
			}
		}
		return running == 3 && onNode(workers, victim) == 1, err
	}, func() string { return describeWorkers(workers) })
	for _, p := range workers {
		if p.Spec.NodeName == victim {
			fmt.Sscan(p.Labels[v1alpha1.LabelReplicaIndex], &e.lostIndex)
		}
	}
	return e
}

// trainingAt matches rank 0's step lines at a world of world ranks.
func trainingAt(world int) *regexp.Regexp {
	return regexp.MustCompile(fmt.Sprintf(`step \d+ loss \S+ world size %d\n`, world))
}

// waitTraining waits until the ranks train at world size 3 past a checkpoint.
func (e *elasticJobRun) waitTraining(t *testing.T) {
	t.Helper()
	e.r.logShows(t, 4*time.Minute, 0, trainingAt(3), e.d)
	if _, err := os.Stat(filepath.Join(e.d.ckpt, "checkpoint.pt")); err != nil {
		t.Fatalf("training at world size 3 without a checkpoint: %v", err)
	}
}

// waitShrunk waits, after the kill, until the survivors train on at world size 2, the job's
// minReplicas, from the checkpoint, and trainstep replaced the lost worker with a pod that
// waits for capacity (the survivor's slots are taken, the victim is down).
func (e *elasticJobRun) waitShrunk(t *testing.T, killed time.Time) {
	t.Helper()
	e.shrunk = e.r.logShows(t, 3*time.Minute, e.killedAt, regexp.MustCompile(`world size 2 \(agent restart [1-9]`), e.d)
	e.r.logShows(t, 2*time.Minute, e.shrunk, trainingAt(2), e.d)
	t.Logf("the elastic job's survivors train at world size 2 %s after the kill", time.Since(killed).Round(100*time.Millisecond))
	testutil.Eventually(t, 2*time.Minute, fmt.Sprintf("worker %d replaced, its replacement unplaced", e.lostIndex), func(ctx context.Context) (bool, error) {
		workers, err := e.d.workerPods(ctx)
		for _, p := range workers {
			if p.Labels[v1alpha1.LabelReplicaIndex] == fmt.Sprint(e.lostIndex) && p.Labels[v1alpha1.LabelAttempt] != "0" {
				e.replacement = p
				return p.Spec.NodeName == "", err
			}
		}
		return false, err
	})
}

// checkGrewBack checks the elastic job's end, once the victim returned with its slot: the
// replacement joined there and the ranks re-formed a world of 3 and finished; the lost
// worker was replaced for free, and only it.
func (e *elasticJobRun) checkGrewBack(t *testing.T, o outcome, victim string) {
	t.Helper()
	if o.err != nil || o.res.Phase != result.PhaseSucceeded {
		t.Fatalf("run: phase %s (%s: %s), error %v; want Succeeded; replicas' log:\n%s", o.res.Phase, o.res.Reason, o.res.Message, o.err, lastLines(o.stderr.String(), 40))
	}
	if o.res.Restarts != 0 {
		t.Errorf("restarts = %d, want 0: a worker lost with its node is replaced for free", o.res.Restarts)
	}
	if got := fmt.Sprint(o.res.Metrics["world"]); got != "3" {
		t.Errorf("metrics %v, want the final world of 3 ranks", o.res.Metrics)
	}
	if steps, err := strconv.Atoi(fmt.Sprint(o.res.Metrics["steps"])); err != nil || steps < elasticSteps {
		t.Errorf("metrics %v, want at least %d steps", o.res.Metrics, elasticSteps)
	}
	sizes := worldSizes(o)
	shrank := slices.Index(sizes, "3->2")
	if shrank < 0 || !slices.Contains(sizes[shrank:], "2->3") {
		t.Errorf("trainstep's world sizes %v, want 3->2 when the node was lost, then 2->3", sizes)
	}
	var recreated []string
	for _, e := range o.log.FilterMessage("recreating replica").All() {
		recreated = append(recreated, fmt.Sprint(e.ContextMap()["replica"]))
	}
	if want := fmt.Sprintf("Worker/%d", e.lostIndex); len(recreated) != 1 || !strings.EqualFold(recreated[0], want) {
		t.Errorf("replicas recreated: %v, want only the lost %s", recreated, want)
	}
	if !regexp.MustCompile(`world size 3 \(agent restart [1-9]`).MatchString(e.r.since(e.shrunk)) {
		t.Errorf("the ranks never re-formed a world of 3 after the shrink:\n%s", lastLines(e.r.since(e.shrunk), 40))
	}
	for _, rep := range o.res.Replicas {
		if rep.Index == e.lostIndex && rep.Node != victim {
			t.Errorf("worker %d ended on %q, want the returned %s", e.lostIndex, rep.Node, victim)
		}
		if rep.WorldSize != 3 {
			t.Errorf("worker %d: world size %d in replicas.json, want 3", rep.Index, rep.WorldSize)
		}
	}
	// The replacement is a new pod, and it ran on the returned node (cleanPodPolicy None
	// keeps it).
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pod, err := e.d.c.Client.CoreV1().Pods(e.d.ns).Get(ctx, e.replacement.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pod.UID != e.replacement.UID || pod.Spec.NodeName != victim {
		t.Errorf("worker %d's replacement %s (uid %s) ran on %q as uid %s, want on %s", e.lostIndex, pod.Name, e.replacement.UID, pod.Spec.NodeName, pod.UID, victim)
	}
}

// workerOn is the node worker index runs on ("" when it is not placed).
func workerOn(workers []corev1.Pod, index int) string {
	for _, p := range workers {
		if p.Labels[v1alpha1.LabelReplicaIndex] == fmt.Sprint(index) {
			return p.Spec.NodeName
		}
	}
	return ""
}

func describeWorkers(workers []corev1.Pod) string {
	var parts []string
	for _, p := range workers {
		parts = append(parts, fmt.Sprintf("%s %s on %q", p.Name, p.Status.Phase, p.Spec.NodeName))
	}
	return "workers: " + strings.Join(parts, ", ")
}
