package e2e_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	"github.com/trainstep/trainstep/internal/testutil"
)

// poolLabel is the node label the parameter server of the retry test asks for: a node pool
// that is not there when the job starts.
const poolLabel = "e2e.trainstep.dev/pool"

// retryWorkflow calls the shipped WorkflowTemplate's train with a job whose parameter server
// cannot be scheduled yet (its node pool does not exist) and pending-timeout 15s, so the
// first attempt ends Transient (exit 12), which the template retries. cleanPodPolicy None
// keeps the replicas for the retry: the workers wait for the parameter server meanwhile
// (the demo trainer retries its connection for two minutes). Training lasts about a minute
// once the parameter server runs, past the template's 30 s retry backoff: the retry must
// find the replicas still running, so that what it proves is the adoption of live replicas
// (a replica that already succeeded is adopted as done; one that failed is replaced).
const retryWorkflow = `
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata:
  generateName: retry-
spec:
  entrypoint: main
  serviceAccountName: trainstep-executor
  templates:
    - name: main
      dag:
        tasks:
          - name: train
            templateRef: {name: trainstep, template: train}
            arguments:
              parameters:
                - {name: pending-timeout, value: 15s}
                - name: job
                  value: |
                    apiVersion: trainstep.dev/v1alpha1
                    kind: TrainJob
                    metadata:
                      name: retried
                    spec:
                      framework: tensorflow
                      replicaSpecs:
                        PS:
                          replicas: 1
                          restartPolicy: OnFailure
                          template:
                            spec:
                              nodeSelector: {"` + poolLabel + `": "%[1]s"}
                              securityContext: {runAsNonRoot: true, seccompProfile: {type: RuntimeDefault}}
                              containers:
                                - name: tensorflow
                                  image: ` + localImage + `
                                  command: [demo-trainer]
                                  args: [--steps=1200, --step-delay=100ms]
                                  securityContext: {allowPrivilegeEscalation: false, capabilities: {drop: [ALL]}}
                        Worker:
                          replicas: 2
                          restartPolicy: OnFailure
                          template:
                            spec:
                              securityContext: {runAsNonRoot: true, seccompProfile: {type: RuntimeDefault}}
                              containers:
                                - name: tensorflow
                                  image: ` + localImage + `
                                  command: [demo-trainer]
                                  args: [--steps=1200, --step-delay=100ms]
                                  securityContext: {allowPrivilegeEscalation: false, capabilities: {drop: [ALL]}}
                      runPolicy:
                        cleanPodPolicy: None
                        activeDeadlineSeconds: 600
`

