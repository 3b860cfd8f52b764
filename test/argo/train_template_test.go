package argo_test

import (
	"fmt"
	"path"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	"github.com/argoproj/argo-workflows/v3/util/expr/argoexpr"
	"github.com/argoproj/argo-workflows/v3/util/expr/env"
	"github.com/argoproj/argo-workflows/v3/workflow/common"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/trainstep/trainstep/executor"
	"github.com/trainstep/trainstep/pkg/outputs"
	"github.com/trainstep/trainstep/pkg/result"
)

// trainTemplates returns the train template of the WorkflowTemplate and of
// the ClusterWorkflowTemplate in templates/, by kind.
func trainTemplates(t testing.TB) map[string]*wfv1.Template {
	t.Helper()
	wft, cwft := manifests(t).getters(t)
	return map[string]*wfv1.Template{
		"WorkflowTemplate":        findTemplate(t, wft[templateName].Spec.Templates, trainTemplate),
		"ClusterWorkflowTemplate": findTemplate(t, cwft[templateName].Spec.Templates, trainTemplate),
	}
}

func TestBothTemplatesCarryTheSameTrainTemplate(t *testing.T) {
	tmpls := trainTemplates(t)
	if diff := cmp.Diff(tmpls["WorkflowTemplate"], tmpls["ClusterWorkflowTemplate"]); diff != "" {
		t.Errorf("the train templates differ (-WorkflowTemplate +ClusterWorkflowTemplate):\n%s", diff)
	}
}

var jobNamePattern = regexp.MustCompile(`^ts-[0-9a-f]{10}$`)

// jobNameOf renders one attempt of a step and returns its --name.
func jobNameOf(t *testing.T, train *wfv1.Template, s argoStep) string {
	t.Helper()
	r := renderTrain(t, train, s)
	if left := unresolved(r.tmpl.Container); len(left) > 0 {
		t.Fatalf("unresolved after Argo's substitutions: %q", left)
	}
	name, ok := flagValue(r.tmpl.Container.Args, "--name")
	if !ok {
		t.Fatalf("no --name in %q", r.tmpl.Container.Args)
	}
	return name
}

func TestJobNameIsStableAcrossRetriesAndDistinctBetweenSteps(t *testing.T) {
	const uid, otherUID = "6f1c2a4e-1111-4d2b-9a7e-0c5d3e9f8a10", "0b9e8d7c-2222-4a3b-8c1d-5e6f7a8b9c0d"
	step := func(wfUID, node string, attempt int) argoStep {
		return argoStep{workflowName: "pipeline-x7k2p", workflowUID: typesUID(wfUID), namespace: "ml", nodeName: node, attempt: attempt}
	}
	cases := []struct {
		name  string
		a, b  argoStep
		equal bool
	}{
		{"first attempt and its retry", step(uid, "pipeline-x7k2p.train", 0), step(uid, "pipeline-x7k2p.train", 1), true},
		{"second and third retries", step(uid, "pipeline-x7k2p.train", 2), step(uid, "pipeline-x7k2p.train", 3), true},
		{"a node name that still carries a retry suffix", step(uid, "pipeline-x7k2p.train", 0), step(uid, "pipeline-x7k2p.train(1)", 1), true},
		{"two tasks of one DAG", step(uid, "pipeline-x7k2p.train", 0), step(uid, "pipeline-x7k2p.train-large", 0), false},
		{"two items of a withItems sweep", step(uid, "pipeline-x7k2p.trial(0:0.3).train", 0), step(uid, "pipeline-x7k2p.trial(1:0.1).train", 0), false},
		{"two steps of a steps template", step(uid, "pipeline-x7k2p[0].train", 0), step(uid, "pipeline-x7k2p[1].train", 0), false},
		{"the same step in two workflows", step(uid, "pipeline-x7k2p.train", 0), step(otherUID, "pipeline-x7k2p.train", 0), false},
	}
	for kind, train := range trainTemplates(t) {
		for _, tc := range cases {
			t.Run(kind+"/"+tc.name, func(t *testing.T) {
				a, b := jobNameOf(t, train, tc.a), jobNameOf(t, train, tc.b)
				for _, n := range []string{a, b} {
					if !jobNamePattern.MatchString(n) {
						t.Fatalf("job name %q does not match %s", n, jobNamePattern)
					}
				}
				if (a == b) != tc.equal {
					t.Errorf("names %q (%s, attempt %d) and %q (%s, attempt %d): equal = %v, want %v",
						a, tc.a.nodeName, tc.a.attempt, b, tc.b.nodeName, tc.b.attempt, a == b, tc.equal)
				}
			})
		}
	}
}

