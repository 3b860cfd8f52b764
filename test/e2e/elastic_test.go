package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/trainstep/trainstep/internal/testutil"
	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
)

// torchElasticTrainPath is where the elastic training script is in torchImage.
const torchElasticTrainPath = "/train/elastic_train.py"

// elasticSlotPrefix names the extended resources the tests give the real node, one per
// worker, so that a test decides how many workers fit; each test has a resource of its own
// (elasticSlot), so that the two elastic tests run side by side.
const elasticSlotPrefix = "trainstep.dev/elastic-slot-"

// torchElasticJob is a Kubeflow PyTorchJob with elasticPolicy as Training
// Operator takes it. Every worker runs `python3 -m torch.distributed.run`
// driven by the env trainstep renders (PET_NNODES=2:3, PET_RDZV_ENDPOINT,
// PET_RDZV_BACKEND, PET_MAX_RESTARTS, PET_NPROC_PER_NODE). PET_TEE and
// PET_REDIRECTS are set because Debian's torch 1.13 cannot parse its own
// default "0" for them on Python 3.11 (Std.from_str returns None, and the
// agent fails on it); "1" parses, and tees each rank's stdout to the pod's log.
const torchElasticJob = `
apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata: {name: torchelastic}
spec:
  elasticPolicy: {rdzvBackend: c10d, minReplicas: 2, maxReplicas: 3, maxRestarts: 10}
  nprocPerNode: "1"
  pytorchReplicaSpecs:
    Worker: {replicas: 3, restartPolicy: OnFailure, template: {spec: %[1]s}}
`

const torchElasticPodSpec = `{securityContext: ` + restrictedPod + `,
  containers: [{name: pytorch, image: torch, securityContext: ` + restrictedContainer + `,
  command: [python3, -m, torch.distributed.run, ` + torchElasticTrainPath + `],
  env: [{name: CKPT_DIR, value: /ckpt}, {name: STEPS, value: "3000"}, {name: STEP_SECONDS, value: "0.02"},
        {name: PET_TEE, value: "1"}, {name: PET_REDIRECTS, value: "1"}],
  resources: {requests: {%[2]s: 1}, limits: {%[2]s: 1}},
  volumeMounts: [{name: ckpt, mountPath: /ckpt}]}],
  nodeSelector: {kubernetes.io/hostname: ` + realNodeName + `},
  volumes: [{name: ckpt, persistentVolumeClaim: {claimName: %[1]q}}]}`

// elasticSlot is the test's own elastic-slot resource, named after its namespace.
func (e *e2e) elasticSlot() corev1.ResourceName {
	return corev1.ResourceName(elasticSlotPrefix + e.namespace[len(e.namespace)-5:])
}

// setElasticSlots advertises n elastic slots on the real node (the way a
// device plugin advertises GPUs); the test's end takes them away.
func (e *e2e) setElasticSlots(t *testing.T, n int) {
	t.Helper()
	slot := e.elasticSlot()
	patch := fmt.Sprintf(`[{"op":"add","path":"/status/capacity/%s","value":"%d"}]`, strings.ReplaceAll(string(slot), "/", "~1"), n)
	if _, err := e.c.Client.CoreV1().Nodes().Patch(context.Background(), realNodeName, types.JSONPatchType, []byte(patch), metav1.PatchOptions{}, "status"); err != nil {
		t.Fatalf("advertising %d elastic slots: %v", n, err)
	}
	t.Cleanup(func() {
		patch := fmt.Sprintf(`[{"op":"remove","path":"/status/capacity/%s"}]`, strings.ReplaceAll(string(slot), "/", "~1"))
		_, _ = e.c.Client.CoreV1().Nodes().Patch(context.Background(), realNodeName, types.JSONPatchType, []byte(patch), metav1.PatchOptions{}, "status")
	})
	// The kubelet derives allocatable, what the scheduler reads, from the
	// capacity on its next status update, some seconds later.
	testutil.Eventually(t, time.Minute, fmt.Sprintf("%d elastic slots allocatable", n), func(ctx context.Context) (bool, error) {
		node, err := e.c.Client.CoreV1().Nodes().Get(ctx, realNodeName, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		q, ok := node.Status.Allocatable[slot]
		return ok && q.Value() == int64(n), nil
	})
}

// startElastic imports the torch image, submits the elastic job through the
// shipped ClusterWorkflowTemplate and returns the Workflow's name and the
// checkpoint directory; beforeSubmit (if any) runs once the image is in.
func (e *e2e) startElastic(t *testing.T, beforeSubmit func()) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := importTorchImage(ctx, e.c, repoRoot(t)); err != nil {
		t.Fatal(err)
	}
	if beforeSubmit != nil {
		beforeSubmit()
	}
	e.checkpointClaim(t, "checkpoints")
	manifest, err := json.Marshal(fmt.Sprintf(torchElasticJob, fmt.Sprintf(torchElasticPodSpec, "checkpoints", e.elasticSlot())))
	if err != nil {
		t.Fatal(err)
	}
	return e.submit(t, workflowFromYAML(t, fmt.Sprintf(mpiWorkflow, torchImage, manifest, pythonImage)))
}

