package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"
)

const tfJob = `apiVersion: trainstep.dev/v1alpha1
kind: TrainJob
metadata:
  name: mnist
  namespace: team-a
spec:
  framework: tensorflow
  replicaSpecs:
    PS:
      replicas: 1
      template:
        spec:
          containers: [{name: tensorflow, image: example.com/mnist:1}]
    Worker:
      replicas: 2
      template:
        spec:
          containers: [{name: tensorflow, image: example.com/mnist:1}]
`

const mpiJob = `apiVersion: trainstep.dev/v1alpha1
kind: TrainJob
metadata: {name: pi}
spec:
  framework: mpi
  replicaSpecs:
    Launcher:
      template: {spec: {containers: [{name: launcher, image: example.com/pi:1}]}}
    Worker:
      replicas: 2
      template: {spec: {containers: [{name: worker, image: example.com/pi:1}]}}
`

// invalidJob has two errors: a negative replica count and a missing image.
const invalidJob = `apiVersion: trainstep.dev/v1alpha1
kind: TrainJob
metadata: {name: broken}
spec:
  framework: jax
  replicaSpecs:
    Worker:
      replicas: -1
      template: {spec: {containers: [{name: jax}]}}
`

const kubeflowTFJob = `apiVersion: kubeflow.org/v1
kind: TFJob
metadata: {name: dist-mnist}
spec:
  tfReplicaSpecs:
    Worker:
      replicas: 2
      template:
        spec:
          containers: [{name: tensorflow, image: example.com/mnist:1, command: [no-such-trainer]}]
`

const unknownFieldJob = `apiVersion: trainstep.dev/v1alpha1
kind: TrainJob
metadata: {name: spmd}
spec:
  framework: jax
  colour: blue
  replicaSpecs:
    Worker:
      template: {spec: {containers: [{name: jax, image: example.com/spmd:1}]}}
`

type cliResult struct {
	code           int
	stdout, stderr string
}

// runCLI runs trainstep in-process with args, stdin and files written to a
// temporary directory ("@name" in args is replaced by that file's path).
func runCLI(t *testing.T, stdin string, files map[string]string, args ...string) cliResult {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for i, a := range args {
		if strings.HasPrefix(a, "@") {
			args[i] = filepath.Join(dir, a[1:])
		}
	}
	var stdout, stderr bytes.Buffer
	code := execute(args, strings.NewReader(stdin), &stdout, &stderr)
	return cliResult{code: code, stdout: stdout.String(), stderr: stderr.String()}
}

