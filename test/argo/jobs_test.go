package argo_test

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
	"testing"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/frameworks"
	"github.com/trainstep/trainstep/pkg/spec"
)

// Every framework has a job spec in workflows/jobs/ that `trainstep validate`
// accepts (spec.Load is what it runs).
func TestJobSpecsCoverEveryFramework(t *testing.T) {
	c := manifests(t)
	want := map[string]string{
		"workflows/jobs/tensorflow.yaml":      "tensorflow",
		"workflows/jobs/pytorch.yaml":         "pytorch",
		"workflows/jobs/pytorch-elastic.yaml": "pytorch elastic",
		"workflows/jobs/mpi.yaml":             "mpi",
		"workflows/jobs/jax.yaml":             "jax",
		"workflows/jobs/xgboost.yaml":         "xgboost",
		"workflows/jobs/paddle.yaml":          "paddle",
	}
	for path, kind := range want {
		t.Run(path, func(t *testing.T) {
			doc, ok := c.jobs[path]
			if !ok {
				t.Fatalf("%s is missing", path)
			}
			job, _, err := spec.Load(doc, spec.Options{Policy: examplesPolicy})
			if err != nil {
				t.Fatalf("trainstep validate would reject it: %v", err)
			}
			got := string(job.Spec.Framework)
			if job.Spec.ElasticPolicy != nil {
				got += " elastic"
			}
			if got != kind {
				t.Errorf("framework %q, want %q", got, kind)
			}
		})
	}
}

// argoVariable is one {{…}} reference in an argument value.
var argoVariable = regexp.MustCompile(`{{\s*([^}]+?)\s*}}`)

// resolveForCheck replaces the workflow's own parameters by their values
// and any other Argo variable (an item, another task's output) by "1", a
// value every override in the examples accepts.
func resolveForCheck(value string, globals []wfv1.Parameter) string {
	return argoVariable.ReplaceAllStringFunc(value, func(ref string) string {
		name := strings.TrimSpace(argoVariable.FindStringSubmatch(ref)[1])
		for _, g := range globals {
			if "workflow.parameters."+g.Name == name && g.Value != nil {
				return g.Value.String()
			}
		}
		return "1"
	})
}

// The job manifest every example passes to train, with the overrides it
// passes, must be a job trainstep runs: the paths of `set` exist in that
// manifest's own terms, the replica types of `env`/`arg`/`image` are the
// job's.
func TestEveryExampleJobLoadsWithItsOverrides(t *testing.T) {
	calls := trainArguments(manifests(t))
	for _, call := range calls {
		t.Run(call.path+"/"+call.where, func(t *testing.T) {
			args := map[string]string{}
			for _, p := range call.params {
				if p.Value != nil {
					args[p.Name] = resolveForCheck(p.Value.String(), call.globals)
				}
			}
			manifest := args["job"]
			if manifest == "" {
				t.Fatal("no job manifest passed")
			}
			opts := spec.Options{Policy: examplesPolicy}
			for name, into := range map[string]*[]string{"set": &opts.Sets, "image": &opts.Images, "env": &opts.Envs, "arg": &opts.Args} {
				if v := args[name]; v != "" {
					*into = []string{v}
				}
			}
			job, warnings, err := spec.Load([]byte(manifest), opts)
			if err != nil {
				t.Fatalf("trainstep would reject the job: %v", err)
			}
			if len(warnings) > 0 {
				t.Errorf("warnings: %q", warnings)
			}
			t.Logf("%s job, replicas %s", job.Spec.Framework, replicaCounts(job))
		})
	}
}

func replicaCounts(job *v1alpha1.TrainJob) string {
	var parts []string
	for rt, rs := range job.Spec.ReplicaSpecs {
		parts = append(parts, fmt.Sprintf("%s=%d", rt, rs.ReplicaCount()))
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

// singleProcessImages train in one process whatever TF_CONFIG says: an
// example must not run them as a distributed job.
var singleProcessImages = map[string]string{
	"kubeflow/tf-mnist-with-summaries": "Kubeflow's mnist_with_summaries example trains in a single process",
}

// Every example job with more than one replica runs an image that trains
// distributed, so the example does what its topology says.
func TestDistributedExamplesRunDistributedImages(t *testing.T) {
	c := manifests(t)
	jobs := map[string][]byte{}
	for path, doc := range c.jobs {
		jobs[path] = doc
	}
	for _, call := range trainArguments(c) {
		for _, p := range call.params {
			if p.Name == "job" && p.Value != nil {
				jobs[call.path+"/"+call.where] = []byte(resolveForCheck(p.Value.String(), call.globals))
			}
		}
	}
	for where, doc := range jobs {
		job, _, err := spec.Load(doc, spec.Options{Policy: examplesPolicy})
		if err != nil {
			t.Errorf("%s: %v", where, err)
			continue
		}
		if int32(frameworks.TotalReplicas(job)) < 2 {
			continue
		}
		for rt := range job.Spec.ReplicaSpecs {
			main := frameworks.MainContainer(job, rt)
			if main == nil {
				continue
			}
			repo, _, _ := strings.Cut(main.Image, ":")
			if why, single := singleProcessImages[repo]; single {
				t.Errorf("%s: %s runs %s as one of %d replicas: %s", where, rt, main.Image, int32(frameworks.TotalReplicas(job)), why)
			}
		}
	}
}
