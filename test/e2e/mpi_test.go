package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/trainstep/trainstep/pkg/result"
	"github.com/trainstep/trainstep/test/cluster"
)

// mpiImage holds this machine's OpenMPI, ssh and sshd, and the all-reduce program
// (importMPIImage).
const mpiImage = "docker.io/local/openmpi:host"

// allReduceProgramPath is where the all-reduce program is in mpiImage.
const allReduceProgramPath = cluster.MPIAllReduceProgramPath

// mpiAllReduceJob is an OpenMPI job as a user writes it for PodSecurity `restricted`, as
// Kubeflow's MPI Operator examples run non-root: every process runs as the image's user
// mpiuser, the key pair is mounted in its home (sshAuthMountPath), and each worker runs
// sshd as that user on port 2222 with the image's configuration for it. The launcher's
// mpirun starts one rank on each of the two workers over SSH, by the hostfile's names.
// launcherCreationPolicy
// WaitForWorkersReady creates the launcher only once both workers are Ready, when their
// names resolve, so its first mpirun succeeds and backoffLimit 0 allows no restart.
// cleanPodPolicy All removes the workers, which never exit, and the launcher once the job
// ends. The image is the ClusterWorkflowTemplate's image parameter.
var mpiAllReduceJob = mpiJobManifest("allreduce", `[-n, "2", `+allReduceProgramPath+`]`, "", `
              command: [/usr/sbin/sshd]
              args: [-De, -f, `+cluster.MPIUserSSHDConfig+`]`, 0)

// mpiJobManifest is such an OpenMPI job: mpirun's arguments, the workers' restartPolicy
// (their default when empty), the worker container's lines below its image (command,
// args, env) and backoffLimit are the caller's.
func mpiJobManifest(name, mpirunArgs, workerRestartPolicy, workerLines string, backoffLimit int) string {
	if workerRestartPolicy != "" {
		workerRestartPolicy = "\n      restartPolicy: " + workerRestartPolicy
	}
	return `
apiVersion: trainstep.dev/v1alpha1
kind: TrainJob
metadata:
  name: ` + name + `
spec:
  framework: mpi
  slotsPerWorker: 1
  launcherCreationPolicy: WaitForWorkersReady
  sshAuthMountPath: ` + cluster.MPIUserSSHDir + `
  replicaSpecs:
    Launcher:
      template:
        spec:
          securityContext: ` + mpiUserPod + `
          containers:
            - name: mpi-launcher
              image: openmpi-allreduce
              command: [mpirun]
              args: ` + mpirunArgs + `
              securityContext: ` + restrictedContainer + `
    Worker:
      replicas: 2` + workerRestartPolicy + `
      template:
        spec:
          securityContext: ` + mpiUserPod + `
          containers:
            - name: mpi-worker
              image: openmpi-allreduce` + workerLines + `
              securityContext: ` + restrictedContainer + `
  runPolicy:
    backoffLimit: ` + strconv.Itoa(backoffLimit) + `
    cleanPodPolicy: All
`
}

// mpiUserPod is restrictedPod with the MPI image's user.
var mpiUserPod = fmt.Sprintf(`{runAsNonRoot: true, runAsUser: %d, seccompProfile: {type: RuntimeDefault}}`, cluster.MPIUserID)

// mpiWorkflow calls the ClusterWorkflowTemplate with the MPI job, then a task reading its
// outputs.
const mpiWorkflow = `
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata:
  generateName: mpi-
spec:
  entrypoint: main
  serviceAccountName: trainstep-executor
  securityContext: ` + restrictedPod + `
  templates:
    - name: main
      dag:
        tasks:
          - name: train
            templateRef: {name: trainstep, template: train, clusterScope: true}
            arguments:
              parameters:
                - {name: image, value: "%[1]s"}
                - name: job
                  value: %[2]s
          - name: report
            depends: train
            template: report
            arguments:
              parameters:
                - {name: phase, value: "{{tasks.train.outputs.parameters.phase}}"}
                - {name: replicas, value: "{{tasks.train.outputs.parameters.replicas}}"}
    - name: report
      inputs:
        parameters:
          - name: phase
          - name: replicas
      script:
        image: "%[3]s"
        command: [python]
        securityContext: ` + restrictedContainer + `
        env:
          - {name: PHASE, value: "{{inputs.parameters.phase}}"}
          - {name: REPLICAS, value: "{{inputs.parameters.replicas}}"}
        source: |
          import json, os
          replicas = json.loads(os.environ["REPLICAS"])
          print(f"job {os.environ['PHASE']} with {' '.join(sorted(r['type'] for r in replicas))}")
`

