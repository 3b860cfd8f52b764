package main

import (
	"strings"
	"testing"
)

// A key written twice in one map is an error naming the key's path and
// both lines, in YAML and JSON and for every kind: before, the later value
// silently won.
func TestDuplicateKeysAreAnError(t *testing.T) {
	files := map[string]string{
		"trainjob.yaml": strings.Replace(tfJob, "      replicas: 2\n", "      replicas: 2\n      replicas: 4\n", 1),
		"tfjob.yaml":    strings.Replace(kubeflowTFJob, "      replicas: 2\n", "      replicas: 3\n      replicas: 4\n", 1),
		"pytorchjob.json": `{
  "apiVersion": "kubeflow.org/v1",
  "kind": "PyTorchJob",
  "metadata": {"name": "ddp"},
  "spec": {
    "pytorchReplicaSpecs": {
      "Master": {"replicas": 1, "template": {"spec": {"containers": [{"name": "pytorch", "image": "example.com/ddp:1"}]}}},
      "Worker": {"replicas": 2, "template": {"spec": {"containers": [{"name": "pytorch",
        "image": "example.com/ddp:1",
        "image": "example.com/ddp:2"}]}}}
    }
  }
}`,
		"mpijob.yaml": `apiVersion: kubeflow.org/v2beta1
kind: MPIJob
metadata: {name: pi}
spec:
  slotsPerWorker: 1
  mpiReplicaSpecs:
    Launcher:
      replicas: 1
      template: {spec: {containers: [{name: launcher, image: example.com/pi:1}]}}
    Worker:
      replicas: 2
      template: {spec: {containers: [{name: worker, image: example.com/pi:1}]}}
  slotsPerWorker: 2
`,
	}
	cases := []struct {
		file, want string
	}{
		{"trainjob.yaml", "spec.replicaSpecs.Worker.replicas: duplicate field, at lines 15 and 16"},
		{"tfjob.yaml", "spec.tfReplicaSpecs.Worker.replicas: duplicate field, at lines 7 and 8"},
		{"pytorchjob.json", "spec.pytorchReplicaSpecs.Worker.template.spec.containers[0].image: duplicate field, at lines 9 and 10"},
		{"mpijob.yaml", "spec.slotsPerWorker: duplicate field, at lines 5 and 13"},
	}
	for _, tc := range cases {
		t.Run(tc.file, func(t *testing.T) {
			got := runCLI(t, "", files, "validate", "-f", "@"+tc.file)
			if got.code != 11 {
				t.Errorf("exit %d, want 11 (stderr %q)", got.code, got.stderr)
			}
			if !strings.Contains(got.stderr, tc.want) {
				t.Errorf("stderr %q lacks %q", got.stderr, tc.want)
			}
			if got.stdout != "" {
				t.Errorf("stdout %q, want nothing", got.stdout)
			}
		})
	}
	t.Run("lenient warns and uses the later value", func(t *testing.T) {
		got := runCLI(t, "", files, "convert", "--lenient", "-f", "@tfjob.yaml")
		if got.code != 0 {
			t.Fatalf("exit %d (stderr %q)", got.code, got.stderr)
		}
		if !strings.Contains(got.stderr, "Warning: spec.tfReplicaSpecs.Worker.replicas: duplicate field, at lines 7 and 8") {
			t.Errorf("stderr %q lacks the warning", got.stderr)
		}
		if !strings.Contains(got.stdout, "replicas: 4") {
			t.Errorf("convert printed %q, want the later value replicas: 4", got.stdout)
		}
	})
	t.Run("the same key in two maps is no duplicate", func(t *testing.T) {
		got := runCLI(t, "", map[string]string{"tf.yaml": tfJob}, "validate", "-f", "@tf.yaml")
		if got.code != 0 {
			t.Errorf("exit %d (stderr %q)", got.code, got.stderr)
		}
	})
}
