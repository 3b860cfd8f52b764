package e2e_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/trainstep/trainstep/internal/testutil"
)

// TestRealNodeStopTrainEvaluateWorkflow stops the example DAG while its replicas train, as
// `argo stop` does (spec.shutdown: Stop): the train step is signalled, deletes every
// replica and Service of its job, and reports phase Terminated; evaluate never runs.
func TestRealNodeStopTrainEvaluateWorkflow(t *testing.T) {
	t.Parallel()
	e := setUp(t)
	name := e.submit(t, loadWorkflow(t, trainEvaluate))
	wf := e.waitForWorkflow(t, name, 3*time.Minute, "Running")
	var job string
	var running []corev1.Pod
	testutil.Eventually(t, 3*time.Minute, "the replicas of the train step to run", func(ctx context.Context) (bool, error) {
		pods, err := e.c.Client.CoreV1().Pods(e.namespace).List(ctx, metav1.ListOptions{LabelSelector: jobNameLabel})
		if err != nil {
			return false, err
		}
		running = running[:0]
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning {
				running = append(running, p)
				job = p.Labels[jobNameLabel]
			}
		}
		// One parameter server and the workflow's three workers.
		return len(running) == 4, nil
	}, func() string { return "running: " + podNames(running) + "\n" + e.podSummary(t) })

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	stopped := time.Now()
	patch := []byte(`{"spec":{"shutdown":"Stop"}}`)
	if _, err := e.workflows().Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatalf("stopping the Workflow: %v", err)
	}
	wf = e.waitForWorkflow(t, name, 3*time.Minute, "Succeeded", "Failed", "Error")
	t.Logf("Workflow %s ended %s %s after the stop", name, phaseOf(wf), time.Since(stopped).Round(100*time.Millisecond))
	if phaseOf(wf) == "Succeeded" {
		t.Errorf("the stopped Workflow succeeded")
	}
	train := podNode(t, wf, "train")
	for _, n := range nodes(t, wf) {
		if n.TemplateName == "evaluate" && n.Type == "Pod" {
			t.Errorf("evaluate ran after the stop: %s %s", n.Name, n.Phase)
		}
	}
	// The step: trainstep exits 13 (Terminated) and says so on stdout, outputs.result.
	stepPod := e.podOfNode(t, wf, train)
	var main *corev1.ContainerStatus
	testutil.Eventually(t, time.Minute, "the train step's main container to exit", func(ctx context.Context) (bool, error) {
		pod, err := e.c.Client.CoreV1().Pods(e.namespace).Get(ctx, stepPod.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		stepPod = pod
		for i, s := range pod.Status.ContainerStatuses {
			if s.Name == "main" && s.State.Terminated != nil {
				main = &pod.Status.ContainerStatuses[i]
			}
		}
		return main != nil, nil
	}, func() string { return containerStates(stepPod) })
	t.Logf("step pod %s: %s", stepPod.Name, containerStates(stepPod))
	if code := main.State.Terminated.ExitCode; code != 13 {
		t.Errorf("the train step exited %d, want 13 (Terminated)", code)
	}
	stepLog := e.logOf(t, stepPod.Name, "main")
	if !strings.Contains(stepLog, `{"phase":"Terminated","reason":"Terminated","message":"the step was stopped; every object of the job was deleted"`) {
		t.Errorf("the train step's result line does not say Terminated with every object deleted")
	}
	// Argo v3.7 marks a stopped step's node Failed at once and signals its wait container
	// with it; the outputs the wait container saves reach the Workflow only when its task
	// result is reconciled before the Workflow completes, which Argo does not wait for. When
	// they arrive they must be trainstep's Terminated, not the template's defaults.
	if phase, ok := optionalParam(train.Outputs.Parameters, "phase"); ok && phase != "Terminated" {
		t.Errorf("train output phase = %q, want Terminated; train node %s: %s", phase, train.Phase, train.Message)
	} else if !ok {
		t.Logf("the train node has no outputs: Argo completed the stopped Workflow before the step's task result (node %s: %s)", train.Phase, train.Message)
	}
	// What the wait container saved: the WorkflowTaskResult of the train node.
	taskResult, err := e.dynamic.Resource(taskResultResource).Namespace(e.namespace).Get(ctx, train.ID, metav1.GetOptions{})
	switch {
	case err == nil:
		params, _, _ := unstructured.NestedSlice(taskResult.Object, "outputs", "parameters")
		var phase string
		for _, p := range params {
			if m, _ := p.(map[string]any); m["name"] == "phase" {
				phase, _ = m["value"].(string)
			}
		}
		if phase != "Terminated" {
			t.Errorf("the wait container saved phase %q, want Terminated (written at the signal, before the teardown)", phase)
		} else {
			t.Logf("the wait container saved phase Terminated")
		}
	case apierrors.IsNotFound(err):
		t.Logf("the train node's WorkflowTaskResult is gone")
	default:
		t.Errorf("reading the train node's WorkflowTaskResult: %v", err)
	}
	if t.Failed() {
		t.Logf("the step's log:\n%s", lastLines(stepLog, 40))
		t.Logf("the step's wait container:\n%s", lastLines(e.logOf(t, stepPod.Name, "wait"), 40))
	}
	// trainstep deletes the replicas and Services at once; the pods are gone once their
	// containers have exited.
	var leftPods []corev1.Pod
	var leftServices []string
	testutil.Eventually(t, time.Minute, "the job's pods and Services to be gone after the stop", func(ctx context.Context) (bool, error) {
		var err error
		leftPods, leftServices, err = e.jobObjects(ctx, job)
		return err == nil && len(leftPods) == 0 && len(leftServices) == 0, err
	}, func() string {
		return "left: " + podNames(leftPods) + " services " + strings.Join(leftServices, ",") + "\n" + e.podSummary(t)
	})
	t.Logf("the job's pods and Services gone %s after the stop", time.Since(stopped).Round(100*time.Millisecond))
}

// containerStates says how each container of a pod ended, or that it did not.
func containerStates(pod *corev1.Pod) string {
	var states []string
	for _, s := range pod.Status.ContainerStatuses {
		switch {
		case s.State.Terminated != nil:
			states = append(states, fmt.Sprintf("%s exited %d (%s)", s.Name, s.State.Terminated.ExitCode, s.State.Terminated.Reason))
		case s.State.Running != nil:
			states = append(states, s.Name+" running")
		default:
			states = append(states, s.Name+" waiting")
		}
	}
	return strings.Join(states, ", ")
}

// taskResultResource is Argo's WorkflowTaskResult: a pod's outputs as its wait container
// reported them, named like the pod's node.
var taskResultResource = schema.GroupVersionResource{Group: "argoproj.io", Version: "v1alpha1", Resource: "workflowtaskresults"}

// optionalParam is the value of a node's parameter, if it has one.
func optionalParam(params []parameter, name string) (string, bool) {
	for _, p := range params {
		if p.Name == name && p.Value != nil {
			return *p.Value, true
		}
	}
	return "", false
}
