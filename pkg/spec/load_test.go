package spec

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/frameworks"
	"github.com/trainstep/trainstep/pkg/result"
)

const psJob = `
apiVersion: trainstep.dev/v1alpha1
kind: TrainJob
metadata:
  name: mnist
spec:
  framework: tensorflow
  replicaSpecs:
    PS:
      template:
        spec:
          containers:
          - name: tensorflow
            image: example.com/tf:1
    Worker:
      replicas: 2
      template:
        spec:
          containers:
          - name: tensorflow
            image: example.com/tf:1
            args: [--epochs=1]
            env:
            - {name: LR, value: "0.1"}
            - {name: SEED, value: "7"}
          - name: sidecar
            image: example.com/sidecar:1
`

func kubeflowFile(t *testing.T, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "frameworks", "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// requireInvalid asserts err is an Invalid result error and returns its message.
func requireInvalid(t *testing.T, err error) string {
	t.Helper()
	if err == nil {
		t.Fatal("Load succeeded, want an error")
	}
	var rerr *result.Error
	if !errors.As(err, &rerr) || rerr.Phase != result.PhaseInvalid || rerr.Reason != result.ReasonInvalidSpec {
		t.Fatalf("error %v is not Invalid/InvalidSpec", err)
	}
	return err.Error()
}

func TestLoadTrainJob(t *testing.T) {
	job, warnings, err := Load([]byte(psJob), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(warnings) != 0 {
		t.Errorf("warnings = %v", warnings)
	}
	if got := *job.Spec.RunPolicy.CleanPodPolicy; got != v1alpha1.CleanPodPolicyRunning {
		t.Errorf("TrainJob cleanPodPolicy = %s, want Running", got)
	}
	ps := job.Spec.ReplicaSpecs[v1alpha1.ReplicaTypePS]
	if ps.ReplicaCount() != 1 || ps.RestartPolicy != v1alpha1.RestartPolicyNever {
		t.Errorf("PS = %d %s, want 1 Never", ps.ReplicaCount(), ps.RestartPolicy)
	}
}

func TestLoadJSON(t *testing.T) {
	data := `{"apiVersion":"trainstep.dev/v1alpha1","kind":"TrainJob","metadata":{"name":"j"},
	  "spec":{"framework":"jax","replicaSpecs":{"Worker":{"replicas":3,"template":{"spec":{"containers":[{"name":"jax","image":"i"}]}}}}}}`
	job, _, err := Load([]byte(data), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if n := job.Spec.ReplicaSpecs[v1alpha1.ReplicaTypeWorker].ReplicaCount(); n != 3 {
		t.Errorf("replicas = %d, want 3", n)
	}
}

// Kubeflow manifests come out with Kubeflow's defaults: restart policies
// (TF/JAX/XGBoost Never, PyTorch OnFailure, MPI launcher OnFailure and
// workers Never), cleanPodPolicy Running unless declared (a step has no
// job object whose deletion would remove kept pods), the framework port
// on the main container unless one of that name is declared, and PyTorch's
// nprocPerNode "auto" — training-operator v1.9 pkg/apis/kubeflow.org/v1/*_defaults.go
// and *_types.go, mpi-operator v2beta1 default.go and constants.go.
func TestLoadKubeflowExamples(t *testing.T) {
	type replica struct {
		replicas int32
		restart  v1alpha1.RestartPolicy
		ports    []corev1.ContainerPort
	}
	tfPort := []corev1.ContainerPort{{Name: "tfjob-port", ContainerPort: 2222}}
	ptPort := []corev1.ContainerPort{{Name: "pytorchjob-port", ContainerPort: 23456}}
	xgbDeclared := []corev1.ContainerPort{{Name: "xgboostjob-port", ContainerPort: 9991}}
	cases := []struct {
		file     string
		clean    v1alpha1.CleanPodPolicy
		replicas map[v1alpha1.ReplicaType]replica
		nproc    string
	}{
		{"tfjob_dist_mnist.yaml", "Running", map[v1alpha1.ReplicaType]replica{
			"Chief": {1, "Never", tfPort}, "PS": {1, "Never", tfPort}, "Worker": {2, "Never", tfPort}}, ""},
		{"pytorchjob_simple.yaml", "Running", map[v1alpha1.ReplicaType]replica{
			"Master": {1, "OnFailure", ptPort}, "Worker": {1, "OnFailure", ptPort}}, "auto"},
		{"pytorchjob_workers_only.yaml", "Running", map[v1alpha1.ReplicaType]replica{
			"Worker": {2, "OnFailure", ptPort}}, "auto"},
		{"pytorchjob_elastic_echo.yaml", "Running", map[v1alpha1.ReplicaType]replica{
			"Worker": {2, "OnFailure", ptPort}}, "auto"},
		{"jaxjob_cpu_demo.yaml", "Running", map[v1alpha1.ReplicaType]replica{
			"Worker": {2, "OnFailure", []corev1.ContainerPort{{Name: "jaxjob-port", ContainerPort: 6666}}}}, ""},
		{"xgboostjob_iris.yaml", "Running", map[v1alpha1.ReplicaType]replica{
			"Master": {1, "Never", xgbDeclared}, "Worker": {2, "ExitCode", xgbDeclared}}, ""},
		{"mpijob_pi.yaml", "Running", map[v1alpha1.ReplicaType]replica{
			"Launcher": {1, "OnFailure", nil}, "Worker": {2, "Never", nil}}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.file, func(t *testing.T) {
			job, _, err := Load(kubeflowFile(t, tc.file), Options{})
			if err != nil {
				t.Fatal(err)
			}
			if got := *job.Spec.RunPolicy.CleanPodPolicy; got != tc.clean {
				t.Errorf("cleanPodPolicy = %s, want %s", got, tc.clean)
			}
			if len(job.Spec.ReplicaSpecs) != len(tc.replicas) {
				t.Errorf("replica types = %v", frameworks.SortedReplicaTypes(job))
			}
			for rt, want := range tc.replicas {
				spec := job.Spec.ReplicaSpecs[rt]
				if spec == nil {
					t.Fatalf("no %s replicas", rt)
				}
				if spec.ReplicaCount() != want.replicas || spec.RestartPolicy != want.restart {
					t.Errorf("%s = %d %s, want %d %s", rt, spec.ReplicaCount(), spec.RestartPolicy, want.replicas, want.restart)
				}
				if diff := cmp.Diff(want.ports, frameworks.MainContainer(job, rt).Ports); diff != "" {
					t.Errorf("%s ports (-want +got):\n%s", rt, diff)
				}
			}
			gotNproc := ""
			if job.Spec.NprocPerNode != nil {
				gotNproc = *job.Spec.NprocPerNode
			}
			if gotNproc != tc.nproc {
				t.Errorf("nprocPerNode = %q, want %q", gotNproc, tc.nproc)
			}
		})
	}
}

func TestLoadUnknownFields(t *testing.T) {
	typo := strings.Replace(psJob, "image: example.com/tf:1\n    Worker", "imagee: example.com/tf:1\n    Worker", 1)
	_, _, err := Load([]byte(typo), Options{})
	msg := requireInvalid(t, err)
	want := "spec.replicaSpecs.PS.template.spec.containers[0].imagee: unknown field"
	if msg != want {
		t.Errorf("error = %q, want %q", msg, want)
	}

	job, warnings, err := Load([]byte(strings.Replace(psJob, "replicas: 2", "replicas: 2\n      replica: 3", 1)), Options{Lenient: true})
	if err != nil {
		t.Fatalf("lenient load failed: %v", err)
	}
	if diff := cmp.Diff([]string{"spec.replicaSpecs.Worker.replica: unknown field (ignored: --lenient)"}, warnings); diff != "" {
		t.Errorf("warnings (-want +got):\n%s", diff)
	}
	if n := job.Spec.ReplicaSpecs[v1alpha1.ReplicaTypeWorker].ReplicaCount(); n != 2 {
		t.Errorf("lenient load changed replicas to %d", n)
	}

	kubeflowTypo := strings.Replace(string(kubeflowFile(t, "mpijob_pi.yaml")), "slotsPerWorker", "slotPerWorker", 1)
	_, _, err = Load([]byte(kubeflowTypo), Options{})
	if msg := requireInvalid(t, err); msg != "spec.slotPerWorker: unknown field" {
		t.Errorf("error = %q", msg)
	}

	caseTypo := strings.Replace(psJob, "replicas: 2", "Replicas: 2", 1)
	_, _, err = Load([]byte(caseTypo), Options{})
	if msg := requireInvalid(t, err); msg != "spec.replicaSpecs.Worker.Replicas: unknown field" {
		t.Errorf("field names must match case: error = %q", msg)
	}
}

func TestLoadUnsupportedKinds(t *testing.T) {
	supported := "supported: trainstep.dev/v1alpha1 TrainJob, kubeflow.org/v1 TFJob, kubeflow.org/v1 PyTorchJob, " +
		"kubeflow.org/v2beta1 MPIJob, kubeflow.org/v1 JAXJob, kubeflow.org/v1 XGBoostJob, kubeflow.org/v1 PaddleJob"
	cases := []struct {
		name, manifest, want string
	}{
		{"Kubeflow Trainer v2", "apiVersion: trainer.kubeflow.org/v1alpha1\nkind: TrainJob\nmetadata: {name: x}\nspec: {runtimeRef: {name: torch-distributed}}\n",
			"trainer.kubeflow.org/v1alpha1 TrainJob is Kubeflow Trainer v2"},
		{"MPIJob v1alpha2", "apiVersion: kubeflow.org/v1alpha2\nkind: MPIJob\n", "kubeflow.org/v1alpha2 MPIJob is an older MPIJob version"},
		{"MXJob", "apiVersion: kubeflow.org/v1\nkind: MXJob\n", "kubeflow.org/v1 MXJob: trainstep has no MXNet framework"},
		{"unknown", "apiVersion: batch/v1\nkind: Job\n", `apiVersion "batch/v1" kind "Job" is not supported`},
		{"no kind", "metadata: {name: x}\n", "apiVersion and kind are required"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := Load([]byte(tc.manifest), Options{})
			msg := requireInvalid(t, err)
			if !strings.Contains(msg, tc.want) || !strings.HasSuffix(msg, supported) {
				t.Errorf("error = %q\nwant it to contain %q and end with %q", msg, tc.want, supported)
			}
		})
	}
}

// Training Operator's MPIJob v1 runs nowhere as it is: the error says how
// to convert it, naming no supported list (it is read, only not run).
func TestLoadMPIJobV1SaysHowToConvertIt(t *testing.T) {
	_, _, err := Load(kubeflowFile(t, "mpijob_v1_tensorflow_mnist.yaml"), Options{})
	msg := requireInvalid(t, err)
	for _, want := range []string{"kubeflow.org/v1 MPIJob is the Training Operator's MPIJob", "`trainstep convert -f FILE`", "kubeflow.org/v2beta1", "the workers run sshd"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not say %q", msg, want)
		}
	}
}

func TestLoadDocuments(t *testing.T) {
	cases := []struct {
		name, input, want string
	}{
		{"empty", "", "the manifest is empty"},
		{"comments only", "# nothing\n---\n", "the manifest is empty"},
		{"two documents", psJob + "---\n" + psJob, "the file holds 2 documents; one job file holds exactly one manifest"},
		{"not an object", "- a\n- b\n", "the manifest must be a YAML or JSON object, not a list"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := Load([]byte(tc.input), Options{})
			if msg := requireInvalid(t, err); msg != tc.want {
				t.Errorf("error = %q, want %q", msg, tc.want)
			}
		})
	}
	// A leading separator and a trailing empty document are fine.
	if _, _, err := Load([]byte("---\n"+psJob+"---\n"), Options{}); err != nil {
		t.Errorf("document with separators: %v", err)
	}
}

