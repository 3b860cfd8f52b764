package argo_test

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
	"testing"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	argotemplate "github.com/argoproj/argo-workflows/v3/util/template"
	"github.com/argoproj/argo-workflows/v3/workflow/common"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// argoStep is one attempt of a step that calls the train template, as the
// workflow controller sees it.
type argoStep struct {
	workflowName string
	workflowUID  types.UID
	namespace    string
	// nodeName is the step's node as Argo names it: "<workflow>.<task>" for a
	// DAG task of the entrypoint, "<workflow>[0].<step>" for a step, with
	// "(<index>:<item>)" for one item of withItems.
	nodeName  string
	attempt   int // 0 for the first run, N for the Nth retry
	arguments []wfv1.Parameter
}

// renderedStep is what the main container of that attempt's pod receives.
type renderedStep struct {
	tmpl    *wfv1.Template // the template after every substitution
	podName string
	jobFile string // what the init container writes to the job-file artifact's path
}

// renderTrain substitutes Argo's variables in the train template the way
// the workflow controller (v3.7) does for a template with a retryStrategy,
// using Argo's own functions in the same order:
//
//  1. executeTemplate: common.ProcessArgs with the global parameters and
//     node.name — the retry node's name, without "(N)" — as local parameter;
//  2. the retry attempt: common.SubstituteParams with pod.name (the
//     attempt's pod), retries and lastRetry.*;
//  3. createWorkflowPod: one last replacement over the pod with the
//     global parameters, the inputs and pod.name (substitutePodParams).
func renderTrain(t testing.TB, train *wfv1.Template, s argoStep) renderedStep {
	t.Helper()
	globals := common.Parameters{
		common.GlobalVarWorkflowName:               s.workflowName,
		common.GlobalVarWorkflowNamespace:          s.namespace,
		common.GlobalVarWorkflowUID:                string(s.workflowUID),
		common.GlobalVarWorkflowMainEntrypoint:     "main",
		common.GlobalVarWorkflowServiceAccountName: "",
	}
	processed, err := common.ProcessArgs(train.DeepCopy(), &wfv1.Arguments{Parameters: s.arguments}, globals,
		common.Parameters{"node.name": s.nodeName}, false, s.namespace, nil)
	if err != nil {
		t.Fatalf("ProcessArgs: %v", err)
	}

	attemptNode := fmt.Sprintf("%s(%d)", s.nodeName, s.attempt)
	podName := podNameV2(s.workflowName, train.Name, attemptNode)
	lastExit := "0"
	if s.attempt > 0 {
		lastExit = "12"
	}
	processed, err = common.SubstituteParams(processed, globals, common.Parameters{
		common.LocalVarPodName:             podName,
		common.LocalVarRetries:             strconv.Itoa(s.attempt),
		common.LocalVarRetriesLastExitCode: lastExit,
		common.LocalVarRetriesLastDuration: "0",
		common.LocalVarRetriesLastStatus:   "",
		common.LocalVarRetriesLastMessage:  "",
	})
	if err != nil {
		t.Fatalf("SubstituteParams: %v", err)
	}

	podParams := globals.DeepCopy()
	for _, p := range processed.Inputs.Parameters {
		podParams["inputs.parameters."+p.Name] = p.Value.String()
	}
	podParams[common.LocalVarPodName] = podName
	processed = replaceAll(t, processed, podParams)

	var jobFile string
	for _, a := range processed.Inputs.Artifacts {
		if a.Name == "job-file" && a.Raw != nil {
			jobFile = a.Raw.Data
		}
	}
	return renderedStep{tmpl: processed, podName: podName, jobFile: jobFile}
}

// replaceAll runs Argo's template replacement over the whole template.
func replaceAll(t testing.TB, tmpl *wfv1.Template, params common.Parameters) *wfv1.Template {
	t.Helper()
	data, err := json.Marshal(tmpl)
	if err != nil {
		t.Fatal(err)
	}
	replaced, err := argotemplate.Replace(string(data), params, true)
	if err != nil {
		t.Fatalf("replacing pod parameters: %v", err)
	}
	var out wfv1.Template
	if err := json.Unmarshal([]byte(replaced), &out); err != nil {
		t.Fatal(err)
	}
	return &out
}

// flagValue returns the value of --name=value in args, and whether it is there.
func flagValue(args []string, name string) (string, bool) {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, name+"="); ok {
			return v, true
		}
	}
	return "", false
}

// unresolved lists the arguments and env values still holding "{{".
func unresolved(c *corev1.Container) []string {
	var out []string
	for _, a := range append(append([]string{}, c.Command...), c.Args...) {
		if strings.Contains(a, "{{") {
			out = append(out, a)
		}
	}
	for _, e := range c.Env {
		if strings.Contains(e.Value, "{{") {
			out = append(out, e.Name+"="+e.Value)
		}
	}
	if strings.Contains(c.Image, "{{") {
		out = append(out, "image "+c.Image)
	}
	return out
}

func typesUID(s string) types.UID { return types.UID(s) }

// podNameV2 is Argo's pod name for a node (workflow/util.GeneratePodName,
// pod names v2): workflow and template name, then the FNV-1a hash of the
// node name. The package that defines it pulls in Argo's server, so it is
// restated here; the template does not use pod.name, only the test's
// logs do.
func podNameV2(workflowName, templateName, nodeName string) string {
	h := fnv.New32a()
	_, _ = h.Write([]byte(nodeName))
	prefix := workflowName + "-" + templateName
	if len(prefix) > 62 {
		prefix = prefix[:62]
	}
	return fmt.Sprintf("%s-%v", prefix, h.Sum32())
}