// workerPods lists the job's workers (inside Argo the job's name is the
// template's hash, not the manifest's, so they are found by label).
func (e *e2e) workerPods(ctx context.Context) ([]corev1.Pod, error) {
	pods, err := e.c.Client.CoreV1().Pods(e.namespace).List(ctx, metav1.ListOptions{LabelSelector: v1alpha1.LabelReplicaType + "=worker"})
	if err != nil {
		return nil, err
	}
	return pods.Items, nil
}

// workerLogsShow waits until some worker's log holds want. Finished workers
// count too: a worker that ran to the end still logged what it did.
func (e *e2e) workerLogsShow(t *testing.T, timeout time.Duration, want string) {
	t.Helper()
	testutil.Eventually(t, timeout, "a worker's log showing "+want, func(ctx context.Context) (bool, error) {
		pods, err := e.workerPods(ctx)
		if err != nil {
			return false, nil
		}
		for _, p := range pods {
			if p.Spec.NodeName == "" {
				continue
			}
			data, err := e.c.Client.CoreV1().Pods(e.namespace).GetLogs(p.Name, &corev1.PodLogOptions{Container: "pytorch"}).DoRaw(ctx)
			if err == nil && strings.Contains(string(data), want) {
				return true, nil
			}
		}
		return false, nil
	}, func() string { return e.podSummary(t) + e.workerLogTails(20) })
}

// workerLogTails is the end of every placed worker's log, for a failure's
// message.
func (e *e2e) workerLogTails(lines int64) string {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	pods, err := e.workerPods(ctx)
	if err != nil {
		return "listing workers: " + err.Error()
	}
	var b strings.Builder
	for _, p := range pods {
		if p.Spec.NodeName == "" {
			fmt.Fprintf(&b, "%s: not placed\n", p.Name)
			continue
		}
		data, err := e.c.Client.CoreV1().Pods(e.namespace).GetLogs(p.Name, &corev1.PodLogOptions{Container: "pytorch", TailLines: &lines}).DoRaw(ctx)
		if err != nil {
			fmt.Fprintf(&b, "%s: reading its log: %v\n", p.Name, err)
			continue
		}
		fmt.Fprintf(&b, "last lines of %s:\n  %s\n", p.Name, strings.ReplaceAll(strings.TrimSpace(string(data)), "\n", "\n  "))
	}
	return b.String()
}

