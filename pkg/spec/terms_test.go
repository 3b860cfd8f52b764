package spec

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// Errors name the paths of the file the user wrote: a TFJob's replicas are
// under spec.tfReplicaSpecs, an MPIJob's under spec.mpiReplicaSpecs.
func TestErrorsUseTheManifestsOwnPaths(t *testing.T) {
	cases := []struct {
		file, set, want string
	}{
		{"tfjob_dist_mnist.yaml", "spec.tfReplicaSpecs.Worker.replicas=-1", "spec.tfReplicaSpecs.Worker.replicas: Invalid value: -1: must be >= 0"},
		{"mpijob_pi.yaml", "spec.mpiReplicaSpecs.Worker.replicas=-1", "spec.mpiReplicaSpecs.Worker.replicas: Invalid value: -1: must be >= 0"},
		{"jaxjob_cpu_demo.yaml", "spec.jaxReplicaSpecs.Worker.replicas=-1", "spec.jaxReplicaSpecs.Worker.replicas: Invalid value: -1: must be >= 0"},
		{"pytorchjob_simple.yaml", "spec.pytorchReplicaSpecs.Worker.replicas=-2", "spec.pytorchReplicaSpecs.Worker.replicas: Invalid value: -2: must be >= 0"},
		{"xgboostjob_iris.yaml", "spec.xgbReplicaSpecs.Worker.template.spec.containers[0].image=", "spec.xgbReplicaSpecs.Worker.template.spec.containers[0].image: Required value: missing image"},
		{"tfjob_dist_mnist.yaml", "spec.tfReplicaSpecs.Worker.replicas=\"4\"", `spec.tfReplicaSpecs.Worker.replicas: Invalid value: "4": must be an integer`},
	}
	for _, tc := range cases {
		t.Run(tc.file+" "+tc.set, func(t *testing.T) {
			_, _, err := Load(kubeflowFile(t, tc.file), Options{Sets: []string{tc.set}})
			if diff := cmp.Diff(tc.want, requireInvalid(t, err)); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
		})
	}
}

// A value of the wrong type is named by its full path, replica type
// included, in the manifest's terms — not by Go's struct names.
func TestTypeErrorsNameTheFieldAndWhatIsExpected(t *testing.T) {
	cases := []struct {
		set, want string
	}{
		{`spec.replicaSpecs.Worker.replicas="4"`, `spec.replicaSpecs.Worker.replicas: Invalid value: "4": must be an integer`},
		{`spec.replicaSpecs.Worker.replicas=3.5`, `spec.replicaSpecs.Worker.replicas: Invalid value: 3.5: must be an integer`},
		{`spec.replicaSpecs.Worker.replicas=9999999999`, `spec.replicaSpecs.Worker.replicas: Invalid value: 9999999999: must be an integer from -2147483648 to 2147483647`},
		{`spec.replicaSpecs.Worker.replicas=[4]`, `spec.replicaSpecs.Worker.replicas: Invalid value: must be an integer, not a list`},
		{`spec.runPolicy.backoffLimit=three`, `spec.runPolicy.backoffLimit: Invalid value: "three": must be an integer`},
		{`spec.replicaSpecs.PS.template.spec.containers[0].args=--lr`, `spec.replicaSpecs.PS.template.spec.containers[0].args: Invalid value: "--lr": must be a list`},
		{`spec.replicaSpecs.Worker.template.spec.containers[0].env[0].value=0.1`, `spec.replicaSpecs.Worker.template.spec.containers[0].env[0].value: Invalid value: 0.1: must be a string`},
		{`spec.replicaSpecs.Worker.template.spec.containers[0].resources.limits.cpu=2`, ""}, // a quantity decodes numbers itself
	}
	for _, tc := range cases {
		t.Run(tc.set, func(t *testing.T) {
			_, _, err := Load([]byte(psJob), Options{Sets: []string{tc.set}})
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Load: %v", err)
				}
				return
			}
			if diff := cmp.Diff(tc.want, requireInvalid(t, err)); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
		})
	}
}