// TestRealNodeMPIJobThroughClusterWorkflowTemplate runs an OpenMPI job through the shipped
// ClusterWorkflowTemplate: the launcher's real mpirun reaches the two workers' sshd over
// SSH with the key of the job's Secret, by the names of the hostfile ConfigMap, which
// resolve through the job's headless Service; the two ranks all-reduce over pod-to-pod
// TCP. The step's outputs reach the next task, and no object of the job is left.
func TestRealNodeMPIJobThroughClusterWorkflowTemplate(t *testing.T) {
	t.Parallel()
	e := setUp(t)
	// The job's SSH key is in a Secret: a namespace that runs MPI jobs applies deploy/secrets/.
	e.applySecretsAddition(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	started := time.Now()
	if err := importMPIImage(ctx, t, e.c); err != nil {
		t.Fatal(err)
	}
	t.Logf("MPI image built and imported in %s", time.Since(started).Round(100*time.Millisecond))

	manifest, err := json.Marshal(mpiAllReduceJob)
	if err != nil {
		t.Fatal(err)
	}
	wf := workflowFromYAML(t, fmt.Sprintf(mpiWorkflow, mpiImage, manifest, pythonImage))
	started = time.Now()
	name := e.submit(t, wf)
	wf = e.waitForWorkflow(t, name, 5*time.Minute, "Succeeded", "Failed", "Error")
	t.Logf("Workflow %s ended %s in %s", name, phaseOf(wf), time.Since(started).Round(100*time.Millisecond))
	train := podNode(t, wf, "train")
	stepLog := e.logOf(t, e.podOfNode(t, wf, train).Name, "main")
	if phaseOf(wf) != "Succeeded" {
		t.Fatalf("Workflow %s: phase %s, want Succeeded; nodes:\n%s\nthe train step's log:\n%s", name, phaseOf(wf), nodeSummary(wf), lastLines(stepLog, 60))
	}
	if got := param(t, train.Outputs.Parameters, "phase"); got != "Succeeded" {
		t.Errorf("train output phase = %q, want Succeeded", got)
	}
	job := param(t, train.Outputs.Parameters, "job-name")
	if got := param(t, train.Outputs.Parameters, "restarts"); got != "0" {
		t.Errorf("job %s: restarts = %s, want 0: the launcher waited for Ready workers", job, got)
	}
	for _, want := range []string{"launcher waits until every worker is Ready", "every worker is Ready; creating the launcher"} {
		if !strings.Contains(stepLog, want) {
			t.Errorf("the train step's log lacks %q:\n%s", want, lastLines(stepLog, 60))
		}
	}
	var replicas []result.ReplicaStatus
	if err := json.Unmarshal([]byte(param(t, train.Outputs.Parameters, "replicas")), &replicas); err != nil {
		t.Fatalf("train output replicas: %v", err)
	}
	launchers := 0
	for _, r := range replicas {
		if r.Type == "Launcher" {
			launchers++
			t.Logf("job %s: the launcher restarted %d times", job, r.Restarts)
			if r.Restarts != 0 {
				t.Errorf("the launcher restarted %d times, want 0", r.Restarts)
			}
		}
	}
	if launchers != 1 {
		t.Errorf("train output replicas has %d launchers, want 1: %+v", launchers, replicas)
	}

	// Each rank ran on its own worker, named as the hostfile names it, and got the sum of
	// both ranks; mpirun relays the ranks' output into the launcher's log, which the step
	// streams.
	for rank := 0; rank < 2; rank++ {
		want := fmt.Sprintf("rank %d of 2 on %s-worker-%d: sum of ranks 1", rank, job, rank)
		if !strings.Contains(stepLog, want) {
			t.Errorf("the train step's log lacks the launcher's line %q:\n%s", want, lastLines(stepLog, 60))
		}
	}
	for _, line := range strings.Split(stepLog, "\n") {
		if strings.HasPrefix(line, "[launcher-0] rank ") {
			t.Log(line)
		}
	}
	if !strings.Contains(stepLog, "[launcher-0] rank 0 of 2") {
		t.Errorf("the train step's log does not prefix the launcher's lines with [launcher-0]:\n%s", lastLines(stepLog, 60))
	}

	report := podNode(t, wf, "report")
	if got := param(t, report.Inputs.Parameters, "phase"); got != "Succeeded" {
		t.Errorf("report's phase input = %q, want the train step's Succeeded", got)
	}
	if log, want := e.logOf(t, e.podOfNode(t, wf, report).Name, "main"), "job Succeeded with Launcher Worker Worker"; !strings.Contains(log, want) {
		t.Errorf("report's log %q does not say %q", log, want)
	}

	// cleanPodPolicy All: the step deleted every pod, and with the last one the job's
	// Service, hostfile ConfigMap and SSH Secret.
	pods, services, err := e.jobObjects(ctx, job)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods {
		t.Errorf("pod %s (%s) of the job is left after the step", p.Name, p.Status.Phase)
	}
	for _, s := range services {
		t.Errorf("Service %s of the job is left after the step", s)
	}
	selector := metav1.ListOptions{LabelSelector: jobNameLabel + "=" + job}
	configMaps, err := e.c.Client.CoreV1().ConfigMaps(e.namespace).List(ctx, selector)
	if err != nil {
		t.Fatal(err)
	}
	for _, cm := range configMaps.Items {
		t.Errorf("ConfigMap %s of the job is left after the step", cm.Name)
	}
	secrets, err := e.c.Client.CoreV1().Secrets(e.namespace).List(ctx, selector)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range secrets.Items {
		t.Errorf("Secret %s of the job is left after the step", s.Name)
	}
	// By name too, in case a label went missing.
	if _, err := e.c.Client.CoreV1().ConfigMaps(e.namespace).Get(ctx, job+"-config", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("ConfigMap %s-config: %v, want NotFound", job, err)
	}
	if _, err := e.c.Client.CoreV1().Secrets(e.namespace).Get(ctx, job+"-ssh", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("Secret %s-ssh: %v, want NotFound", job, err)
	}
}

// importMPIImage builds mpiImage from this machine's OpenMPI, ssh and sshd and the
// all-reduce program (cluster.OpenMPIImageFiles).
func importMPIImage(ctx context.Context, t *testing.T, c *cluster.Cluster) error {
	files, err := cluster.OpenMPIImageFiles(ctx, t.TempDir())
	if err != nil {
		return err
	}
	return c.ImportHostFilesImage(ctx, mpiImage, files)
}
