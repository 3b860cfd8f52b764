package argo_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	"github.com/argoproj/argo-workflows/v3/workflow/templateresolution"
	"github.com/argoproj/argo-workflows/v3/workflow/validate"
)

// The template every example calls.
const (
	templateName  = "trainstep"
	trainTemplate = "train"
)

// templatesGetter resolves templateRefs and workflowTemplateRefs to the
// WorkflowTemplates of templates/ only, as `argo lint` does offline for the
// files it is given; anything else is not found.
type templatesGetter map[string]*wfv1.WorkflowTemplate

func (g templatesGetter) Get(name string) (*wfv1.WorkflowTemplate, error) {
	if t, ok := g[name]; ok {
		return t.DeepCopy(), nil
	}
	return nil, fmt.Errorf("couldn't find workflow template %q in templates/", name)
}

// clusterTemplatesGetter does the same for ClusterWorkflowTemplates.
type clusterTemplatesGetter map[string]*wfv1.ClusterWorkflowTemplate

func (g clusterTemplatesGetter) Get(name string) (*wfv1.ClusterWorkflowTemplate, error) {
	if t, ok := g[name]; ok {
		return t.DeepCopy(), nil
	}
	return nil, fmt.Errorf("couldn't find cluster workflow template %q in templates/", name)
}

var (
	_ templateresolution.WorkflowTemplateNamespacedGetter = templatesGetter{}
	_ templateresolution.ClusterWorkflowTemplateGetter    = clusterTemplatesGetter{}
)

// getters builds both getters from the templates/ files of the catalog.
func (c *catalog) getters(t testing.TB) (templatesGetter, clusterTemplatesGetter) {
	t.Helper()
	wft, cwft := templatesGetter{}, clusterTemplatesGetter{}
	for path, tmpl := range c.templates {
		if strings.HasPrefix(path, "templates/") {
			wft[tmpl.Name] = tmpl
		}
	}
	for path, tmpl := range c.clusterTemplate {
		if strings.HasPrefix(path, "templates/") {
			cwft[tmpl.Name] = tmpl
		}
	}
	if wft[templateName] == nil || cwft[templateName] == nil {
		t.Fatalf("templates/ must hold a WorkflowTemplate and a ClusterWorkflowTemplate named %q", templateName)
	}
	return wft, cwft
}

// lintAll runs Argo's validator in lint mode over every Argo object of the
// catalog and returns the errors by file.
func lintAll(c *catalog, wft templatesGetter, cwft clusterTemplatesGetter) map[string]error {
	errs := map[string]error{}
	lint := validate.ValidateOpts{Lint: true}
	for path, wf := range c.workflows {
		if err := validate.ValidateWorkflow(wft, cwft, wf.DeepCopy(), nil, lint); err != nil {
			errs[path] = err
		}
	}
	for path, tmpl := range c.templates {
		if err := validate.ValidateWorkflowTemplate(wft, cwft, tmpl.DeepCopy(), nil, lint); err != nil {
			errs[path] = err
		}
	}
	for path, tmpl := range c.clusterTemplate {
		if err := validate.ValidateClusterWorkflowTemplate(wft, cwft, tmpl.DeepCopy(), nil, lint); err != nil {
			errs[path] = err
		}
	}
	for path, cron := range c.cronWorkflows {
		if err := validate.ValidateCronWorkflow(context.Background(), wft, cwft, cron.DeepCopy(), nil); err != nil {
			errs[path] = err
		}
	}
	return errs
}

func TestArgoValidatesEveryWorkflowAndTemplate(t *testing.T) {
	c := manifests(t)
	wft, cwft := c.getters(t)
	errs := lintAll(c, wft, cwft)
	var paths []string
	for p := range errs {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		t.Errorf("%s: %v", p, errs[p])
	}
	n := len(c.workflows) + len(c.templates) + len(c.clusterTemplate) + len(c.cronWorkflows)
	t.Logf("Argo's validator (lint mode) checked %d objects", n)
}

// trainArguments returns every call of the train template in the catalog:
// a templateRef from a DAG task or a step, or a workflowTemplateRef to the
// WorkflowTemplate whose entrypoint is train.
func trainArguments(c *catalog) []trainCall {
	var calls []trainCall
	visit := func(path string, spec *wfv1.WorkflowSpec) {
		if ref := spec.WorkflowTemplateRef; ref != nil && ref.Name == templateName {
			calls = append(calls, trainCall{path: path, where: "workflowTemplateRef", params: spec.Arguments.Parameters, globals: spec.Arguments.Parameters})
		}
		for _, tmpl := range spec.Templates {
			for _, ref := range templateRefs(tmpl) {
				if ref.ref.Name == templateName && ref.ref.Template == trainTemplate {
					calls = append(calls, trainCall{path: path, where: tmpl.Name + "/" + ref.caller, params: ref.args.Parameters, globals: spec.Arguments.Parameters})
				}
			}
		}
	}
	for path, wf := range c.workflows {
		visit(path, &wf.Spec)
	}
	for path, cron := range c.cronWorkflows {
		visit(path, &cron.Spec.WorkflowSpec)
	}
	sort.Slice(calls, func(i, j int) bool { return calls[i].path+calls[i].where < calls[j].path+calls[j].where })
	return calls
}

// templateRefCall is a DAG task or step of a template that calls another
// template by templateRef.
type templateRefCall struct {
	caller string
	ref    *wfv1.TemplateRef
	args   wfv1.Arguments
}