func TestLoadValidationErrorsOnePerLine(t *testing.T) {
	bad := strings.Replace(psJob, "replicas: 2", "replicas: -1", 1)
	bad = strings.Replace(bad, "image: example.com/sidecar:1", "image: \"\"", 1)
	_, _, err := Load([]byte(bad), Options{})
	msg := requireInvalid(t, err)
	want := "spec.replicaSpecs.Worker.replicas: Invalid value: -1: must be >= 0\n" +
		"spec.replicaSpecs.Worker.template.spec.containers[1].image: Required value: missing image"
	if msg != want {
		t.Errorf("error =\n%s\nwant\n%s", msg, want)
	}
	var verr *ValidationError
	if !errors.As(err, &verr) || len(verr.Errors) != 2 {
		t.Errorf("want a *ValidationError with 2 field errors, got %#v", err)
	}
}

func TestLoadNameAndNamespace(t *testing.T) {
	job, _, err := Load([]byte(psJob), Options{Name: "ts-0123456789", Namespace: "team-a"})
	if err != nil {
		t.Fatal(err)
	}
	if job.Name != "ts-0123456789" || job.Namespace != "team-a" {
		t.Errorf("name/namespace = %s/%s", job.Name, job.Namespace)
	}
	_, _, err = Load([]byte(psJob), Options{Name: strings.Repeat("n", 60)})
	if msg := requireInvalid(t, err); !strings.HasPrefix(msg, `metadata.name: Invalid value: "`+strings.Repeat("n", 60)+`": too long`) {
		t.Errorf("error = %q", msg)
	}
}

