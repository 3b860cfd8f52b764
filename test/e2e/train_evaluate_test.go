package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/trainstep/trainstep/internal/testutil"
	"github.com/trainstep/trainstep/pkg/frameworks/tensorflow"
)

// trainEvaluate is the example DAG preprocess → train → evaluate.
const trainEvaluate = "workflows/train-evaluate/workflow.yaml"

// TestRealNodeTrainEvaluateWorkflow submits workflows/train-evaluate as shipped (images
// replaced, pods pinned to the real node) to Argo's controller and follows it to its end:
// the workflow succeeds, the train step's outputs reach evaluate, the replicas really ran
// the demo trainer and found each other by their Services' DNS names, and deleting the
// workflow leaves nothing of the job.
func TestRealNodeTrainEvaluateWorkflow(t *testing.T) {
	t.Parallel()
	e := setUp(t)
	started := time.Now()
	name := e.submit(t, loadWorkflow(t, trainEvaluate))
	wf := e.waitForWorkflow(t, name, 5*time.Minute, "Succeeded", "Failed", "Error")
	t.Logf("Workflow %s ended %s in %s", name, phaseOf(wf), time.Since(started).Round(100*time.Millisecond))
	if phaseOf(wf) != "Succeeded" {
		t.Fatalf("Workflow %s: phase %s, want Succeeded; nodes:\n%s%s", name, phaseOf(wf), nodeSummary(wf), e.podSummary(t))
	}

	// preprocess ran as trainstep-executor, the ServiceAccount deploy/ lets report
	// outputs (the cluster, like Argo's install, grants no one; the namespace's default
	// gets nothing), and its seed reached train's arguments.
	preprocess := podNode(t, wf, "preprocess")
	if sa := e.podOfNode(t, wf, preprocess).Spec.ServiceAccountName; sa != "trainstep-executor" {
		t.Errorf("preprocess ran as ServiceAccount %q, want trainstep-executor", sa)
	}
	seed := param(t, preprocess.Outputs.Parameters, "seed")
	train := podNode(t, wf, "train")
	if got, want := param(t, train.Inputs.Parameters, "arg"), "--seed="+seed; got != want {
		t.Errorf("train's arg input = %q, want %q from preprocess's seed output", got, want)
	}

	// The train step's outputs, as trainstep wrote them, and evaluate's inputs from them.
	outputs := train.Outputs.Parameters
	if got := param(t, outputs, "phase"); got != "Succeeded" {
		t.Errorf("train output phase = %q, want Succeeded", got)
	}
	job := param(t, outputs, "job-name")
	if !strings.HasPrefix(job, "ts-") || len(job) != len("ts-")+10 {
		t.Errorf("train output job-name = %q, want ts- and ten hex digits (the template's default)", job)
	}
	metricsJSON := param(t, outputs, "metrics")
	var metrics struct {
		Loss  *float64 `json:"loss"`
		Steps int      `json:"steps"`
	}
	// Parameter-server training is asynchronous: the workers' steps add up to at least the
	// 300 the job asks for.
	if err := json.Unmarshal([]byte(metricsJSON), &metrics); err != nil || metrics.Loss == nil || metrics.Steps < 300 {
		t.Fatalf("train output metrics = %s (%v), want the demo trainer's loss after at least 300 steps", metricsJSON, err)
	}
	evaluate := podNode(t, wf, "evaluate")
	if got := param(t, evaluate.Inputs.Parameters, "metrics"); got != metricsJSON {
		t.Errorf("evaluate's metrics input = %s, want train's metrics output %s", got, metricsJSON)
	}
	if got := param(t, evaluate.Inputs.Parameters, "job-name"); got != job {
		t.Errorf("evaluate's job-name input = %s, want %s", got, job)
	}
	evaluateLog := e.logOf(t, e.podOfNode(t, wf, evaluate).Name, "main")
	if want := fmt.Sprintf("job %s: loss %v after %d steps", job, *metrics.Loss, metrics.Steps); !strings.Contains(evaluateLog, want) {
		t.Errorf("evaluate's log %q does not say %q", evaluateLog, want)
	}

	// The step's own log: trainstep's JSON lines with worker 0's training copied in.
	stepPod := e.podOfNode(t, wf, train)
	if stepPod.Spec.NodeName != realNodeName {
		t.Errorf("train step pod ran on %q, want %s", stepPod.Spec.NodeName, realNodeName)
	}
	stepLog := e.logOf(t, stepPod.Name, "main")
	if !strings.Contains(stepLog, "[worker-0]") || !trainingLine.MatchString(stepLog) {
		t.Errorf("the train step's log has no training line of [worker-0]:\n%s", lastLines(stepLog, 30))
	}

	// The replicas: real containers of the demo trainer on the real node, addressing each
	// other by Service names, which cluster DNS resolved.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pods, services, err := e.jobObjects(ctx, job)
	if err != nil {
		t.Fatal(err)
	}
	// The job's replicas: the parameter server and the workers the train step's set input asks for.
	workers, err := strconv.Atoi(strings.TrimPrefix(param(t, train.Inputs.Parameters, "set"), "spec.replicaSpecs.Worker.replicas="))
	if err != nil {
		t.Fatalf("train's set input does not give the workers: %v", err)
	}
	e.checkReplicasTrained(t, job, pods, 1+workers, metrics.Steps)
	if t.Failed() {
		t.Logf("the train step's log, last lines:\n%s", lastLines(stepLog, 40))
	}
	for _, p := range pods {
		if p.Status.Phase == corev1.PodRunning || p.Status.Phase == corev1.PodPending {
			t.Errorf("replica %s is still %s after the workflow ended", p.Name, p.Status.Phase)
		}
	}
	t.Logf("after the workflow: %d replica pods (ended, kept by cleanPodPolicy Running), Services %v", len(pods), services)

	// Deleting the workflow (argo delete) deletes its pods; the replicas and their Services,
	// owned by the step pod, go with it.
	if err := e.workflows().Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("deleting the Workflow: %v", err)
	}
	deleted := time.Now()
	var leftPods []corev1.Pod
	var leftServices []string
	testutil.Eventually(t, 2*time.Minute, "the job's pods and Services to be gone after deleting the Workflow", func(ctx context.Context) (bool, error) {
		var err error
		leftPods, leftServices, err = e.jobObjects(ctx, job)
		return err == nil && len(leftPods) == 0 && len(leftServices) == 0, err
	}, func() string { return "left: " + podNames(leftPods) + " services " + strings.Join(leftServices, ",") })
	t.Logf("the job's pods and Services gone %s after deleting the Workflow", time.Since(deleted).Round(100*time.Millisecond))
}

