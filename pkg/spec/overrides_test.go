package spec

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/frameworks"
)

func TestLoadSet(t *testing.T) {
	cases := []struct {
		name  string
		input []byte
		sets  []string
		check func(t *testing.T, job *v1alpha1.TrainJob)
	}{
		{"replicas of a TrainJob", []byte(psJob), []string{"spec.replicaSpecs.Worker.replicas=8"},
			func(t *testing.T, job *v1alpha1.TrainJob) {
				if n := job.Spec.ReplicaSpecs["Worker"].ReplicaCount(); n != 8 {
					t.Errorf("replicas = %d, want 8", n)
				}
			}},
		{"replicas of a TFJob use the TFJob's path", kubeflowFile(t, "tfjob_dist_mnist.yaml"), []string{"spec.tfReplicaSpecs.Worker.replicas=8"},
			func(t *testing.T, job *v1alpha1.TrainJob) {
				if n := job.Spec.ReplicaSpecs["Worker"].ReplicaCount(); n != 8 {
					t.Errorf("replicas = %d, want 8", n)
				}
			}},
		{"missing maps are created", []byte(psJob), []string{"spec.runPolicy.schedulingPolicy.gang=volcano", "metadata.labels.app\\.kubernetes\\.io/name=mnist"},
			func(t *testing.T, job *v1alpha1.TrainJob) {
				if g := job.Spec.RunPolicy.SchedulingPolicy.Gang; g != v1alpha1.GangVolcano {
					t.Errorf("gang = %s, want volcano", g)
				}
				if l := job.Labels["app.kubernetes.io/name"]; l != "mnist" {
					t.Errorf("escaped-dot label = %q, want mnist (labels %v)", l, job.Labels)
				}
			}},
		{"list item and YAML values", []byte(psJob), []string{
			"spec.replicaSpecs.Worker.template.spec.containers[0].args=[--epochs=5, --lr=0.01]",
			`spec.replicaSpecs.Worker.template.spec.containers[0].env[1].value="42"`,
			"spec.runPolicy.backoffLimit=3",
			"spec.metricsFrom=Worker/1",
		}, func(t *testing.T, job *v1alpha1.TrainJob) {
			c := job.Spec.ReplicaSpecs["Worker"].Template.Spec.Containers[0]
			if diff := cmp.Diff([]string{"--epochs=5", "--lr=0.01"}, c.Args); diff != "" {
				t.Errorf("args (-want +got):\n%s", diff)
			}
			if c.Env[1].Value != "42" {
				t.Errorf("env[1] = %v, want SEED=42", c.Env[1])
			}
			if *job.Spec.RunPolicy.BackoffLimit != 3 || job.Spec.MetricsFrom != "Worker/1" {
				t.Errorf("backoffLimit %d metricsFrom %q", *job.Spec.RunPolicy.BackoffLimit, job.Spec.MetricsFrom)
			}
		}},
		{"later sets win", []byte(psJob), []string{"spec.replicaSpecs.Worker.replicas=3", "spec.replicaSpecs.Worker.replicas=4"},
			func(t *testing.T, job *v1alpha1.TrainJob) {
				if n := job.Spec.ReplicaSpecs["Worker"].ReplicaCount(); n != 4 {
					t.Errorf("replicas = %d, want 4", n)
				}
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			job, _, err := Load(tc.input, Options{Sets: tc.sets})
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, job)
		})
	}
}

