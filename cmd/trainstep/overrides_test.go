package main

import (
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/frameworks"
)

// A template parameter holds several overrides, one per line, and passes
// them as one flag value: each line is an override of its own.
func TestOverrideFlagsTakeOnePerLine(t *testing.T) {
	got := runCLI(t, "", map[string]string{"tf.yaml": tfJob}, "convert", "-f", "@tf.yaml",
		"--set", "spec.replicaSpecs.Worker.replicas=4\n\n  spec.runPolicy.backoffLimit=2\n",
		"--env", "LR=0.1\nWorker:SEED=7",
		"--arg", "--epochs=3\n--batch=64",
		"--image", "example.com/mnist:2\r\nPS=example.com/ps:3",
	)
	if got.code != 0 {
		t.Fatalf("exit %d (stderr %q)", got.code, got.stderr)
	}
	var job v1alpha1.TrainJob
	if err := yaml.Unmarshal([]byte(got.stdout), &job); err != nil {
		t.Fatal(err)
	}
	if n := job.Spec.ReplicaSpecs[v1alpha1.ReplicaTypeWorker].ReplicaCount(); n != 4 {
		t.Errorf("workers = %d, want 4", n)
	}
	if b := job.Spec.RunPolicy.BackoffLimit; b == nil || *b != 2 {
		t.Errorf("backoffLimit = %v, want 2", b)
	}
	worker := frameworks.MainContainer(&job, v1alpha1.ReplicaTypeWorker)
	ps := frameworks.MainContainer(&job, v1alpha1.ReplicaTypePS)
	env := map[string]string{}
	for _, e := range worker.Env {
		env[e.Name] = e.Value
	}
	if env["LR"] != "0.1" || env["SEED"] != "7" {
		t.Errorf("worker env = %v, want LR=0.1 and SEED=7", worker.Env)
	}
	for _, e := range ps.Env {
		if e.Name == "SEED" {
			t.Errorf("the PS got the worker's SEED")
		}
	}
	if n := len(worker.Args); n < 2 || worker.Args[n-2] != "--epochs=3" || worker.Args[n-1] != "--batch=64" {
		t.Errorf("worker args = %q, want --epochs=3 --batch=64 last", worker.Args)
	}
	if worker.Image != "example.com/mnist:2" || ps.Image != "example.com/ps:3" {
		t.Errorf("images: worker %s, ps %s; want example.com/mnist:2 and example.com/ps:3", worker.Image, ps.Image)
	}
}
