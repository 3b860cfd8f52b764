package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// progressTorchJob is real DDP training whose rank 0 reports its progress
// every 300 of 3000 steps with the KEP's stdlib snippet, after one post
// with a wrong token (executor/testdata/ddp_train.py).
const progressTorchJob = `
apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata: {name: torchprogress}
spec:
  nprocPerNode: "1"
  runPolicy: {backoffLimit: 0}
  pytorchReplicaSpecs:
    Master: {replicas: 1, restartPolicy: OnFailure, template: {spec: %[1]s}}
    Worker: {replicas: 2, restartPolicy: OnFailure, template: {spec: %[1]s}}
`

const progressTorchPodSpec = `{securityContext: ` + restrictedPod + `,
  containers: [{name: pytorch, image: torch, securityContext: ` + restrictedContainer + `,
  command: [python3, ` + torchTrainPath + `],
  env: [{name: CKPT_DIR, value: /tmp}, {name: STEPS, value: "3000"}, {name: REPORT_EVERY, value: "300"}, {name: STEP_DELAY, value: "0.01"}]}]}`

var hundredths = regexp.MustCompile(`^\d+/100$`)

// TestRealNodePyTorchDDPReportsProgressToArgo runs real DDP training (Debian's
// python3-torch) through the shipped ClusterWorkflowTemplate; rank 0 posts its
// progress to the endpoint the step serves, through the job's <job>-status Service
// and cluster DNS, with the CA and token mounted in its pod. While it trains, the
// Workflow's train node shows the reported progress; a post with a wrong token is
// refused and the job still succeeds; the outputs hold the last status and metrics.
func TestRealNodePyTorchDDPReportsProgressToArgo(t *testing.T) {
	t.Parallel()
	e := setUp(t)
	// The endpoint's CA, certificate and token are in a Secret: deploy/secrets/ grants it.
	e.applySecretsAddition(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := importTorchImage(ctx, e.c, repoRoot(t)); err != nil {
		t.Fatal(err)
	}
	manifest, err := json.Marshal(fmt.Sprintf(progressTorchJob, progressTorchPodSpec))
	if err != nil {
		t.Fatal(err)
	}
	wf := workflowFromYAML(t, fmt.Sprintf(mpiWorkflow, torchImage, manifest, pythonImage))
	name := e.submit(t, wf)

	// Argo's node progress as it changes, read every second until the end.
	var mu sync.Mutex
	var seen []string
	watchCtx, stopWatch := context.WithCancel(context.Background())
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for watchCtx.Err() == nil {
			if got, err := e.workflows().Get(watchCtx, name, metav1.GetOptions{}); err == nil {
				if p := trainProgress(got); p != "" {
					mu.Lock()
					if len(seen) == 0 || seen[len(seen)-1] != p {
						seen = append(seen, p)
					}
					mu.Unlock()
				}
			}
			time.Sleep(time.Second)
		}
	}()
	wf = e.waitForWorkflow(t, name, 8*time.Minute, "Succeeded", "Failed", "Error")
	stopWatch()
	<-watched
	train := podNode(t, wf, "train")
	stepLog := e.logOf(t, e.podOfNode(t, wf, train).Name, "main")
	if phaseOf(wf) != "Succeeded" {
		t.Fatalf("Workflow %s: phase %s, want Succeeded; nodes:\n%s\nthe train step's log:\n%s", name, phaseOf(wf), nodeSummary(wf), lastLines(stepLog, 60))
	}
	t.Logf("the train node's progress went through %v", seen)
	var reported []string
	for _, p := range seen {
		if hundredths.MatchString(p) {
			reported = append(reported, p)
		}
	}
	if len(reported) < 3 || reported[len(reported)-1] != "100/100" {
		t.Errorf("the train node's progress took %v, want at least three reported values ending at 100/100", seen)
	}
	if p := trainProgress(wf); p != "100/100" {
		t.Errorf("the train node's final progress %q, want 100/100", p)
	}
	for _, want := range []string{"[master-0] wrong token 401", "[master-0] posted 100 200", "training 100%"} {
		if !strings.Contains(stepLog, want) {
			t.Errorf("the train step's log lacks %q:\n%s", want, lastLines(stepLog, 60))
		}
	}
	var status struct {
		ProgressPercentage int `json:"progressPercentage"`
	}
	if err := json.Unmarshal([]byte(param(t, train.Outputs.Parameters, "trainer-status")), &status); err != nil || status.ProgressPercentage != 100 {
		t.Errorf("train output trainer-status = %s, want the last status, at 100%%", param(t, train.Outputs.Parameters, "trainer-status"))
	}
	var metrics map[string]any
	if err := json.Unmarshal([]byte(param(t, train.Outputs.Parameters, "metrics")), &metrics); err != nil || metrics["step"] != float64(3000) || metrics["steps"] != float64(3000) {
		t.Errorf("train output metrics = %s, want the reported step and the termination message's steps and loss", param(t, train.Outputs.Parameters, "metrics"))
	}
}

// trainProgress is the progress of the Workflow's train pod node (the last
// attempt's, "train(0)" under the template's retryStrategy), "" when there
// is none yet.
func trainProgress(wf *unstructured.Unstructured) string {
	nodes, _, _ := unstructured.NestedMap(wf.Object, "status", "nodes")
	latest, progress := "", ""
	for _, v := range nodes {
		n, _ := v.(map[string]any)
		name, _ := n["displayName"].(string)
		if n["type"] != "Pod" || (name != "train" && !strings.HasPrefix(name, "train(")) || name < latest {
			continue
		}
		latest = name
		progress, _ = n["progress"].(string)
	}
	return progress
}