func TestLoadSetErrors(t *testing.T) {
	cases := []struct {
		set, want string
	}{
		{"spec.replicaSpecs.Worker.replicas", `--set "spec.replicaSpecs.Worker.replicas": want PATH=VALUE`},
		{"=3", "--set : empty path"},
		{"spec..framework=jax", `--set spec..framework: empty segment in path "spec..framework"`},
		{"spec.framework.name=x", `--set spec.framework.name: spec.framework is a string, not a map with field "name"`},
		{"spec.replicaSpecs.Worker.replicas.count=1", `--set spec.replicaSpecs.Worker.replicas.count: spec.replicaSpecs.Worker.replicas is a number, not a map with field "count"`},
		{"spec.replicaSpecs.Worker.template.spec.containers[5].image=x",
			"--set spec.replicaSpecs.Worker.template.spec.containers[5].image: index 5 out of range: spec.replicaSpecs.Worker.template.spec.containers has 2 items"},
		{"spec.replicaSpecs.Worker[0]=x", "--set spec.replicaSpecs.Worker[0]: spec.replicaSpecs.Worker is a map, not a list"},
		{"spec.replicaSpecs.Chief.template.spec.containers[0].image=x",
			"--set spec.replicaSpecs.Chief.template.spec.containers[0].image: spec.replicaSpecs.Chief.template.spec.containers does not exist, so it has no item [0]"},
		{"spec.x[a]=1", `--set spec.x[a]: list index "a" in path "spec.x[a]" is not a non-negative number`},
		{"spec.replicas=[1", `--set spec.replicas: value "[1" is not valid YAML: yaml: line 1: did not find expected ',' or ']'`},
		// A path that exists in no schema gets past --set and fails strict decoding.
		{"spec.replicaSpecs.Worker.replica=8", "spec.replicaSpecs.Worker.replica: unknown field"},
		{"spec.replicaSpecs.Worker.replicas=-1", "spec.replicaSpecs.Worker.replicas: Invalid value: -1: must be >= 0"},
	}
	for _, tc := range cases {
		t.Run(tc.set, func(t *testing.T) {
			_, _, err := Load([]byte(psJob), Options{Sets: []string{tc.set}})
			if msg := requireInvalid(t, err); msg != tc.want {
				t.Errorf("error =\n%q\nwant\n%q", msg, tc.want)
			}
		})
	}
}

func TestLoadContainerOverrides(t *testing.T) {
	type mainContainer struct {
		Image string
		Env   []corev1.EnvVar
		Args  []string
	}
	original := mainContainer{Image: "example.com/tf:1"}
	workerOriginal := mainContainer{Image: "example.com/tf:1", Args: []string{"--epochs=1"},
		Env: []corev1.EnvVar{{Name: "LR", Value: "0.1"}, {Name: "SEED", Value: "7"}}}
	cases := []struct {
		name       string
		opts       Options
		wantPS     mainContainer
		wantWorker mainContainer
	}{
		{"image for every type", Options{Images: []string{"example.com/tf:2"}},
			mainContainer{Image: "example.com/tf:2"},
			mainContainer{Image: "example.com/tf:2", Args: workerOriginal.Args, Env: workerOriginal.Env}},
		{"image for one type, any case", Options{Images: []string{"worker=example.com/tf:3"}},
			original,
			mainContainer{Image: "example.com/tf:3", Args: workerOriginal.Args, Env: workerOriginal.Env}},
		{"env added everywhere and replaced in place", Options{Envs: []string{"LR=0.5", "Worker:URL=http://x:1/a=b"}},
			mainContainer{Image: original.Image, Env: []corev1.EnvVar{{Name: "LR", Value: "0.5"}}},
			mainContainer{Image: original.Image, Args: workerOriginal.Args, Env: []corev1.EnvVar{
				{Name: "LR", Value: "0.5"}, {Name: "SEED", Value: "7"}, {Name: "URL", Value: "http://x:1/a=b"}}}},
		{"args appended; a value with a colon is not a type", Options{Args: []string{"--data=s3://bucket", "ps:--ps-only"}},
			mainContainer{Image: original.Image, Args: []string{"--data=s3://bucket", "--ps-only"}},
			mainContainer{Image: original.Image, Env: workerOriginal.Env, Args: []string{"--epochs=1", "--data=s3://bucket"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			job, _, err := Load([]byte(psJob), tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			for rt, want := range map[v1alpha1.ReplicaType]mainContainer{"PS": tc.wantPS, "Worker": tc.wantWorker} {
				c := frameworks.MainContainer(job, rt)
				got := mainContainer{Image: c.Image, Env: c.Env, Args: c.Args}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("%s main container (-want +got):\n%s", rt, diff)
				}
			}
			sidecar := job.Spec.ReplicaSpecs["Worker"].Template.Spec.Containers[1]
			if sidecar.Image != "example.com/sidecar:1" || len(sidecar.Env) != 0 || len(sidecar.Args) != 0 {
				t.Errorf("sidecar was changed: %+v", sidecar)
			}
		})
	}
}

func TestLoadContainerOverrideErrors(t *testing.T) {
	cases := []struct {
		name string
		opts Options
		want string
	}{
		{"image type not in job", Options{Images: []string{"Chief=x"}}, `--image "Chief=x": the job has no Chief replicas (it has PS, Worker)`},
		{"empty image", Options{Images: []string{"Worker="}}, `--image "Worker=": want [TYPE=]IMAGE`},
		{"env type not in job", Options{Envs: []string{"evaluator:A=1"}}, `--env "evaluator:A=1": the job has no evaluator replicas (it has PS, Worker)`},
		{"env without =", Options{Envs: []string{"LR"}}, `--env "LR": want [TYPE:]KEY=VALUE`},
		{"arg type not in job", Options{Args: []string{"master:--x"}}, `--arg "master:--x": the job has no master replicas (it has PS, Worker)`},
		{"unknown image type", Options{Images: []string{"trainer=x"}}, `--image "trainer=x": the job has no trainer replicas (it has PS, Worker)`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := Load([]byte(psJob), tc.opts)
			if msg := requireInvalid(t, err); msg != tc.want {
				t.Errorf("error = %q, want %q", msg, tc.want)
			}
		})
	}
}