// checkReplicasTrained checks the replica pods left after the job (of replicas in all):
// each ran on the real node, worker 0 trained (its log has step lines and the final loss),
// its TF_CONFIG named its peers by their Services' DNS names, and worker 0 reached the
// parameter server through those names; the parameter server, if it ended before the job
// and was kept, heard from every training task. The job-wide Service is left exactly when
// no replica was deleted.
func (e *e2e) checkReplicasTrained(t *testing.T, job string, pods []corev1.Pod, replicas, steps int) {
	t.Helper()
	byName := map[string]*corev1.Pod{}
	for i := range pods {
		byName[pods[i].Name] = &pods[i]
		if pods[i].Spec.NodeName != realNodeName {
			t.Errorf("replica %s ran on %q, want %s", pods[i].Name, pods[i].Spec.NodeName, realNodeName)
		}
	}
	worker := byName[job+"-worker-0"]
	if worker == nil {
		t.Fatalf("worker 0 (%s-worker-0), which decides the job, is gone after the job; left: %s", job, podNames(pods))
	}
	workerLog := e.logOf(t, worker.Name, "tensorflow")
	final := fmt.Sprintf("final steps %d loss ", steps)
	if n := len(trainingLine.FindAllString(workerLog, -1)); n == 0 || !strings.Contains(workerLog, final) {
		t.Errorf("worker 0's log has %d training lines, and %q?\n%s", n, final, lastLines(workerLog, 20))
	}
	// TF_CONFIG takes its cluster from the job's ConfigMap through the kubelet's
	// $(VAR) expansion; the worker's connecting to the parameter server (below)
	// shows that the expanded value worked.
	var tfConfig string
	for _, env := range worker.Spec.Containers[0].Env {
		if env.Name == "TF_CONFIG" {
			tfConfig = env.Value
		}
	}
	if !strings.HasPrefix(tfConfig, `{"cluster":$(TRAINSTEP_TF_CLUSTER),`) {
		t.Errorf("worker 0's TF_CONFIG %s does not take its cluster from $(TRAINSTEP_TF_CLUSTER)", tfConfig)
	}
	cm, err := e.c.Client.CoreV1().ConfigMaps(e.namespace).Get(context.Background(), tensorflow.ClusterConfigMapName(job), metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the job's cluster ConfigMap, kept while its pods are: %v", err)
	}
	// A TrainJob's per-job layout: the PS is its pod's hostname in the job's Service.
	psAddress := `"` + job + "-ps-0." + job + ":"
	if cluster := cm.Data["cluster"]; !strings.Contains(cluster, psAddress) {
		t.Errorf("the job's TF_CONFIG cluster %s does not name the parameter server in the job's Service (%s…)", cluster, psAddress)
	}
	services, err := e.c.Client.CoreV1().Services(e.namespace).List(context.Background(), metav1.ListOptions{LabelSelector: jobNameLabel + "=" + job})
	// The parameter server ends once every training task told it that training is over, and
	// a worker other than worker 0 ends once told that training is over: both race with the job's
	// end. A replica still running then is deleted by cleanPodPolicy Running, and the
	// job-wide Service first. With every replica ended and kept, the Service its peers' names
	// resolve in is kept too.
	names := serviceNamesOf(services)
	switch {
	case err != nil:
		t.Errorf("listing the job's Services: %v", err)
	case len(pods) == replicas && !slices.Equal(names, []string{job}):
		t.Errorf("the job's Services %v with all %d replicas kept, want the one job-wide Service %s", names, replicas, job)
	case len(pods) < replicas && len(names) != 0:
		t.Errorf("the job's Services %v with %d of %d replicas kept, want none: the job-wide Service %s goes with the first replica deleted", names, len(pods), replicas, job)
	}
	if ps := byName[job+"-ps-0"]; ps != nil {
		if psLog := e.logOf(t, ps.Name, "tensorflow"); !strings.Contains(psLog, "training is over and every training task knows") {
			t.Errorf("the parameter server did not hear from every training task:\n%s", lastLines(psLog, 20))
		}
	}
	if !strings.Contains(workerLog, "1 parameter servers") {
		t.Errorf("worker 0 did not connect to the parameter server:\n%s", lastLines(workerLog, 20))
	}
}