func TestExitCodesAndStreams(t *testing.T) {
	files := map[string]string{"tf.yaml": tfJob, "bad.yaml": invalidJob, "unknown.yaml": unknownFieldJob, "tfjob.yaml": kubeflowTFJob}
	cases := []struct {
		name       string
		stdin      string
		args       []string
		wantCode   int
		wantStdout string   // exact, when not empty
		stdoutHas  []string // substrings of stdout
		stderrHas  []string // substrings of stderr
		quietErr   bool     // stderr must be empty
	}{
		{name: "validate a valid job", args: []string{"validate", "-f", "@tf.yaml"}, wantCode: 0, wantStdout: "valid\n", quietErr: true},
		{name: "validate from stdin", stdin: tfJob, args: []string{"validate", "-f", "-"}, wantCode: 0, wantStdout: "valid\n", quietErr: true},
		{
			name: "validate lists every error with its field path", args: []string{"validate", "-f", "@bad.yaml"}, wantCode: 11,
			stderrHas: []string{
				"  spec.replicaSpecs.Worker.replicas: Invalid value: -1: must be >= 0\n",
				"  spec.replicaSpecs.Worker.template.spec.containers[0].image: Required value",
			},
		},
		{name: "render an invalid job", args: []string{"render", "-f", "@bad.yaml"}, wantCode: 11, stderrHas: []string{"spec.replicaSpecs.Worker.replicas"}},
		{name: "replicas over the bound", args: []string{"validate", "-f", "@tf.yaml", "--set", "spec.replicaSpecs.Worker.replicas=2147483647"}, wantCode: 11,
			stderrHas: []string{"spec.replicaSpecs.Worker.replicas: Invalid value: 2147483647: must be at most 4096"}},
		{name: "unknown field is an error", args: []string{"validate", "-f", "@unknown.yaml"}, wantCode: 11, stderrHas: []string{"spec.colour"}},
		{name: "lenient turns it into a warning", args: []string{"validate", "--lenient", "-f", "@unknown.yaml"}, wantCode: 0, wantStdout: "valid\n", stderrHas: []string{"Warning:", "spec.colour"}},
		{name: "--name too long for the replica names", args: []string{"validate", "-f", "@tf.yaml", "--name", strings.Repeat("a", 60)}, wantCode: 11, stderrHas: []string{"metadata.name"}},
		{name: "missing file", args: []string{"validate", "-f", "@nope.yaml"}, wantCode: 11, stderrHas: []string{"reading the job file"}},
		{name: "no job file", args: []string{"render"}, wantCode: 11, stderrHas: []string{"no job file: give one with -f FILE or as an argument"}},
		{name: "unknown flag", args: []string{"render", "-f", "@tf.yaml", "--colour"}, wantCode: 11, stderrHas: []string{"unknown flag: --colour"}},
		{name: "unknown command", args: []string{"train"}, wantCode: 11, stderrHas: []string{`unknown command "train"`}},
		{name: "an argument is a job file too", args: []string{"render", "-f", "@tf.yaml", "extra"}, wantCode: 11, stderrHas: []string{"extra: reading the job file"}},
		{name: "a Kubeflow manifest's errors use its own paths", args: []string{"validate", "-f", "@tfjob.yaml", "--set", "spec.tfReplicaSpecs.Worker.replicas=-1"}, wantCode: 11,
			stderrHas: []string{"Error: spec.tfReplicaSpecs.Worker.replicas: Invalid value: -1: must be >= 0\n"}},
		{name: "a type error names the replica type", args: []string{"validate", "-f", "@tf.yaml", "--set", `spec.replicaSpecs.Worker.replicas="4"`}, wantCode: 11,
			stderrHas: []string{"Error: spec.replicaSpecs.Worker.replicas: Invalid value: \"4\": must be an integer\n"}},
		{name: "a name of 70 characters gets this job's limit", args: []string{"validate", "-f", "@tf.yaml", "--name", strings.Repeat("a", 70)}, wantCode: 11,
			stderrHas: []string{"shorten the name to at most 54 characters"}},
		{name: "validate a positional file", args: []string{"validate", "@tf.yaml"}, wantCode: 0, wantStdout: "valid\n", quietErr: true},
		{name: "--version", args: []string{"--version"}, wantCode: 0, stdoutHas: []string{"trainstep ", "linux/", "go1."}, quietErr: true},
		{name: "completion", args: []string{"completion", "bash"}, wantCode: 0, stdoutHas: []string{"bash completion", "__start_trainstep"}, quietErr: true},
		{name: "bad output format", args: []string{"render", "-f", "@tf.yaml", "-o", "xml"}, wantCode: 11, stderrHas: []string{`"xml" is not yaml or json`}},
		{name: "version", args: []string{"version"}, wantCode: 0, stdoutHas: []string{"trainstep "}, quietErr: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := runCLI(t, tc.stdin, files, tc.args...)
			if got.code != tc.wantCode {
				t.Errorf("exit code = %d, want %d (stderr %q)", got.code, tc.wantCode, got.stderr)
			}
			if tc.wantStdout != "" && got.stdout != tc.wantStdout {
				t.Errorf("stdout = %q, want %q", got.stdout, tc.wantStdout)
			}
			if tc.wantCode != 0 && got.stdout != "" {
				t.Errorf("stdout = %q, want nothing on failure", got.stdout)
			}
			for _, s := range tc.stdoutHas {
				if !strings.Contains(got.stdout, s) {
					t.Errorf("stdout %q does not contain %q", got.stdout, s)
				}
			}
			for _, s := range tc.stderrHas {
				if !strings.Contains(got.stderr, s) {
					t.Errorf("stderr %q does not contain %q", got.stderr, s)
				}
			}
			if tc.quietErr && got.stderr != "" {
				t.Errorf("stderr = %q, want nothing", got.stderr)
			}
		})
	}
}