// identityOf renders one attempt of a step and returns the identity its
// job's objects carry, as trainstep works it out from --workflow-uid and
// --workflow-node.
func identityOf(t *testing.T, train *wfv1.Template, s argoStep) string {
	t.Helper()
	r := renderTrain(t, train, s)
	uid, okUID := flagValue(r.tmpl.Container.Args, "--workflow-uid")
	node, okNode := flagValue(r.tmpl.Container.Args, "--workflow-node")
	if !okUID || !okNode || uid != string(s.workflowUID) {
		t.Fatalf("--workflow-uid %q (want %q), --workflow-node %q in %q", uid, s.workflowUID, node, r.tmpl.Container.Args)
	}
	if _, ok := flagValue(r.tmpl.Container.Args, "--identity"); ok {
		t.Fatalf("the template passes --identity, an identity not proven: %q", r.tmpl.Container.Args)
	}
	return executor.WorkflowIdentity(uid, node)
}

// The identity of a step's objects is the workflow's and the step's own:
// the same for every retry attempt, another for every other step and
// workflow, and no value of any parameter a submitter passes changes it
// (unlike the job name, which is theirs to choose).
func TestIdentityIsTheWorkflowStepsAndNoParameterChangesIt(t *testing.T) {
	const uid, otherUID = "6f1c2a4e-1111-4d2b-9a7e-0c5d3e9f8a10", "0b9e8d7c-2222-4a3b-8c1d-5e6f7a8b9c0d"
	step := func(wfUID, node string, attempt int) argoStep {
		return argoStep{workflowName: "pipeline-x7k2p", workflowUID: typesUID(wfUID), namespace: "ml", nodeName: node, attempt: attempt}
	}
	for kind, train := range trainTemplates(t) {
		t.Run(kind, func(t *testing.T) {
			first := identityOf(t, train, step(uid, "pipeline-x7k2p.train", 0))
			if got := identityOf(t, train, step(uid, "pipeline-x7k2p.train(1)", 2)); got != first {
				t.Errorf("a retry attempt's identity %s differs from the first's %s", got, first)
			}
			for _, other := range []argoStep{step(uid, "pipeline-x7k2p.train-large", 0), step(otherUID, "pipeline-x7k2p.train", 0)} {
				if got := identityOf(t, train, other); got == first {
					t.Errorf("step %s of workflow %s has the identity of another step", other.nodeName, other.workflowUID)
				}
			}
			hostile := step(uid, "pipeline-x7k2p.train", 0)
			for _, p := range train.Inputs.Parameters {
				hostile.arguments = append(hostile.arguments, wfv1.Parameter{Name: p.Name, Value: wfv1.AnyStringPtr("--workflow-uid=" + otherUID)})
			}
			if got := identityOf(t, train, hostile); got != first {
				t.Errorf("parameters changed the identity: %s, want %s", got, first)
			}
		})
	}
}

func TestJobNameArgumentWins(t *testing.T) {
	for kind, train := range trainTemplates(t) {
		t.Run(kind, func(t *testing.T) {
			s := argoStep{workflowName: "w", workflowUID: "u-1", namespace: "ml", nodeName: "w.train",
				arguments: []wfv1.Parameter{{Name: "job-name", Value: wfv1.AnyStringPtr("mnist-nightly")}}}
			if got := jobNameOf(t, train, s); got != "mnist-nightly" {
				t.Errorf("--name = %q, want the job-name argument mnist-nightly", got)
			}
		})
	}
}

// retryScope is the scope the workflow controller evaluates a
// retryStrategy.expression in (buildRetryStrategyLocalScope): every value a
// string, the exit code "-1" when the pod reported none.
func retryScope(exitCode, status string, retries int) map[string]any {
	return env.GetFuncMap(map[string]any{
		common.LocalVarRetries:             strconv.Itoa(retries),
		common.LocalVarRetriesLastExitCode: exitCode,
		common.LocalVarRetriesLastStatus:   status,
		common.LocalVarRetriesLastDuration: "42.5",
		common.LocalVarRetriesLastMessage:  "Error (exit code " + exitCode + ")",
	})
}

// Argo retries the step when another attempt can re-attach and go on:
// after Transient, after the step was killed (OOM), and when its pod went
// with its node; never after Failed, Invalid or Terminated.
func TestRetryOnlyWhatAnAttemptCanGoOnWith(t *testing.T) {
	cases := []struct {
		exitCode string
		status   wfv1.NodePhase
		retry    bool
	}{
		{strconv.Itoa(result.ExitTransient), wfv1.NodeFailed, true},
		{strconv.Itoa(result.ExitFailed), wfv1.NodeFailed, false},
		{strconv.Itoa(result.ExitInvalid), wfv1.NodeFailed, false},
		{strconv.Itoa(result.ExitTerminated), wfv1.NodeFailed, false},
		{"1", wfv1.NodeFailed, false},  // a panic
		{"137", wfv1.NodeFailed, true}, // OOM-killed: the retry re-attaches
		{"-1", wfv1.NodeError, true},   // the pod vanished with its node: the retry re-attaches
		{"-1", wfv1.NodeFailed, false}, // a step that ended with no exit code of its own
	}
	for kind, train := range trainTemplates(t) {
		rs := train.RetryStrategy
		if rs == nil || rs.Expression == "" {
			t.Fatalf("%s: train has no retryStrategy.expression", kind)
		}
		limit, err := strconv.Atoi(rs.Limit.String())
		if err != nil || limit < 1 {
			t.Fatalf("%s: retryStrategy.limit %q, want a positive number", kind, rs.Limit.String())
		}
		// The policy must let a Failed node (a non-zero exit) reach the expression.
		if p := rs.RetryPolicyActual(); p != wfv1.RetryPolicyOnFailure && p != wfv1.RetryPolicyAlways {
			t.Fatalf("%s: retryPolicy %s never retries a Failed node", kind, p)
		}
		for _, tc := range cases {
			t.Run(fmt.Sprintf("%s/exit %s %s", kind, tc.exitCode, tc.status), func(t *testing.T) {
				got, err := argoexpr.EvalBool(rs.Expression, retryScope(tc.exitCode, string(tc.status), 0))
				if err != nil {
					t.Fatalf("evaluating %q: %v", rs.Expression, err)
				}
				if got != tc.retry {
					t.Errorf("%q with lastRetry.exitCode=%q: retry = %v, want %v", rs.Expression, tc.exitCode, got, tc.retry)
				}
			})
		}
	}
}