// finishElastic waits for the Workflow and checks what every elastic run
// ends with: Succeeded, no restart, the final loss in metrics, and the world
// sizes the ranks logged.
func (e *e2e) finishElastic(t *testing.T, name string, worlds ...string) {
	t.Helper()
	wf := e.waitForWorkflow(t, name, 8*time.Minute, "Succeeded", "Failed", "Error")
	train := podNode(t, wf, "train")
	stepLog := e.logOf(t, e.podOfNode(t, wf, train).Name, "main")
	if phaseOf(wf) != "Succeeded" {
		t.Fatalf("Workflow %s: phase %s, want Succeeded; nodes:\n%s\nthe train step's log:\n%s", name, phaseOf(wf), nodeSummary(wf), lastLines(stepLog, 80))
	}
	if got := param(t, train.Outputs.Parameters, "restarts"); got != "0" {
		t.Errorf("train output restarts = %s, want 0", got)
	}
	for _, want := range append(worlds, "step 3000 loss") {
		if !strings.Contains(stepLog, want) {
			t.Errorf("the train step's log lacks %q:\n%s", want, lastLines(stepLog, 80))
		}
	}
	var metrics struct {
		Loss  *float64 `json:"loss"`
		Steps int      `json:"steps"`
		World int      `json:"world"`
	}
	if err := json.Unmarshal([]byte(param(t, train.Outputs.Parameters, "metrics")), &metrics); err != nil || metrics.Loss == nil || metrics.Steps != 3000 || metrics.World != 3 {
		t.Errorf("train output metrics = %s, want the final loss after 3000 steps at world size 3", param(t, train.Outputs.Parameters, "metrics"))
	}
	var replicas []struct {
		Index     int `json:"index"`
		WorldSize int `json:"worldSize"`
	}
	if err := json.Unmarshal([]byte(param(t, train.Outputs.Parameters, "replicas")), &replicas); err != nil {
		t.Fatal(err)
	}
	for _, r := range replicas {
		if r.WorldSize != 3 {
			t.Errorf("replicas.json: worker %d world size %d, want 3", r.Index, r.WorldSize)
		}
	}
	t.Logf("the train step's log, elastic lines:\n%s", grepLines(stepLog, "world size", "elastic world size", "waiting for capacity", "job ended"))
	t.Logf("timeline:\n%s", e.elasticTimeline(e.podOfNode(t, wf, train)))
}

// elasticTimeline tells when the step started, when each worker was placed
// and started, and when the ranks logged each world size (the kubelet's
// timestamps of the workers' log lines).
func (e *e2e) elasticTimeline(step *corev1.Pod) string {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var lines []string
	stamp := func(at time.Time, what string) {
		lines = append(lines, at.UTC().Format("15:04:05.000")+"  "+what)
	}
	if step.Status.StartTime != nil {
		stamp(step.Status.StartTime.Time, "step pod "+step.Name+" started")
	}
	pods, err := e.workerPods(ctx)
	if err != nil {
		return err.Error()
	}
	for _, p := range pods {
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionTrue {
				stamp(c.LastTransitionTime.Time, p.Name+" scheduled")
			}
		}
		data, err := e.c.Client.CoreV1().Pods(e.namespace).GetLogs(p.Name, &corev1.PodLogOptions{Container: "pytorch", Timestamps: true}).DoRaw(ctx)
		if err != nil {
			continue
		}
		for _, l := range strings.Split(string(data), "\n") {
			ts, text, ok := strings.Cut(l, " ")
			if !ok || !strings.Contains(text, ": world size") && !strings.Contains(text, "resuming at step") && !strings.Contains(text, "done at step") {
				continue
			}
			if at, err := time.Parse(time.RFC3339Nano, ts); err == nil {
				stamp(at, p.Name+" "+text)
			}
		}
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

// logNow logs what the test did with the time, for the run's timeline.
func logNow(t *testing.T, format string, args ...any) {
	t.Helper()
	t.Logf("%s  %s", time.Now().UTC().Format("15:04:05.000"), fmt.Sprintf(format, args...))
}

// grepLines keeps the lines of s that hold any of parts.
func grepLines(s string, parts ...string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		for _, p := range parts {
			if strings.Contains(l, p) {
				out = append(out, l)
				break
			}
		}
	}
	return strings.Join(out, "\n")
}

