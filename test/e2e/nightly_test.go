package e2e_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	"github.com/argoproj/argo-workflows/v3/workflow/common"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"
)

const (
	nightly = "workflows/nightly/cronworkflow.yaml"
	// nightlyImage and nightlyCommand are the TensorFlow example the nightly job trains,
	// which the real node cannot pull; the test trains the demo trainer in its place.
	nightlyImage   = "kubeflow/tf-dist-mnist-test:latest"
	nightlyCommand = "command: [python, /var/tf_dist_mnist/dist_mnist.py]"
	demoCommand    = "command: [demo-trainer, --steps=200, --step-delay=50ms]"
)

var cronWorkflowResource = schema.GroupVersionResource{Group: "argoproj.io", Version: "v1alpha1", Resource: "cronworkflows"}

// TestRealNodeNightlyCronWorkflowRunsOnce applies workflows/nightly as docs/argo.md says and
// runs it once now, as `argo submit --from cronwf/nightly-mnist` does: the Argo server reads
// the CronWorkflow and creates the Workflow common.ConvertCronWorkflowToWorkflow makes of
// it (its labels, owner reference and scheduled-time annotation), which runs the shipped
// WorkflowTemplate through workflowTemplateRef. In memory the job's image and command
// become the demo trainer's (Chief, PS and the four workers the CronWorkflow asks for).
func TestRealNodeNightlyCronWorkflowRunsOnce(t *testing.T) {
	t.Parallel()
	e := setUp(t)
	text := string(readFile(t, filepath.Join(repoRoot(t), nightly)))
	for _, r := range [][2]string{{nightlyImage, localImage}, {nightlyCommand, demoCommand}} {
		if n := strings.Count(text, r[0]); n != 3 {
			t.Fatalf("%s names %q %d times, want once per replica type (3): update the test", nightly, r[0], n)
		}
		text = strings.ReplaceAll(text, r[0], r[1])
	}
	cron := &unstructured.Unstructured{}
	if err := yaml.UnmarshalStrict([]byte(text), &cron.Object); err != nil {
		t.Fatalf("reading %s: %v", nightly, err)
	}
	if err := unstructured.SetNestedStringMap(cron.Object, map[string]string{"kubernetes.io/hostname": realNodeName}, "spec", "workflowSpec", "nodeSelector"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	crons := e.dynamic.Resource(cronWorkflowResource).Namespace(e.namespace)
	if _, err := crons.Create(ctx, cron, metav1.CreateOptions{}); err != nil {
		t.Fatalf("applying %s: %v", nightly, err)
	}

	// argo submit --from cronwf/nightly-mnist
	stored, err := crons.Get(ctx, cron.GetName(), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var cronWf wfv1.CronWorkflow
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(stored.Object, &cronWf); err != nil {
		t.Fatal(err)
	}
	wfObject, err := runtime.DefaultUnstructuredConverter.ToUnstructured(common.ConvertCronWorkflowToWorkflow(&cronWf))
	if err != nil {
		t.Fatal(err)
	}
	started := time.Now()
	name := e.submit(t, &unstructured.Unstructured{Object: wfObject})
	wf := e.waitForWorkflow(t, name, 5*time.Minute, "Succeeded", "Failed", "Error")
	t.Logf("Workflow %s ended %s in %s", name, phaseOf(wf), time.Since(started).Round(100*time.Millisecond))
	if phaseOf(wf) != "Succeeded" {
		t.Fatalf("Workflow %s: phase %s, want Succeeded; nodes:\n%s", name, phaseOf(wf), nodeSummary(wf))
	}
	if got := wf.GetLabels()[common.LabelKeyCronWorkflow]; got != cron.GetName() {
		t.Errorf("Workflow %s: label %s = %q, want %s", name, common.LabelKeyCronWorkflow, got, cron.GetName())
	}
	// The Workflow is the template's train alone: its node is named after the Workflow.
	train := podNode(t, wf, name)
	outputs := train.Outputs.Parameters
	if got := param(t, outputs, "phase"); got != "Succeeded" {
		t.Errorf("the step's phase output = %q, want Succeeded", got)
	}
	var metrics struct {
		Loss  *float64 `json:"loss"`
		Steps int      `json:"steps"`
	}
	if m := param(t, outputs, "metrics"); json.Unmarshal([]byte(m), &metrics) != nil || metrics.Loss == nil || metrics.Steps < 200 {
		t.Errorf("the step's metrics output = %s, want the chief's loss after at least 200 steps", m)
	}
	var replicas []struct{ Type, Phase string }
	if err := json.Unmarshal([]byte(param(t, outputs, "replicas")), &replicas); err != nil {
		t.Fatal(err)
	}
	counts := map[string]int{}
	for _, r := range replicas {
		counts[r.Type]++
	}
	if counts["Chief"] != 1 || counts["PS"] != 1 || counts["Worker"] != 4 {
		t.Errorf("the job's replicas %v, want 1 Chief, 1 PS and the 4 Workers the CronWorkflow's set asks for", counts)
	}
	// The CronWorkflow's env parameter holds two overrides, one per line, through Argo's
	// controller into trainstep's --env: both reach the chief (which succeeded, so it stays).
	chiefCtx, cancelChief := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancelChief()
	chief, err := e.c.Client.CoreV1().Pods(e.namespace).Get(chiefCtx, param(t, outputs, "job-name")+"-chief-0", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the job's chief: %v", err)
	}
	env := map[string]string{}
	for _, v := range chief.Spec.Containers[0].Env {
		env[v.Name] = v.Value
	}
	if env["TF_CPP_MIN_LOG_LEVEL"] != "2" || env["MODEL_DIR"] != "/models/nightly-mnist" {
		t.Errorf("the chief's env has TF_CPP_MIN_LOG_LEVEL=%q and MODEL_DIR=%q, want both lines of the env parameter", env["TF_CPP_MIN_LOG_LEVEL"], env["MODEL_DIR"])
	}
	stepLog := e.logOf(t, e.podOfNode(t, wf, train).Name, "main")
	if !strings.Contains(stepLog, "[chief-0]") || !trainingLine.MatchString(stepLog) {
		t.Errorf("the step's log has no training line of [chief-0]:\n%s", lastLines(stepLog, 30))
	}
}