// A job whose TF_CONFIG no process could take is Invalid and prints
// nothing. (Printed, its objects would be about 580 MB: only sizes are
// reported.) Under the per-job layout each address names the job twice
// ("<pod>.<job>:2222"): with a 31-character name 4000 workers are over.
func TestRenderRefusesTFConfigOverTheEnvironmentLimit(t *testing.T) {
	got := runCLI(t, "", map[string]string{"tf.yaml": tfJob}, "render", "-f", "@tf.yaml", "--name", "a-rather-long-training-job-name", "--set", "spec.replicaSpecs.Worker.replicas=4000")
	if got.code != 11 || len(got.stdout) != 0 {
		t.Fatalf("exit code %d with %d bytes on stdout, want 11 and none (stderr %q)", got.code, len(got.stdout), got.stderr)
	}
	for _, want := range []string{"spec.replicaSpecs: with 4001 replicas TF_CONFIG would be", "131072"} {
		if !strings.Contains(got.stderr, want) {
			t.Errorf("stderr %q does not contain %q", got.stderr, want)
		}
	}
}

// kindsAndNames reads "Kind/name" of each object.
type object struct {
	Kind     string `json:"kind"`
	Metadata struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
	} `json:"metadata"`
}

func (o object) String() string { return o.Kind + "/" + o.Metadata.Namespace + "/" + o.Metadata.Name }

func TestRenderYAMLStream(t *testing.T) {
	got := runCLI(t, "", map[string]string{"tf.yaml": tfJob}, "render", "-f", "@tf.yaml")
	if got.code != 0 || got.stderr != "" {
		t.Fatalf("exit %d, stderr %q", got.code, got.stderr)
	}
	var names []string
	for _, doc := range strings.Split(got.stdout, "---\n") {
		var o object
		if err := yaml.Unmarshal([]byte(doc), &o); err != nil {
			t.Fatalf("document does not parse: %v\n%s", err, doc)
		}
		names = append(names, o.String())
	}
	want := []string{
		"NetworkPolicy/team-a/mnist",
		"ConfigMap/team-a/mnist-tf-cluster",
		"Service/team-a/mnist",
		"Pod/team-a/mnist-ps-0", "Pod/team-a/mnist-worker-0", "Pod/team-a/mnist-worker-1",
	}
	if diff := cmp.Diff(want, names); diff != "" {
		t.Errorf("objects (-want +got):\n%s", diff)
	}
	again := runCLI(t, "", map[string]string{"tf.yaml": tfJob}, "render", "-f", "@tf.yaml")
	if again.stdout != got.stdout {
		t.Error("two renders of the same file differ")
	}
}