func phaseOf(wf interface{ UnstructuredContent() map[string]any }) string {
	status, _ := wf.UnstructuredContent()["status"].(map[string]any)
	phase, _ := status["phase"].(string)
	return phase
}

func podNames(pods []corev1.Pod) string {
	var names []string
	for _, p := range pods {
		names = append(names, p.Name+"("+string(p.Status.Phase)+")")
	}
	return strings.Join(names, ",")
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// checkJobRestartLogged checks that the step's log has trainstep's line for
// a restart of the whole job, with its cause; a progress line may miss it
// when the restart is over before the next one.
func checkJobRestartLogged(t *testing.T, stepLog, cause string) {
	t.Helper()
	var restarts []string
	for _, line := range strings.Split(stepLog, "\n") {
		if strings.Contains(line, `"msg":"restarting the job"`) {
			if strings.Contains(line, `"cause":"`+cause+`"`) {
				return
			}
			restarts = append(restarts, line)
		}
	}
	t.Errorf("the train step's log has no restart of the job caused by %q; its restart lines:\n%s", cause, strings.Join(restarts, "\n"))
}

func serviceNamesOf(list *corev1.ServiceList) []string {
	if list == nil {
		return nil
	}
	var names []string
	for _, s := range list.Items {
		names = append(names, s.Name)
	}
	return names
}
