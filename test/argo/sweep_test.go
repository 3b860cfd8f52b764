package argo_test

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
)

// sweepWorkflow is the sweep example whose scripts these tests run.
const sweepWorkflow = "workflows/sweep/workflow.yaml"

// scriptRun is what one run of a script template printed, its exit code and
// the files it wrote under the directory its OUT names.
type scriptRun struct {
	stdout, stderr string
	code           int
	files          map[string]string
}

// runSweepScript runs one of the sweep's script templates with this
// machine's python3, the template's env taken from the workflow's own
// arguments, env winning.
func runSweepScript(t *testing.T, template string, env map[string]string) scriptRun {
	t.Helper()
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Skipf("the sweep's scripts need python3: %v", err)
	}
	wf := manifests(t).workflows[sweepWorkflow]
	if wf == nil {
		t.Fatalf("%s is missing", sweepWorkflow)
	}
	tmpl := findTemplate(t, wf.Spec.Templates, template)
	if tmpl.Script == nil {
		t.Fatalf("%s: template %s is not a script", sweepWorkflow, template)
	}
	out := t.TempDir()
	cmd := exec.Command(python, "-c", tmpl.Script.Source)
	cmd.Env = append(os.Environ(), "OUT="+out)
	for _, e := range tmpl.Script.Env {
		value := e.Value
		if name, ok := strings.CutPrefix(strings.Trim(value, "{}"), "workflow.parameters."); ok {
			value = workflowArgument(t, wf, name)
		}
		if v, ok := env[e.Name]; ok {
			value = v
		}
		if e.Name == "OUT" {
			value = out
		}
		cmd.Env = append(cmd.Env, e.Name+"="+value)
	}
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	run := scriptRun{stdout: stdout.String(), stderr: stderr.String(), files: map[string]string{}}
	if exit, ok := err.(*exec.ExitError); ok {
		run.code = exit.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(out)
	for _, entry := range entries {
		data, err := os.ReadFile(filepath.Join(out, entry.Name()))
		if err != nil {
			t.Fatal(err)
		}
		run.files[entry.Name()] = string(data)
	}
	return run
}

func workflowArgument(t *testing.T, wf *wfv1.Workflow, name string) string {
	t.Helper()
	for _, p := range wf.Spec.Arguments.Parameters {
		if p.Name == name && p.Value != nil {
			return p.Value.String()
		}
	}
	t.Fatalf("%s has no argument %q", sweepWorkflow, name)
	return ""
}

// generatedTrial is one item of generate's output, as withParam reads it.
type generatedTrial struct {
	Trial      string
	Parameters json.RawMessage
	Args       string
}

func generate(t *testing.T, env map[string]string) []generatedTrial {
	t.Helper()
	run := runSweepScript(t, "generate", env)
	if run.code != 0 {
		t.Fatalf("generate exited %d:\n%s", run.code, run.stderr)
	}
	var trials []generatedTrial
	if err := json.Unmarshal([]byte(run.stdout), &trials); err != nil {
		t.Fatalf("generate's output is not a JSON list of trials: %v\n%s", err, run.stdout)
	}
	return trials
}

// The default space draws one learning rate per trial, each from another of
// the trials' equal strata of [0.001, 1] on a log scale; each trial's args
// pass its set as flags; the same seed draws the same sets.
func TestSweepGeneratesOneTrialPerStratum(t *testing.T) {
	trials := generate(t, nil)
	if len(trials) != 8 {
		t.Fatalf("generate drew %d trials with the default trials, want 8", len(trials))
	}
	strata := map[int]bool{}
	for i, tr := range trials {
		var params struct{ LR float64 }
		if err := json.Unmarshal(tr.Parameters, &params); err != nil {
			t.Fatalf("trial %d's parameters %s: %v", i, tr.Parameters, err)
		}
		if tr.Trial != fmt.Sprint(i) || tr.Args != fmt.Sprintf("--lr=%v", params.LR) {
			t.Errorf("trial %d: number %q, args %q, want %d and --lr=%v", i, tr.Trial, tr.Args, i, params.LR)
		}
		u := math.Log(params.LR/0.001) / math.Log(1/0.001)
		strata[int(u*8)] = true
	}
	if len(strata) != 8 {
		t.Errorf("the 8 learning rates fall in %d of the 8 log strata, want one in each: %+v", len(strata), trials)
	}
	again := generate(t, nil)
	other := generate(t, map[string]string{"SEED": "2"})
	if !reflect.DeepEqual(again, trials) || reflect.DeepEqual(other, trials) {
		t.Errorf("seed 1 twice drew %v and %v, seed 2 %v: want the same sets from the same seed only", trials, again, other)
	}
}

// Whole numbers, lists of values and several hyperparameters at once.
func TestSweepGeneratesEveryKindOfHyperparameter(t *testing.T) {
	trials := generate(t, map[string]string{"TRIALS": "4",
		"SPACE": `{"steps": {"min": 100, "max": 400, "int": true}, "optimizer": ["sgd", "adam"]}`})
	optimizers := map[string]int{}
	var steps []int
	for _, tr := range trials {
		var params struct {
			Steps     json.Number
			Optimizer string
		}
		if err := json.Unmarshal(tr.Parameters, &params); err != nil {
			t.Fatal(err)
		}
		n, err := params.Steps.Int64()
		if err != nil || n < 100 || n > 400 {
			t.Errorf("trial %s: steps %s, want a whole number in [100, 400]", tr.Trial, params.Steps)
		}
		steps = append(steps, int(n))
		optimizers[params.Optimizer]++
		if !strings.Contains(tr.Args, "--steps="+params.Steps.String()) || !strings.Contains(tr.Args, "--optimizer="+params.Optimizer) {
			t.Errorf("trial %s: args %q do not pass %s", tr.Trial, tr.Args, tr.Parameters)
		}
	}
	sort.Ints(steps)
	if optimizers["sgd"] != 2 || optimizers["adam"] != 2 {
		t.Errorf("4 trials over 2 optimizers: %v, want each twice", optimizers)
	}
	for i, s := range steps {
		if lo, hi := 100+75*i, 100+75*(i+1); s < lo || s > hi {
			t.Errorf("steps %v: the %d-th is not in its stratum [%d, %d]", steps, i, lo, hi)
		}
	}
}