// --set reaches trainstep's own failurePolicy on a Kubeflow manifest, as
// it reaches schedulingPolicy.gang.
func TestSetFailurePolicyOnAKubeflowManifest(t *testing.T) {
	manifest := []byte(`apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata: {name: ddp}
spec:
  pytorchReplicaSpecs:
    Master: {replicas: 1, template: {spec: {containers: [{name: pytorch, image: train}]}}}
    Worker: {replicas: 2, template: {spec: {containers: [{name: pytorch, image: train}]}}}
`)
	job, _, err := Load(manifest, Options{Sets: []string{"spec.runPolicy.failurePolicy.restart=Replica"}})
	if err != nil {
		t.Fatal(err)
	}
	if fp := job.Spec.RunPolicy.FailurePolicy; fp == nil || fp.Restart != "Replica" || len(fp.Rules) != 1 {
		t.Fatalf("failure policy %+v, want restart Replica with the default rule", fp)
	}
	if _, _, err := Load(manifest, Options{Sets: []string{"spec.runPolicy.failurePolicy.restart=Pod"}}); err == nil ||
		!strings.Contains(err.Error(), "spec.runPolicy.failurePolicy.restart") {
		t.Errorf("a bad value: err %v, want one naming the field", err)
	}
}

// Load refuses a manifest over MaxManifestBytes before parsing it, whoever
// read the bytes.
func TestLoadRefusesAManifestOverTheLimit(t *testing.T) {
	data := make([]byte, MaxManifestBytes+1)
	_, _, err := Load(data, Options{})
	if err == nil || !strings.Contains(err.Error(), "the manifest is 4194305 bytes (4.0 MiB), over the limit of 4194304 bytes") {
		t.Fatalf("Load: %v, want the size over the limit", err)
	}
	if phase := result.PhaseOf(err); phase != result.PhaseInvalid {
		t.Errorf("phase %s, want Invalid", phase)
	}
}