// With --gang kubernetes the render shows what is sent: the PodGroup first,
// then pods that join it by spec.schedulingGroup.
func TestRenderKubernetesGangShowsThePodGroupAndEachPodsSchedulingGroup(t *testing.T) {
	got := runCLI(t, "", map[string]string{"tf.yaml": tfJob}, "render", "-f", "@tf.yaml", "--gang", "kubernetes")
	if got.code != 0 || got.stderr != "" {
		t.Fatalf("exit %d, stderr %q", got.code, got.stderr)
	}
	docs := strings.Split(got.stdout, "---\n")
	var pg struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Spec       struct {
			SchedulingPolicy struct {
				Gang struct {
					MinCount int `json:"minCount"`
				} `json:"gang"`
			} `json:"schedulingPolicy"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal([]byte(docs[0]), &pg); err != nil || pg.APIVersion != "scheduling.k8s.io/v1beta1" || pg.Kind != "PodGroup" || pg.Spec.SchedulingPolicy.Gang.MinCount != 3 {
		t.Fatalf("first object %+v (%v), want a scheduling.k8s.io/v1beta1 PodGroup of minCount 3:\n%s", pg, err, docs[0])
	}
	pods := 0
	for _, doc := range docs {
		var pod struct {
			Kind string `json:"kind"`
			Spec struct {
				SchedulingGroup struct {
					PodGroupName string `json:"podGroupName"`
				} `json:"schedulingGroup"`
			} `json:"spec"`
		}
		if err := yaml.Unmarshal([]byte(doc), &pod); err != nil {
			t.Fatal(err)
		}
		if pod.Kind != "Pod" {
			continue
		}
		pods++
		if pod.Spec.SchedulingGroup.PodGroupName != "mnist" {
			t.Errorf("a pod joins %q, want mnist:\n%s", pod.Spec.SchedulingGroup.PodGroupName, doc)
		}
	}
	if pods != 3 {
		t.Errorf("%d pods, want 3", pods)
	}
}

func TestRenderJSONListWithOverrides(t *testing.T) {
	got := runCLI(t, tfJob, nil, "render", "-f", "-", "-o", "json", "-n", "prod", "--name", "nightly",
		"--set", "spec.replicaSpecs.Worker.replicas=1", "--image", "Worker=example.com/mnist:2", "--env", "LR=0.1")
	if got.code != 0 || got.stderr != "" {
		t.Fatalf("exit %d, stderr %q", got.code, got.stderr)
	}
	var list struct {
		APIVersion string            `json:"apiVersion"`
		Kind       string            `json:"kind"`
		Items      []json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal([]byte(got.stdout), &list); err != nil {
		t.Fatalf("stdout is not JSON: %v", err)
	}
	if list.APIVersion != "v1" || list.Kind != "List" {
		t.Errorf("apiVersion/kind = %s/%s, want v1/List", list.APIVersion, list.Kind)
	}
	var names []string
	var worker corev1.Pod
	for _, raw := range list.Items {
		var o object
		_ = json.Unmarshal(raw, &o)
		names = append(names, o.String())
		if o.String() == "Pod/prod/nightly-worker-0" {
			_ = json.Unmarshal(raw, &worker)
		}
	}
	want := []string{"NetworkPolicy/prod/nightly", "ConfigMap/prod/nightly-tf-cluster", "Service/prod/nightly", "Pod/prod/nightly-ps-0", "Pod/prod/nightly-worker-0"}
	if diff := cmp.Diff(want, names); diff != "" {
		t.Errorf("objects (-want +got):\n%s", diff)
	}
	if len(worker.Spec.Containers) != 1 {
		t.Fatalf("worker pod has %d containers, want 1", len(worker.Spec.Containers))
	}
	c := worker.Spec.Containers[0]
	if c.Image != "example.com/mnist:2" {
		t.Errorf("worker image = %q, want example.com/mnist:2", c.Image)
	}
	if !hasEnv(c.Env, "LR", "0.1") {
		t.Errorf("worker env %v lacks LR=0.1", c.Env)
	}
}

// An MPI render shows its SSH Secret's keys with a placeholder, never a
// private key: the run makes the pair, once per job.
func TestRenderMPIShowsNoPrivateKey(t *testing.T) {
	for _, format := range []string{"json", "yaml"} {
		got := runCLI(t, mpiJob, nil, "render", "-f", "-", "-o", format)
		if got.code != 0 {
			t.Fatalf("-o %s: exit %d, stderr %q", format, got.code, got.stderr)
		}
		if strings.Contains(got.stdout, "PRIVATE KEY") || strings.Contains(got.stdout, "ssh-ed25519") {
			t.Errorf("-o %s prints a key:\n%s", format, got.stdout)
		}
		if format != "json" {
			continue
		}
		var list struct {
			Items []json.RawMessage `json:"items"`
		}
		if err := json.Unmarshal([]byte(got.stdout), &list); err != nil {
			t.Fatal(err)
		}
		var secret corev1.Secret
		if err := json.Unmarshal(list.Items[2], &secret); err != nil || secret.Kind != "Secret" {
			t.Fatalf("the object after the NetworkPolicy and the PodDisruptionBudget is %q (%v), want the SSH Secret", secret.Kind, err)
		}
		want := map[string]string{"ssh-privatekey": secretPlaceholder, "ssh-publickey": secretPlaceholder}
		if diff := cmp.Diff(want, secret.StringData); diff != "" || len(secret.Data) != 0 {
			t.Errorf("Secret stringData (-want +got):\n%s\ndata: %v", diff, secret.Data)
		}
	}
}

func hasEnv(env []corev1.EnvVar, name, value string) bool {
	for _, e := range env {
		if e.Name == name && e.Value == value {
			return true
		}
	}
	return false
}

// The JSON List is written one item at a time; its bytes must be those of
// encoding the whole List at once with json.MarshalIndent, for no item, one
// and many.
func TestEncodeJSONListMatchesMarshalIndent(t *testing.T) {
	var pods []runtime.Object
	for i := 0; i < 5; i++ {
		pods = append(pods, &corev1.Pod{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p-%d", i), Labels: map[string]string{"a": "<b&c>"}},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Env: []corev1.EnvVar{{Name: "TF_CONFIG", Value: `{"cluster":{}}`}}}}},
		})
	}
	for _, objs := range [][]runtime.Object{nil, pods[:1], pods} {
		list := corev1.List{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "List"}, Items: []runtime.RawExtension{}}
		for _, obj := range objs {
			raw, err := printable(obj)
			if err != nil {
				t.Fatal(err)
			}
			list.Items = append(list.Items, runtime.RawExtension{Raw: raw})
		}
		want, err := json.MarshalIndent(list, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		var got bytes.Buffer
		err = encodeJSONList(&got, func(yield func(runtime.Object) error) error {
			for _, obj := range objs {
				if err := yield(obj); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatalf("encodeJSONList: %v", err)
		}
		if diff := cmp.Diff(string(want)+"\n", got.String()); diff != "" {
			t.Errorf("%d objects (-MarshalIndent +encodeJSONList):\n%s", len(objs), diff)
		}
	}
}

// Like kubectl, -f may be repeated (or comma-separated) and every file is
// checked, each line naming its file.
func TestValidateChecksEveryFile(t *testing.T) {
	files := map[string]string{"tf.yaml": tfJob, "bad.yaml": invalidJob, "unknown.yaml": unknownFieldJob}
	for _, args := range [][]string{
		{"validate", "-f", "@bad.yaml", "-f", "@tf.yaml", "-f", "@unknown.yaml"},
		{"validate", "@bad.yaml", "@tf.yaml", "@unknown.yaml"},
	} {
		got := runCLI(t, "", files, args...)
		if got.code != 11 {
			t.Errorf("%v: exit %d, want 11", args, got.code)
		}
		if !strings.HasSuffix(strings.TrimSpace(got.stdout), "tf.yaml: valid") || strings.Count(got.stdout, "\n") != 1 {
			t.Errorf("%v: stdout %q, want only tf.yaml reported valid", args, got.stdout)
		}
		for _, want := range []string{"bad.yaml: spec.replicaSpecs.Worker.replicas: Invalid value: -1", "unknown.yaml: spec.colour: unknown field"} {
			if !strings.Contains(got.stderr, want) {
				t.Errorf("%v: stderr %q lacks %q", args, got.stderr, want)
			}
		}
	}
}