func TestSweepGenerateRefusesABadSpace(t *testing.T) {
	for _, tc := range []struct{ trials, space, says string }{
		{"0", `{"lr": [0.1]}`, "trials: 0"},
		{"x", `{"lr": [0.1]}`, "trials must be a number"},
		{"4", `[1, 2]`, "space: want a JSON object"},
		{"4", `{"lr": {"min": 0, "max": 1, "scale": "log"}}`, "space.lr: "},
		{"4", `{"lr": {"max": 1}}`, "space.lr: want a list of values or an object with min and max"},
		{"4", `{"lr": []}`, "space.lr: an empty list"},
	} {
		run := runSweepScript(t, "generate", map[string]string{"TRIALS": tc.trials, "SPACE": tc.space})
		if run.code == 0 || !strings.Contains(run.stderr, tc.says) {
			t.Errorf("trials %s, space %s: exit %d, stderr %q; want a failure saying %q", tc.trials, tc.space, run.code, run.stderr, tc.says)
		}
	}
}

// trialResult is one trial's outputs as the sweep template aggregates them.
func trialResult(trial int, metrics string) map[string]string {
	return map[string]string{"trial": fmt.Sprint(trial), "parameters": fmt.Sprintf(`{"lr": 0.%d}`, trial+1),
		"args": fmt.Sprintf("--lr=0.%d", trial+1), "metrics": metrics, "job-name": fmt.Sprintf("ts-%d", trial), "phase": "Succeeded"}
}

func TestSweepPicksTheBestTrial(t *testing.T) {
	three := []map[string]string{trialResult(0, `{"loss": 0.5, "acc": 0.7}`), trialResult(2, `{"loss": 0.1, "acc": 0.9}`), trialResult(5, `{"loss": 0.3, "acc": 0.9}`)}
	for _, tc := range []struct {
		name      string
		results   []map[string]string
		env       map[string]string
		wantTrial string // empty: the step fails
		says      string
	}{
		{name: "lowest loss", results: three, wantTrial: "2", says: "3 of 8 trials succeeded"},
		{name: "highest accuracy, the lower trial on a tie", results: three,
			env: map[string]string{"METRIC": "acc", "DIRECTION": "maximize"}, wantTrial: "2"},
		{name: "a trial without the metric is left out", results: append([]map[string]string{trialResult(1, `{}`)}, three...),
			wantTrial: "2", says: "trial 1 (ts-1) reported no loss: left out"},
		{name: "a metric that is not a finite number is left out", results: []map[string]string{trialResult(3, `{"loss": NaN}`), trialResult(6, `{"loss": "0.01"}`), trialResult(4, `{"loss": 2}`)},
			wantTrial: "4"},
		{name: "fewer succeeded than min-succeeded", results: three, env: map[string]string{"MIN_SUCCEEDED": "8"},
			says: "3 of 8 trials succeeded, min-succeeded is 8"},
		{name: "every trial failed", results: nil, says: "0 of 8 trials succeeded, min-succeeded is 1"},
		{name: "no trial reported the metric", results: three, env: map[string]string{"METRIC": "f1"},
			says: "no trial that succeeded reported the metric 'f1'"},
		{name: "a direction that is neither", results: three, env: map[string]string{"DIRECTION": "up"}, says: "direction 'up'"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			results, err := json.Marshal(append([]map[string]string{}, tc.results...))
			if err != nil {
				t.Fatal(err)
			}
			env := map[string]string{"RESULTS": string(results)}
			for k, v := range tc.env {
				env[k] = v
			}
			run := runSweepScript(t, "pick-best", env)
			if !strings.Contains(run.stderr, tc.says) {
				t.Errorf("pick-best's log does not say %q:\n%s", tc.says, run.stderr)
			}
			if tc.wantTrial == "" {
				if run.code == 0 {
					t.Errorf("pick-best succeeded, want a failure; stdout %s", run.stdout)
				}
				return
			}
			if run.code != 0 {
				t.Fatalf("pick-best exited %d:\n%s", run.code, run.stderr)
			}
			var best map[string]string
			for _, r := range tc.results {
				if r["trial"] == tc.wantTrial {
					best = r
				}
			}
			for _, name := range []string{"trial", "parameters", "args", "metrics", "job-name"} {
				if run.files[name] != best[name] {
					t.Errorf("output %s = %q, want the best trial's %q", name, run.files[name], best[name])
				}
			}
			var printed struct {
				Trial      int
				Parameters map[string]float64
				Metrics    map[string]any
				JobName    string `json:"job-name"`
			}
			if err := json.Unmarshal([]byte(run.stdout), &printed); err != nil || fmt.Sprint(printed.Trial) != tc.wantTrial || printed.JobName != best["job-name"] {
				t.Errorf("pick-best's result %s (%v), want trial %s as one JSON object", run.stdout, err, tc.wantTrial)
			}
		})
	}
}