func TestLoadOverridesOnKubeflowManifest(t *testing.T) {
	job, _, err := Load(kubeflowFile(t, "mpijob_pi.yaml"), Options{
		Images: []string{"launcher=mpioperator/mpi-pi:v2"},
		Args:   []string{"Launcher:--verbose"},
	})
	if err != nil {
		t.Fatal(err)
	}
	launcher := frameworks.MainContainer(job, v1alpha1.ReplicaTypeLauncher)
	if launcher.Image != "mpioperator/mpi-pi:v2" {
		t.Errorf("launcher image = %s", launcher.Image)
	}
	// pi.yaml's launcher args are -n 2 /home/mpiuser/pi.
	if diff := cmp.Diff([]string{"-n", "2", "/home/mpiuser/pi", "--verbose"}, launcher.Args); diff != "" {
		t.Errorf("launcher args (-want +got):\n%s", diff)
	}
	if w := frameworks.MainContainer(job, v1alpha1.ReplicaTypeWorker); w.Image != "mpioperator/mpi-pi:openmpi" {
		t.Errorf("worker image changed to %s", w.Image)
	}
}

// A WorkflowTemplate passes --set=, --image=, --env= and --arg= on every run;
// the empty ones must change nothing.
func TestLoadSkipsEmptyOverrides(t *testing.T) {
	plain, _, err := Load([]byte(psJob), Options{})
	if err != nil {
		t.Fatal(err)
	}
	empty := Options{Sets: []string{""}, Images: []string{""}, Envs: []string{""}, Args: []string{""}}
	withEmpty, _, err := Load([]byte(psJob), empty)
	if err != nil {
		t.Fatalf("empty overrides: %v", err)
	}
	if diff := cmp.Diff(plain, withEmpty); diff != "" {
		t.Errorf("empty overrides changed the job (-without +with):\n%s", diff)
	}
	mixed := Options{Sets: []string{"", "spec.replicaSpecs.Worker.replicas=5"}, Args: []string{"", "--lr=0.1"}}
	job, _, err := Load([]byte(psJob), mixed)
	if err != nil {
		t.Fatal(err)
	}
	if n := job.Spec.ReplicaSpecs["Worker"].ReplicaCount(); n != 5 {
		t.Errorf("replicas = %d, want 5 (the non-empty --set)", n)
	}
	if args := frameworks.MainContainer(job, "Worker").Args; len(args) == 0 || args[len(args)-1] != "--lr=0.1" {
		t.Errorf("worker args = %q, want --lr=0.1 last", args)
	}
}