func templateRefs(tmpl wfv1.Template) []templateRefCall {
	var refs []templateRefCall
	if tmpl.DAG != nil {
		for _, task := range tmpl.DAG.Tasks {
			if task.TemplateRef != nil {
				refs = append(refs, templateRefCall{task.Name, task.TemplateRef, task.Arguments})
			}
		}
	}
	for _, parallel := range tmpl.Steps {
		for _, step := range parallel.Steps {
			if step.TemplateRef != nil {
				refs = append(refs, templateRefCall{step.Name, step.TemplateRef, step.Arguments})
			}
		}
	}
	return refs
}

// trainCall is one call of the train template.
type trainCall struct {
	path, where string
	params      []wfv1.Parameter
	globals     []wfv1.Parameter // the workflow's own arguments
}

// unknownTrainParameters names the arguments of a call that the train
// template has no input for. Argo ignores such arguments silently; a
// misspelled override would then do nothing, so the examples must have none.
func unknownTrainParameters(train *wfv1.Template, call trainCall) []string {
	inputs := map[string]bool{}
	for _, p := range train.Inputs.Parameters {
		inputs[p.Name] = true
	}
	var unknown []string
	for _, p := range call.params {
		if !inputs[p.Name] {
			unknown = append(unknown, p.Name)
		}
	}
	return unknown
}

func TestEveryCallPassesOnlyParametersTrainTakes(t *testing.T) {
	c := manifests(t)
	wft, _ := c.getters(t)
	train := findTemplate(t, wft[templateName].Spec.Templates, trainTemplate)
	calls := trainArguments(c)
	if len(calls) < 5 {
		t.Fatalf("found %d calls of the train template in workflows/, want one per example (≥ 5)", len(calls))
	}
	for _, call := range calls {
		if unknown := unknownTrainParameters(train, call); len(unknown) > 0 {
			t.Errorf("%s %s: train has no input parameter %q", call.path, call.where, unknown)
		}
	}
}

func findTemplate(t testing.TB, templates []wfv1.Template, name string) *wfv1.Template {
	t.Helper()
	for i := range templates {
		if templates[i].Name == name {
			return &templates[i]
		}
	}
	t.Fatalf("no template %q", name)
	return nil
}

// The validator and the parameter check must reject the mistakes a user
// makes in a workflow that calls trainstep.
func TestLintRejectsBrokenReferences(t *testing.T) {
	c := manifests(t)
	wft, cwft := c.getters(t)
	train := findTemplate(t, wft[templateName].Spec.Templates, trainTemplate)
	base := c.workflows["workflows/train-evaluate/workflow.yaml"]
	if base == nil {
		t.Fatal("workflows/train-evaluate/workflow.yaml is missing")
	}
	cases := []struct {
		name  string
		edit  func(*wfv1.Workflow)
		check func(*wfv1.Workflow) error
	}{
		{"misspelled template name", func(wf *wfv1.Workflow) {
			taskByName(wf, "train").TemplateRef.Template = "trian"
		}, lintOne(wft, cwft)},
		{"misspelled WorkflowTemplate name", func(wf *wfv1.Workflow) {
			taskByName(wf, "train").TemplateRef.Name = "train-step"
		}, lintOne(wft, cwft)},
		{"ClusterWorkflowTemplate that does not exist", func(wf *wfv1.Workflow) {
			ref := taskByName(wf, "train").TemplateRef
			ref.Name, ref.ClusterScope = "trainstep-gpu", true
		}, lintOne(wft, cwft)},
		{"misspelled output parameter", func(wf *wfv1.Workflow) {
			args := taskByName(wf, "evaluate").Arguments.Parameters
			args[0].Value = wfv1.AnyStringPtr("{{tasks.train.outputs.parameters.metric}}")
		}, lintOne(wft, cwft)},
		{"misspelled input parameter", func(wf *wfv1.Workflow) {
			args := taskByName(wf, "train").Arguments.Parameters
			args[0].Name = "sets"
		}, func(wf *wfv1.Workflow) error {
			calls := trainArguments(&catalog{workflows: map[string]*wfv1.Workflow{"x": wf}})
			if unknown := unknownTrainParameters(train, calls[0]); len(unknown) > 0 {
				return fmt.Errorf("unknown parameters %v", unknown)
			}
			return nil
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.check(base.DeepCopy()); err != nil {
				t.Fatalf("the unbroken workflow fails: %v", err)
			}
			wf := base.DeepCopy()
			tc.edit(wf)
			err := tc.check(wf)
			if err == nil {
				t.Fatal("the broken workflow passes")
			}
			t.Logf("rejected: %v", err)
		})
	}
}

func lintOne(wft templatesGetter, cwft clusterTemplatesGetter) func(*wfv1.Workflow) error {
	return func(wf *wfv1.Workflow) error {
		return validate.ValidateWorkflow(wft, cwft, wf, nil, validate.ValidateOpts{Lint: true})
	}
}

func taskByName(wf *wfv1.Workflow, name string) *wfv1.DAGTask {
	for i := range wf.Spec.Templates {
		if dag := wf.Spec.Templates[i].DAG; dag != nil {
			for j := range dag.Tasks {
				if dag.Tasks[j].Name == name {
					return &dag.Tasks[j]
				}
			}
		}
	}
	panic("no task " + name)
}
