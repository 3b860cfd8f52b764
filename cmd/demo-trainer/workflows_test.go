package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/frameworks"
	"github.com/trainstep/trainstep/pkg/spec"
)

// trainCall is the job and the overrides one example passes to trainstep.
type trainCall struct {
	where     string
	job       string
	overrides map[string]string // set, env, arg, image
}

var argoVariable = regexp.MustCompile(`{{\s*([^}]+?)\s*}}`)

// exampleCalls finds every parameter list with a job under workflows/,
// with Argo variables resolved: the workflow's own parameters by their
// values, anything else (an item, another task's output) by "7", a value
// every override of the examples accepts and no default equals.
func exampleCalls(t *testing.T) []trainCall {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join("..", "..", "workflows", "*", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var calls []trainCall
	for _, path := range paths {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var doc map[string]any
		if err := yaml.Unmarshal(data, &doc); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		globals := map[string]string{}
		walk(doc, func(m map[string]any) {
			if wfArgs, ok := m["arguments"].(map[string]any); ok && m["templates"] != nil {
				for name, value := range parameters(wfArgs) {
					globals["workflow.parameters."+name] = value
				}
			}
		})
		walk(doc, func(m map[string]any) {
			args, ok := m["arguments"].(map[string]any)
			if !ok {
				return
			}
			params := parameters(args)
			if params["job"] == "" {
				return
			}
			call := trainCall{where: strings.TrimPrefix(path, filepath.Join("..", "..")+"/"), overrides: map[string]string{}}
			resolve := func(v string) string {
				return argoVariable.ReplaceAllStringFunc(v, func(ref string) string {
					if g, ok := globals[argoVariable.FindStringSubmatch(ref)[1]]; ok {
						return g
					}
					return "7"
				})
			}
			call.job = resolve(params["job"])
			for _, name := range []string{"set", "env", "arg", "image"} {
				// An override that is nothing but an earlier step's output
				// (a sweep's generated arguments) is known only at run time:
				// test/e2e's sweep test sees it reach the replicas.
				if v := params[name]; v != "" && !wholeRuntimeValue(v, globals) {
					call.overrides[name] = resolve(v)
				}
			}
			calls = append(calls, call)
		})
	}
	if len(calls) < 4 {
		t.Fatalf("found %d example calls of trainstep, want the examples under workflows/", len(calls))
	}
	return calls
}

// wholeRuntimeValue reports whether v is one Argo variable and nothing
// else, and not a parameter of the workflow.
func wholeRuntimeValue(v string, globals map[string]string) bool {
	m := argoVariable.FindStringSubmatch(v)
	if m == nil || m[0] != strings.TrimSpace(v) {
		return false
	}
	_, global := globals[m[1]]
	return !global
}

func parameters(args map[string]any) map[string]string {
	out := map[string]string{}
	list, _ := args["parameters"].([]any)
	for _, p := range list {
		m, _ := p.(map[string]any)
		name, _ := m["name"].(string)
		value, _ := m["value"].(string)
		out[name] = value
	}
	return out
}

func walk(v any, visit func(map[string]any)) {
	switch x := v.(type) {
	case map[string]any:
		visit(x)
		for _, child := range x {
			walk(child, visit)
		}
	case []any:
		for _, child := range x {
			walk(child, visit)
		}
	}
}

// replicaView is what each replica gets: its count, and per replica type
// the main container's image and env, and for the demo trainer the
// settings it would run with.
func replicaView(t *testing.T, job *v1alpha1.TrainJob) map[string]string {
	t.Helper()
	out := map[string]string{}
	for rt, rs := range job.Spec.ReplicaSpecs {
		c := frameworks.MainContainer(job, rt)
		if c == nil {
			continue
		}
		view := fmt.Sprintf("replicas %d, image %s", rs.ReplicaCount(), c.Image)
		if len(c.Command) > 0 && c.Command[0] == "demo-trainer" {
			settings, err := parseSettings(c.Args, envFrom(envMap(c.Env)), &bytes.Buffer{})
			if err != nil {
				t.Fatalf("%s: the demo trainer rejects %v: %v", rt, c.Args, err)
			}
			view += fmt.Sprintf(", trainer %+v", settings)
		} else {
			view += fmt.Sprintf(", args %v, env %v", c.Args, c.Env)
		}
		out[string(rt)] = view
	}
	return out
}

func envMap(env []corev1.EnvVar) map[string]string {
	out := map[string]string{}
	for _, e := range env {
		out[e.Name] = e.Value
	}
	return out
}

// Each override an example passes changes what its replicas get — for
// the demo trainer, the settings it trains with — so no example shows an
// override that the job's own flags silently win over.
func TestEveryExampleOverrideChangesWhatReplicasGet(t *testing.T) {
	for _, call := range exampleCalls(t) {
		base, _, err := spec.Load([]byte(call.job), spec.Options{})
		if err != nil {
			t.Fatalf("%s: the job does not load: %v", call.where, err)
		}
		before := replicaView(t, base)
		for name, value := range call.overrides {
			t.Run(call.where+" "+name+" "+value, func(t *testing.T) {
				var opts spec.Options
				switch name {
				case "set":
					opts.Sets = []string{value}
				case "env":
					opts.Envs = []string{value}
				case "arg":
					opts.Args = []string{value}
				case "image":
					opts.Images = []string{value}
				}
				job, _, err := spec.Load([]byte(call.job), opts)
				if err != nil {
					t.Fatalf("the override is rejected: %v", err)
				}
				if after := replicaView(t, job); reflect.DeepEqual(before, after) {
					t.Errorf("%s=%s changes nothing any replica gets:\n%v", name, value, after)
				}
			})
		}
	}
}
