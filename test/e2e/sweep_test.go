package e2e_test

import (
	"context"
	"encoding/json"
	"math"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// sweep is the example hyperparameter sweep: 8 trials of the demo trainer, a
// master and a worker each, at most 4 at once.
const (
	sweep            = "workflows/sweep/workflow.yaml"
	sweepTrials      = 8
	sweepParallelism = 4
)

// sweepTrial is one trial as the Workflow's status tells it: the trial DAG
// node's inputs and outputs, and its train step's pod node.
type sweepTrial struct {
	number, parameters, args, metrics, jobName, phase string
	train                                             workflowNode
}

// TestRealNodeSweepWorkflowPicksTheBestTrial submits workflows/sweep as shipped
// (images replaced, pods pinned to the real node) to Argo's controller: every
// trial runs its own job with its own parameter set, passed to its replicas;
// no more than the sweep's parallelism of train steps run at once; and
// pick-best, the last step, hands on the parameters, arguments and metrics of
// the trial with the lowest loss, as the sweep's outputs.
func TestRealNodeSweepWorkflowPicksTheBestTrial(t *testing.T) {
	t.Parallel()
	e := setUp(t)
	started := time.Now()
	name := e.submit(t, loadWorkflow(t, sweep))
	wf := e.waitForWorkflow(t, name, 10*time.Minute, "Succeeded", "Failed", "Error")
	t.Logf("Workflow %s ended %s in %s", name, phaseOf(wf), time.Since(started).Round(100*time.Millisecond))
	if phaseOf(wf) != "Succeeded" {
		t.Fatalf("Workflow %s: phase %s, want Succeeded; nodes:\n%s%s", name, phaseOf(wf), nodeSummary(wf), e.podSummary(t))
	}
	trials := sweepTrialsOf(t, wf)
	jobs, parameters := map[string]bool{}, map[string]bool{}
	for _, tr := range trials {
		jobs[tr.jobName], parameters[tr.parameters] = true, true
		if tr.phase != "Succeeded" || tr.train.Phase != "Succeeded" {
			t.Errorf("trial %s: phase %s, its train step %s; want both Succeeded", tr.number, tr.phase, tr.train.Phase)
		}
		if got := param(t, tr.train.Inputs.Parameters, "arg"); got != tr.args {
			t.Errorf("trial %s: its train step's arg input %q, want the trial's generated args %q", tr.number, got, tr.args)
		}
	}
	if len(jobs) != sweepTrials || len(parameters) != sweepTrials {
		t.Errorf("%d trials ran %d distinct jobs with %d distinct parameter sets, want %d of each", len(trials), len(jobs), len(parameters), sweepTrials)
	}
	e.checkTrialsRanTheirParameters(t, trials)
	e.checkAtMostParallelTrainSteps(t, wf, trials)

	// pick-best hands on the trial with the lowest finite loss, the lower number on a tie.
	best := bestByLoss(t, trials)
	pick := podNode(t, wf, "pick-best")
	for output, want := range map[string]string{"trial": best.number, "parameters": best.parameters, "args": best.args,
		"metrics": best.metrics, "job-name": best.jobName} {
		if got := param(t, pick.Outputs.Parameters, output); got != want {
			t.Errorf("pick-best output %s = %q, want trial %s's %q", output, got, best.number, want)
		}
	}
	sweepNode := dagNode(t, wf, "sweep")
	for output, want := range map[string]string{"best-parameters": best.parameters, "best-args": best.args, "best-metrics": best.metrics} {
		if got := param(t, sweepNode.Outputs.Parameters, output); got != want {
			t.Errorf("the sweep's output %s = %q, want %q", output, got, want)
		}
	}
	t.Logf("best of %d trials: trial %s, %s, metrics %s", len(trials), best.number, best.parameters, lastLines(best.metrics, 1))
}

// sweepTrialsOf reads every trial of the Workflow, in trial order.
func sweepTrialsOf(t *testing.T, wf *unstructured.Unstructured) []sweepTrial {
	t.Helper()
	all := nodes(t, wf)
	var trials []sweepTrial
	for _, n := range all {
		if n.Type != "DAG" || n.TemplateName != "trial" {
			continue
		}
		// The trial's generated sample: its number, parameter set and args.
		var sample struct {
			Trial      string
			Parameters json.RawMessage
			Args       string
		}
		if err := json.Unmarshal([]byte(param(t, n.Inputs.Parameters, "sample")), &sample); err != nil {
			t.Fatalf("trial %s's sample input: %v", n.DisplayName, err)
		}
		tr := sweepTrial{number: sample.Trial, parameters: string(sample.Parameters), args: sample.Args, phase: n.Phase}
		if n.Phase == "Succeeded" {
			// Its outputs hand the sample on next to the job's.
			tr.parameters, tr.args = param(t, n.Outputs.Parameters, "parameters"), param(t, n.Outputs.Parameters, "args")
			if got := param(t, n.Outputs.Parameters, "trial"); got != sample.Trial {
				t.Errorf("trial %s's output trial = %q", sample.Trial, got)
			}
			tr.metrics, tr.jobName = param(t, n.Outputs.Parameters, "metrics"), param(t, n.Outputs.Parameters, "job-name")
		}
		// The train step's last attempt, a pod node under the trial's DAG.
		for _, p := range all {
			if p.Type == "Pod" && strings.HasPrefix(p.Name, n.Name+".train") && p.Name > tr.train.Name {
				tr.train = p
			}
		}
		if tr.train.ID == "" {
			t.Fatalf("trial %s has no train step; nodes:\n%s", tr.number, nodeSummary(wf))
		}
		trials = append(trials, tr)
	}
	if len(trials) != sweepTrials {
		t.Fatalf("the sweep ran %d trials, want %d; nodes:\n%s", len(trials), sweepTrials, nodeSummary(wf))
	}
	sort.Slice(trials, func(i, j int) bool {
		return len(trials[i].number) < len(trials[j].number) || trials[i].number < trials[j].number
	})
	return trials
}

// dagNode is the DAG node of the workflow's template named tmpl.
func dagNode(t *testing.T, wf *unstructured.Unstructured, tmpl string) workflowNode {
	t.Helper()
	for _, n := range nodes(t, wf) {
		if n.Type == "DAG" && n.TemplateName == tmpl {
			return n
		}
	}
	t.Fatalf("Workflow %s has no DAG node of template %s; nodes:\n%s", wf.GetName(), tmpl, nodeSummary(wf))
	return workflowNode{}
}

// bestByLoss is the trial pick-best must choose: the lowest finite loss among
// the trials that reported one, the lower trial number on a tie.
func bestByLoss(t *testing.T, trials []sweepTrial) sweepTrial {
	t.Helper()
	var best *sweepTrial
	var bestLoss float64
	for i := range trials {
		var m struct{ Loss *float64 }
		if err := json.Unmarshal([]byte(trials[i].metrics), &m); err != nil || m.Loss == nil || math.IsInf(*m.Loss, 0) || math.IsNaN(*m.Loss) {
			continue
		}
		if best == nil || *m.Loss < bestLoss {
			best, bestLoss = &trials[i], *m.Loss
		}
	}
	if best == nil {
		t.Fatalf("no trial reported a loss: %+v", trials)
	}
	return *best
}

// checkTrialsRanTheirParameters checks that each trial's deciding replica,
// the master, kept after its job, ran the demo trainer with the trial's
// arguments appended, succeeded, and wrote the trial's metrics (a diverged
// trial writes none).
func (e *e2e) checkTrialsRanTheirParameters(t *testing.T, trials []sweepTrial) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, tr := range trials {
		pods, _, err := e.jobObjects(ctx, tr.jobName)
		if err != nil {
			t.Fatal(err)
		}
		var master *corev1.Pod
		for i := range pods {
			if pods[i].Name == tr.jobName+"-master-0" {
				master = &pods[i]
			}
		}
		if master == nil {
			t.Errorf("trial %s: the master of job %s is gone after the job; left: %s", tr.number, tr.jobName, podNames(pods))
			continue
		}
		args, lines := master.Spec.Containers[0].Args, strings.Split(tr.args, "\n")
		if len(args) < len(lines) || !slices.Equal(args[len(args)-len(lines):], lines) {
			t.Errorf("trial %s: the master's args %v do not end with the trial's %q", tr.number, args, lines)
		}
		if master.Status.Phase != corev1.PodSucceeded || len(master.Status.ContainerStatuses) == 0 ||
			master.Status.ContainerStatuses[0].State.Terminated == nil {
			t.Errorf("trial %s: the master %s, want Succeeded", tr.number, master.Status.Phase)
			continue
		}
		// The trial's metrics are what its master wrote as it ended.
		var wrote, got map[string]any
		message := master.Status.ContainerStatuses[0].State.Terminated.Message
		if message != "" && (json.Unmarshal([]byte(message), &wrote) != nil || json.Unmarshal([]byte(tr.metrics), &got) != nil ||
			wrote["loss"] != got["loss"] || wrote["steps"] != got["steps"]) {
			t.Errorf("trial %s: metrics %s, but its master wrote %s", tr.number, tr.metrics, message)
		}
	}
}