// TestRealNodeRetriedStepReattachesToItsReplicas runs a train step whose first attempt ends
// Transient (exit 12: a replica unschedulable past pending-timeout) under Argo's retry: the
// node pool appears, Argo starts the second attempt after the template's backoff, and that
// attempt takes over the very pods of the first (same UIDs, owned by the Workflow throughout)
// instead of starting a second job: the template's default job-name is stable across the
// real controller's retries.
func TestRealNodeRetriedStepReattachesToItsReplicas(t *testing.T) {
	t.Parallel()
	e := setUp(t)
	pool := strings.ToLower(e.namespace[len(e.namespace)-5:])
	wf := workflowFromYAML(t, fmt.Sprintf(retryWorkflow, pool))
	name := e.submit(t, wf)
	t.Cleanup(func() { e.labelNode(t, poolLabel, "") })

	// The first attempt: the parameter server stays Pending, the step exits 12 at its
	// pending-timeout and leaves the replicas.
	var first *corev1.Pod
	testutil.Eventually(t, 3*time.Minute, "the first attempt of train to exit", func(ctx context.Context) (bool, error) {
		pods, err := e.c.Client.CoreV1().Pods(e.namespace).List(ctx, metav1.ListOptions{LabelSelector: "workflows.argoproj.io/workflow=" + name})
		if err != nil {
			return false, err
		}
		for i := range pods.Items {
			if mainExit(&pods.Items[i]) != nil {
				first = &pods.Items[i]
			}
		}
		return first != nil, nil
	}, func() string { return e.podSummary(t) })
	if code := mainExit(first).ExitCode; code != 12 {
		t.Fatalf("the first attempt %s exited %d, want 12 (Transient); its log:\n%s", first.Name, code, lastLines(e.logOf(t, first.Name, "main"), 30))
	}
	firstLog := e.logOf(t, first.Name, "main")
	if !strings.Contains(firstLog, `"phase":"Transient","reason":"PendingTimeout"`) {
		t.Errorf("the first attempt's result is not Transient PendingTimeout:\n%s", lastLines(firstLog, 10))
	}
	job := jobNameOf(t, first)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pods, _, err := e.jobObjects(ctx, job)
	if err != nil {
		t.Fatal(err)
	}
	before := podUIDs(pods)
	if len(before) != 3 {
		t.Fatalf("after the first attempt the job has pods %s, want its 3 replicas left for the retry", podNames(pods))
	}
	t.Logf("first attempt %s exited 12; job %s left %s", first.Name, job, podNames(pods))

	// The node pool arrives: the parameter server starts, the workers reach it.
	e.labelNode(t, poolLabel, pool)
	started := time.Now()
	wf = e.waitForWorkflow(t, name, 5*time.Minute, "Succeeded", "Failed", "Error")
	t.Logf("Workflow %s ended %s %s after the node pool appeared", name, phaseOf(wf), time.Since(started).Round(100*time.Millisecond))
	if phaseOf(wf) != "Succeeded" {
		t.Fatalf("Workflow %s: phase %s, want Succeeded; nodes:\n%s", name, phaseOf(wf), nodeSummary(wf))
	}
	var attempts []workflowNode
	for _, n := range nodes(t, wf) {
		if n.Type == "Pod" && strings.HasPrefix(n.DisplayName, "train(") {
			attempts = append(attempts, n)
		}
	}
	sort.Slice(attempts, func(i, j int) bool { return attempts[i].DisplayName < attempts[j].DisplayName })
	if len(attempts) != 2 {
		t.Fatalf("train ran %d attempts, want 2; nodes:\n%s", len(attempts), nodeSummary(wf))
	}
	last := attempts[1]
	if got := param(t, last.Outputs.Parameters, "job-name"); got != job {
		t.Errorf("the second attempt's job-name = %s, want the first's %s", got, job)
	}
	if got := param(t, last.Outputs.Parameters, "phase"); got != "Succeeded" {
		t.Errorf("the second attempt's phase = %s, want Succeeded", got)
	}
	second := e.podOfNode(t, wf, last)
	secondLog := e.logOf(t, second.Name, "main")
	if !strings.Contains(secondLog, "re-attached to an earlier attempt of the job") || !strings.Contains(secondLog, `"adoptedPods":3,"replacedPods":0`) {
		t.Errorf("the second attempt's log does not say it re-attached all 3 replicas:\n%s", lastLines(secondLog, 40))
	}

	// The same pods, owned by the Workflow all along (neither attempt's step pod).
	ctx, cancel = context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if pods, _, err = e.jobObjects(ctx, job); err != nil {
		t.Fatal(err)
	}
	after := podUIDs(pods)
	for pod, uid := range before {
		if after[pod] != uid {
			t.Errorf("pod %s: uid %s after the retry, want the first attempt's %s", pod, after[pod], uid)
		}
	}
	if len(after) != len(before) {
		t.Errorf("the job's pods after the retry: %s, want the first attempt's %d", podNames(pods), len(before))
	}
	for _, p := range pods {
		var owners []string
		for _, o := range p.OwnerReferences {
			if o.Controller != nil && *o.Controller {
				owners = append(owners, o.Name+"/"+string(o.UID))
			}
		}
		if want := wf.GetName() + "/" + string(wf.GetUID()); len(owners) != 1 || owners[0] != want {
			t.Errorf("pod %s is controlled by %v, want the Workflow %s", p.Name, owners, want)
		}
	}
	t.Logf("second attempt %s re-attached to %s", second.Name, podNames(pods))
}

// workflowFromYAML reads a Workflow written by a test, with trainstep's image replaced by
// localImage (see shippedImage) and its pods pinned to the real node.
func workflowFromYAML(t *testing.T, text string) *unstructured.Unstructured {
	t.Helper()
	wf := &unstructured.Unstructured{}
	if err := yaml.UnmarshalStrict([]byte(strings.ReplaceAll(text, shippedImage, localImage)), &wf.Object); err != nil {
		t.Fatalf("reading the test's Workflow: %v", err)
	}
	pinToRealNode(t, wf)
	return wf
}

// labelNode sets (value non-empty) or removes a label of the real node.
func (e *e2e) labelNode(t *testing.T, key, value string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, key, value)
	if value == "" {
		patch = fmt.Sprintf(`{"metadata":{"labels":{%q:null}}}`, key)
	}
	if _, err := e.c.Client.CoreV1().Nodes().Patch(ctx, realNodeName, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Errorf("labelling node %s: %v", realNodeName, err)
	}
}

// mainExit is how the pod's main container ended, nil while it has not.
func mainExit(pod *corev1.Pod) *corev1.ContainerStateTerminated {
	for _, s := range pod.Status.ContainerStatuses {
		if s.Name == "main" {
			return s.State.Terminated
		}
	}
	return nil
}

// jobNameOf reads the --name a train step pod runs trainstep with.
func jobNameOf(t *testing.T, stepPod *corev1.Pod) string {
	t.Helper()
	for _, c := range stepPod.Spec.Containers {
		for _, arg := range c.Args {
			if name, ok := strings.CutPrefix(arg, "--name="); ok {
				return name
			}
		}
	}
	t.Fatalf("step pod %s runs trainstep without --name", stepPod.Name)
	return ""
}

func podUIDs(pods []corev1.Pod) map[string]types.UID {
	out := map[string]types.UID{}
	for _, p := range pods {
		out[p.Name] = p.UID
	}
	return out
}