// A step's end is where a Kubeflow job object would be deleted: without
// cleanPodPolicy the replicas still running then are deleted, and the user
// is told; an explicit None is kept, with a warning saying what it costs.
func TestCleanPodPolicyInAStep(t *testing.T) {
	manifest := kubeflowFile(t, "tfjob_dist_mnist.yaml")
	job, warnings, err := Load(manifest, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := *job.Spec.RunPolicy.CleanPodPolicy; got != v1alpha1.CleanPodPolicyRunning {
		t.Errorf("unset cleanPodPolicy = %s, want Running", got)
	}
	if !containsWith(warnings, "spec.runPolicy.cleanPodPolicy is unset: replicas still running when the step ends are deleted") {
		t.Errorf("warnings %q do not say what an unset cleanPodPolicy does", warnings)
	}

	for _, doc := range [][]byte{manifest, []byte(psJob)} {
		field := "spec.runPolicy.cleanPodPolicy=None"
		job, warnings, err = Load(doc, Options{Sets: []string{field}, Name: "kept"})
		if err != nil {
			t.Fatal(err)
		}
		if got := *job.Spec.RunPolicy.CleanPodPolicy; got != v1alpha1.CleanPodPolicyNone {
			t.Errorf("explicit None became %s", got)
		}
		if !containsWith(warnings, "None keeps the replicas still running when the step ends") ||
			!containsWith(warnings, "kubectl delete pods,services -l trainstep.dev/job-name=kept") {
			t.Errorf("warnings %q do not say what None costs and how to remove the replicas", warnings)
		}
	}
}

func containsWith(lines []string, substr string) bool {
	for _, l := range lines {
		if strings.Contains(l, substr) {
			return true
		}
	}
	return false
}