// Each output parameter of DESIGN's contract is read from the file trainstep
// writes under --outputs-dir.
func TestOutputParametersReadTheFilesTrainstepWrites(t *testing.T) {
	want := map[string]string{
		"phase": outputs.FilePhase, "reason": outputs.FileReason, "job-name": outputs.FileJobName,
		"duration-seconds": outputs.FileDurationSeconds, "restarts": outputs.FileRestarts,
		"replicas": outputs.FileReplicas, "metrics": outputs.FileMetrics,
		"termination-message": outputs.FileTerminationMessage, "trainer-status": outputs.FileTrainerStatus,
		"resumes": outputs.FileResumes,
	}
	for kind, train := range trainTemplates(t) {
		t.Run(kind, func(t *testing.T) {
			dir, ok := flagValue(train.Container.Args, "--outputs-dir")
			if !ok {
				t.Fatal("train does not pass --outputs-dir")
			}
			got := map[string]string{}
			for _, p := range train.Outputs.Parameters {
				if p.ValueFrom == nil || p.ValueFrom.Default == nil {
					t.Errorf("output %s has no valueFrom.default", p.Name)
					continue
				}
				rel := strings.TrimPrefix(p.ValueFrom.Path, dir+"/")
				if rel == p.ValueFrom.Path || path.Dir(p.ValueFrom.Path) != dir {
					t.Errorf("output %s reads %s, outside --outputs-dir %s", p.Name, p.ValueFrom.Path, dir)
				}
				got[p.Name] = rel
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("output parameters (-contract +template):\n%s", diff)
			}
			if !mountsDir(train.Container, dir) {
				t.Errorf("--outputs-dir %s is not a mounted volume (the root file system is read-only)", dir)
			}
		})
	}
}

func mountsDir(c *corev1.Container, dir string) bool {
	for _, m := range c.VolumeMounts {
		if m.MountPath == dir {
			return true
		}
	}
	return false
}

// The pod's grace period must cover trainstep's teardown, or SIGKILL cuts
// the deletion of the replicas short.
func TestGracePeriodCoversTeardown(t *testing.T) {
	for kind, train := range trainTemplates(t) {
		t.Run(kind, func(t *testing.T) {
			var patch corev1.PodSpec
			if err := yaml.UnmarshalStrict([]byte(train.PodSpecPatch), &patch); err != nil {
				t.Fatalf("podSpecPatch: %v", err)
			}
			if patch.TerminationGracePeriodSeconds == nil {
				t.Fatal("podSpecPatch sets no terminationGracePeriodSeconds")
			}
			grace := time.Duration(*patch.TerminationGracePeriodSeconds) * time.Second
			raw, ok := flagValue(train.Container.Args, "--termination-grace")
			if !ok {
				t.Fatal("no --termination-grace")
			}
			teardown, err := time.ParseDuration(raw)
			if err != nil {
				t.Fatal(err)
			}
			// Writing outputs and the emissary's own exit need a few seconds more.
			if teardown+10*time.Second > grace {
				t.Errorf("--termination-grace %s + 10s exceeds terminationGracePeriodSeconds %s", teardown, grace)
			}
		})
	}
}

// The step's container has a memory limit and passes it, in bytes, to
// trainstep, which gives the Go runtime 90% of it.
func TestTemplatePassesTheMemoryLimit(t *testing.T) {
	for kind, train := range trainTemplates(t) {
		t.Run(kind, func(t *testing.T) {
			c := train.Container
			limit, ok := c.Resources.Limits[corev1.ResourceMemory]
			if !ok {
				t.Fatal("the container has no memory limit")
			}
			env := containerEnv(t, c, &corev1.Pod{})
			for _, e := range env {
				if e.Name != "TRAINSTEP_MEMORY_LIMIT" {
					continue
				}
				if want := strconv.FormatInt(limit.Value(), 10); e.Value != want {
					t.Errorf("TRAINSTEP_MEMORY_LIMIT = %q, want the limit in bytes %s", e.Value, want)
				}
				return
			}
			t.Errorf("no TRAINSTEP_MEMORY_LIMIT in the env %v", env)
		})
	}
}
