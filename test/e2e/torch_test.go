package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/trainstep/trainstep/internal/testutil"
	"github.com/trainstep/trainstep/test/cluster"
)

// torchImage holds this machine's python3 with Debian's python3-torch and the DDP
// training of trainstep's tests (importTorchImage).
const torchImage = "docker.io/local/torch:host"

// torchTrainPath is where the training script is in torchImage.
const torchTrainPath = "/train/ddp_train.py"

// torchJob is a Kubeflow PyTorchJob as Training Operator takes it, opted in to the
// per-job Service layout (serviceLayout: PerJob): DDP in every pod, driven only by the
// env trainstep renders (MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE), the process group
// formed at the master's name in the job's Service through cluster DNS. The checkpoint
// directory is a hostPath, so a recreated master finds it. (torch.distributed.run cannot
// start workers with Debian's python3-torch 1.13 on Python 3.11: its Std.from_str("0")
// returns None, and the agent fails on it; the script is run directly.)
const torchJob = `
apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata: {name: torchddp}
spec:
  nprocPerNode: "1"
  serviceLayout: PerJob
  runPolicy: {backoffLimit: 1, cleanPodPolicy: None}
  pytorchReplicaSpecs:
    Master: {replicas: 1, restartPolicy: OnFailure, template: {spec: %[1]s}}
    Worker: {replicas: 2, restartPolicy: OnFailure, template: {spec: %[1]s}}
`

const torchPodSpec = `{securityContext: ` + restrictedPod + `,
  containers: [{name: pytorch, image: torch, securityContext: ` + restrictedContainer + `,
  command: [python3, ` + torchTrainPath + `],
  env: [{name: CKPT_DIR, value: /ckpt}, {name: STEPS, value: "5000"}],
  volumeMounts: [{name: ckpt, mountPath: /ckpt}]}],
  volumes: [{name: ckpt, persistentVolumeClaim: {claimName: %q}}]}`

// TestRealNodePyTorchDDPRestartsAsAWholeWhenARankDies runs real DDP training (gloo on
// CPU) in three pods of the real node, through the shipped ClusterWorkflowTemplate, and
// kills rank 2's training process from the node while it trains (exit 137, as the OOM
// killer would): the peers' collective calls break, the job restarts as a whole from rank
// 0's checkpoint and succeeds, for one restart.
func TestRealNodePyTorchDDPRestartsAsAWholeWhenARankDies(t *testing.T) {
	t.Parallel()
	e := setUp(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	started := time.Now()
	if err := importTorchImage(ctx, e.c, repoRoot(t)); err != nil {
		t.Fatal(err)
	}
	t.Logf("torch image built and imported in %s", time.Since(started).Round(100*time.Millisecond))
	ckpt := e.checkpointClaim(t, "checkpoints")
	manifest, err := json.Marshal(fmt.Sprintf(torchJob, fmt.Sprintf(torchPodSpec, "checkpoints")))
	if err != nil {
		t.Fatal(err)
	}
	wf := workflowFromYAML(t, fmt.Sprintf(mpiWorkflow, torchImage, manifest, pythonImage))
	name := e.submit(t, wf)
	var pid int
	testutil.Eventually(t, 3*time.Minute, "rank 2 training past its first checkpoints", func(ctx context.Context) (bool, error) {
		pid = trainingProcess(e.jobName(ctx), 2)
		_, err := os.Stat(filepath.Join(ckpt, "checkpoint.pt"))
		return pid != 0 && err == nil, nil
	}, func() string { return e.podSummary(t) })
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("killing rank 2 (pid %d): %v", pid, err)
	}
	t.Logf("killed rank 2 (pid %d) from the node", pid)
	wf = e.waitForWorkflow(t, name, 8*time.Minute, "Succeeded", "Failed", "Error")
	train := podNode(t, wf, "train")
	stepLog := e.logOf(t, e.podOfNode(t, wf, train).Name, "main")
	if phaseOf(wf) != "Succeeded" {
		t.Fatalf("Workflow %s: phase %s, want Succeeded; nodes:\n%s\nthe train step's log:\n%s", name, phaseOf(wf), nodeSummary(wf), lastLines(stepLog, 60))
	}
	if got := param(t, train.Outputs.Parameters, "restarts"); got != "1" {
		t.Errorf("train output restarts = %s, want 1", got)
	}
	checkJobRestartLogged(t, stepLog, "worker-1 exit 137")
	for _, want := range []string{"rank 0: resuming at step", "step 5000 loss"} {
		if !strings.Contains(stepLog, want) {
			t.Errorf("the train step's log lacks %q:\n%s", want, lastLines(stepLog, 60))
		}
	}
	var metrics struct {
		Loss  *float64 `json:"loss"`
		Steps int      `json:"steps"`
	}
	if err := json.Unmarshal([]byte(param(t, train.Outputs.Parameters, "metrics")), &metrics); err != nil || metrics.Loss == nil || metrics.Steps != 5000 {
		t.Errorf("train output metrics = %s, want the final loss after 5000 steps", param(t, train.Outputs.Parameters, "metrics"))
	}
	// The ranks met at the master's name in the job's one Service (cleanPodPolicy
	// None keeps the pods to look at).
	job := param(t, train.Outputs.Parameters, "job-name")
	listCtx, cancelList := context.WithTimeout(context.Background(), time.Minute)
	defer cancelList()
	pods, services, err := e.jobObjects(listCtx, job)
	if err != nil {
		t.Fatal(err)
	}
	// Its one headless Service, and no <job>-status: with deploy/ alone the step may keep
	// no Secret, so it serves no progress endpoint.
	if !slices.Equal(services, []string{job}) {
		t.Errorf("the job's Services %v, want its one Service %s", services, job)
	}
	for _, p := range pods {
		for _, env := range p.Spec.Containers[0].Env {
			if env.Name == "MASTER_ADDR" && env.Value != job+"-master-0."+job {
				t.Errorf("pod %s: MASTER_ADDR %q, want %s-master-0.%s", p.Name, env.Value, job, job)
			}
		}
		if p.Spec.Hostname != p.Name || p.Spec.Subdomain != job {
			t.Errorf("pod %s: hostname %q subdomain %q, want %q and %q", p.Name, p.Spec.Hostname, p.Spec.Subdomain, p.Name, job)
		}
	}
}

// trainingProcess finds, on this host, the DDP training process of job's given rank; 0
// when there is none.
func trainingProcess(job string, rank int) int {
	return processWith(job, "ddp_train.py", "RANK="+strconv.Itoa(rank))
}

// importTorchImage packs this machine's python3, Debian's python3-torch and the Python
// packages it imports, the libraries they load, and the tests' training scripts.
func importTorchImage(ctx context.Context, c *cluster.Cluster, root string) error {
	files, err := cluster.TorchImageFiles(map[string]string{
		torchTrainPath:        filepath.Join(root, "executor", "testdata", "ddp_train.py"),
		torchElasticTrainPath: filepath.Join(root, "executor", "testdata", "elastic_train.py"),
	})
	if err != nil {
		return err
	}
	return c.ImportHostFilesImage(ctx, torchImage, files)
}