// An elastic 2..3 job on a node with room for two of its workers (a
// placeholder pod holds the third slot) starts training at world size 2;
// once the placeholder is deleted the third worker is placed, torchrun's
// agents re-rendezvous and the ranks log world size 3; the job succeeds
// with the final loss in metrics and no restart.
func TestRealNodeElasticTorchrunGrowsWhenCapacityFreesUp(t *testing.T) {
	t.Parallel()
	e := setUp(t)
	e.setElasticSlots(t, 3)
	placeholder := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "placeholder", Namespace: e.namespace},
		Spec: corev1.PodSpec{NodeSelector: map[string]string{corev1.LabelHostname: realNodeName},
			Containers: []corev1.Container{{Name: "hold", Image: torchImage, Command: []string{"python3", "-c", "import time; time.sleep(86400)"},
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{e.elasticSlot(): resource.MustParse("1")}, Limits: corev1.ResourceList{e.elasticSlot(): resource.MustParse("1")}}}}},
	}
	restricted(&placeholder.Spec)
	name := e.startElastic(t, func() {
		if _, err := e.c.Client.CoreV1().Pods(e.namespace).Create(context.Background(), placeholder, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		testutil.Eventually(t, 2*time.Minute, "the placeholder running", func(ctx context.Context) (bool, error) {
			p, err := e.c.Client.CoreV1().Pods(e.namespace).Get(ctx, "placeholder", metav1.GetOptions{})
			return err == nil && p.Status.Phase == corev1.PodRunning, nil
		})
	})
	e.workerLogsShow(t, 4*time.Minute, "step 100 loss")
	e.workerLogsShow(t, time.Minute, "world size 2")
	logNow(t, "the ranks train at world size 2")
	if err := e.c.Client.CoreV1().Pods(e.namespace).Delete(context.Background(), "placeholder", *metav1.NewDeleteOptions(0)); err != nil {
		t.Fatal(err)
	}
	logNow(t, "deleted the placeholder: the third worker's slot is free")
	e.finishElastic(t, name, "world size 2", "world size 3")
}

// An elastic 2..3 job running 3 workers loses one to an eviction (a
// disruption) while room for it is gone: the two others carry on at world
// size 2; when room returns the replacement rejoins at world size 3; the
// job succeeds with no restart.
func TestRealNodeElasticTorchrunShrinksAndRejoinsAfterADisruption(t *testing.T) {
	t.Parallel()
	e := setUp(t)
	e.setElasticSlots(t, 3)
	name := e.startElastic(t, nil)
	e.workerLogsShow(t, 4*time.Minute, "world size 3")
	e.workerLogsShow(t, time.Minute, "step 200 loss")
	// Room for two: the evicted worker's replacement waits for capacity.
	e.setElasticSlots(t, 2)
	// The Eviction API is how `kubectl drain` and the cluster autoscaler
	// take a pod away: the API server puts DisruptionTarget
	// (EvictionByEvictionAPI) on it before deleting it.
	workers, err := e.c.Client.CoreV1().Pods(e.namespace).List(context.Background(), metav1.ListOptions{
		LabelSelector: v1alpha1.LabelReplicaType + "=worker," + v1alpha1.LabelReplicaIndex + "=2"})
	if err != nil || len(workers.Items) != 1 {
		t.Fatalf("finding worker-2: %v (%d pods)", err, len(workers.Items))
	}
	eviction := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: workers.Items[0].Name, Namespace: e.namespace}}
	if err := e.c.Client.CoreV1().Pods(e.namespace).EvictV1(context.Background(), eviction); err != nil {
		t.Fatalf("evicting %s: %v", workers.Items[0].Name, err)
	}
	logNow(t, "evicted %s", workers.Items[0].Name)
	// The survivors' ranks fail on the lost peer; their agents restart them
	// (agent restart 1) in a world of two, from the checkpoint.
	e.workerLogsShow(t, 3*time.Minute, "world size 2 (agent restart 1)")
	e.setElasticSlots(t, 3)
	logNow(t, "room for the third worker again")
	e.finishElastic(t, name, "world size 2 (agent restart 1)", "world size 3")
}