// checkAtMostParallelTrainSteps checks, from the train steps' pods, that no
// more than the sweep's parallelism of them ran their main container at once,
// and that they did overlap: the trials ran side by side.
func (e *e2e) checkAtMostParallelTrainSteps(t *testing.T, wf *unstructured.Unstructured, trials []sweepTrial) {
	t.Helper()
	type edge struct {
		at    time.Time
		delta int
	}
	var edges []edge
	for _, tr := range trials {
		pod := e.podOfNode(t, wf, tr.train)
		for _, s := range pod.Status.ContainerStatuses {
			if s.Name == "main" && s.State.Terminated != nil {
				edges = append(edges, edge{s.State.Terminated.StartedAt.Time, 1}, edge{s.State.Terminated.FinishedAt.Time, -1})
			}
		}
	}
	if len(edges) != 2*len(trials) {
		t.Fatalf("%d of %d train steps' pods have an ended main container", len(edges)/2, len(trials))
	}
	// Times have a second's resolution: at a tie an end comes before a start.
	sort.Slice(edges, func(i, j int) bool {
		return edges[i].at.Before(edges[j].at) || edges[i].at.Equal(edges[j].at) && edges[i].delta < edges[j].delta
	})
	running, most := 0, 0
	for _, e := range edges {
		running += e.delta
		most = max(most, running)
	}
	if most > sweepParallelism || most < 2 {
		t.Errorf("at most %d train steps ran at once, want 2 to %d (the sweep's parallelism)", most, sweepParallelism)
	}
	t.Logf("at most %d train steps ran at once", most)
}
