package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// allReduceJob is the shipped PyTorch-style job of the demo trainer: a master (rank 0) and
// three workers summing their gradients around a TCP ring.
const allReduceJob = "workflows/jobs/demo-allreduce.yaml"

// clusterTemplateWorkflow is docs/argo.md's "from your own DAG" call of the
// ClusterWorkflowTemplate (templateRef with clusterScope), the job passed unchanged as the
// job parameter, the replicas' image as the image parameter (the step's is the template's),
// and a next task reading its outputs.
const clusterTemplateWorkflow = `
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata:
  generateName: allreduce-
spec:
  entrypoint: main
  serviceAccountName: trainstep-executor
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
                - {name: metrics, value: "{{tasks.train.outputs.parameters.metrics}}"}
                - {name: replicas, value: "{{tasks.train.outputs.parameters.replicas}}"}
    - name: report
      inputs:
        parameters:
          - name: metrics
          - name: replicas
      # What PodSecurity restricted asks of every container; the image's files are readable
      # by any user.
      securityContext: {runAsNonRoot: true, runAsUser: 65532, seccompProfile: {type: RuntimeDefault}}
      script:
        image: "%[3]s"
        securityContext: {allowPrivilegeEscalation: false, capabilities: {drop: [ALL]}}
        command: [python]
        env:
          - {name: METRICS, value: "{{inputs.parameters.metrics}}"}
          - {name: REPLICAS, value: "{{inputs.parameters.replicas}}"}
        source: |
          import json, os
          metrics, replicas = json.loads(os.environ["METRICS"]), json.loads(os.environ["REPLICAS"])
          print(f"loss {metrics['loss']} after {metrics['steps']} steps on {len(replicas)} replicas")
`

// TestRealNodePyTorchJobThroughClusterWorkflowTemplate runs the shipped PyTorch-style job
// (workflows/jobs/demo-allreduce.yaml, passed unchanged) through the shipped
// ClusterWorkflowTemplate, applied as shipped: the four ranks find rank 0 through
// MASTER_ADDR, its name in the job's Service, and each other around the ring, train 150 synchronous
// steps, and the metrics and replica list reach the next task. Its namespace enforces
// PodSecurity restricted, as every test's does: the step pod, Argo's containers, the
// replicas and the next task all pass it.
func TestRealNodePyTorchJobThroughClusterWorkflowTemplate(t *testing.T) {
	t.Parallel()
	e := setUp(t)
	e.applyExamplesPolicy(t)
	e.checkpointClaim(t, allReduceClaim)
	manifest, err := json.Marshal(string(readFile(t, filepath.Join(repoRoot(t), allReduceJob))))
	if err != nil {
		t.Fatal(err)
	}
	wf := workflowFromYAML(t, fmt.Sprintf(clusterTemplateWorkflow, localImage, manifest, pythonImage))
	started := time.Now()
	name := e.submit(t, wf)
	wf = e.waitForWorkflow(t, name, 5*time.Minute, "Succeeded", "Failed", "Error")
	t.Logf("Workflow %s ended %s in %s", name, phaseOf(wf), time.Since(started).Round(100*time.Millisecond))
	if phaseOf(wf) != "Succeeded" {
		t.Fatalf("Workflow %s: phase %s, want Succeeded; nodes:\n%s", name, phaseOf(wf), nodeSummary(wf))
	}
	train := podNode(t, wf, "train")
	if got := param(t, train.Outputs.Parameters, "phase"); got != "Succeeded" {
		t.Errorf("train output phase = %q, want Succeeded", got)
	}
	job := param(t, train.Outputs.Parameters, "job-name")
	var metrics struct {
		Loss  *float64 `json:"loss"`
		Steps int      `json:"steps"`
	}
	metricsJSON := param(t, train.Outputs.Parameters, "metrics")
	if err := json.Unmarshal([]byte(metricsJSON), &metrics); err != nil || metrics.Loss == nil || metrics.Steps != 150 {
		t.Fatalf("train output metrics = %s (%v), want rank 0's loss after the job's 150 steps", metricsJSON, err)
	}
	var replicas []struct {
		Type, Phase, Node string
	}
	if err := json.Unmarshal([]byte(param(t, train.Outputs.Parameters, "replicas")), &replicas); err != nil || len(replicas) != 4 {
		t.Fatalf("train output replicas = %s (%v), want the master and three workers", param(t, train.Outputs.Parameters, "replicas"), err)
	}
	// Rank 0 decides: the job succeeds when it does, and a worker still finishing its
	// last step then is stopped (cleanPodPolicy Running).
	for _, r := range replicas {
		want := r.Phase == "Succeeded" || (r.Type == "Worker" && r.Phase == "Stopped")
		if !want || r.Node != realNodeName {
			t.Errorf("replica %+v: want it Succeeded (a worker: or Stopped) on %s", r, realNodeName)
		}
	}
	report := podNode(t, wf, "report")
	reportLog := e.logOf(t, e.podOfNode(t, wf, report).Name, "main")
	if want := fmt.Sprintf("loss %v after 150 steps on 4 replicas", *metrics.Loss); !strings.Contains(reportLog, want) {
		t.Errorf("report's log %q does not say %q", reportLog, want)
	}

	// The step's log carries rank 0's training, as `kubectl logs <step-pod> -c main` shows.
	stepLog := e.logOf(t, e.podOfNode(t, wf, train).Name, "main")
	if !strings.Contains(stepLog, "[master-0]") || !trainingLine.MatchString(stepLog) {
		t.Errorf("the train step's log has no training line of [master-0]:\n%s", lastLines(stepLog, 30))
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pods, _, err := e.jobObjects(ctx, job)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods {
		var addr string
		for _, env := range p.Spec.Containers[0].Env {
			if env.Name == "MASTER_ADDR" {
				addr = env.Value
			}
		}
		if addr != job+"-master-0."+job || p.Spec.Hostname != p.Name || p.Spec.Subdomain != job {
			t.Errorf("pod %s: MASTER_ADDR %q, hostname %q, subdomain %q; want rank 0 in the job's Service, %s-master-0.%s, and the pod in it",
				p.Name, addr, p.Spec.Hostname, p.Spec.Subdomain, job, job)
		}
		if p.Spec.Containers[0].Image != localImage || p.Status.Phase != corev1.PodSucceeded {
			t.Errorf("pod %s: image %s phase %s, want %s Succeeded", p.Name, p.Spec.Containers[0].Image, p.Status.Phase, localImage)
		}
		if log := e.logOf(t, p.Name, "pytorch"); !strings.Contains(log, "ring ready") {
			t.Errorf("pod %s never joined the ring:\n%s", p.Name, lastLines(log, 10))
		}
	}
}
