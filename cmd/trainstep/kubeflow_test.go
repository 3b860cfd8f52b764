package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// `convert` prints a TrainJob that renders exactly the objects the
// Kubeflow manifest renders.
func TestConvertPrintsAnEquivalentTrainJob(t *testing.T) {
	for _, name := range []string{"tfjob_dist_mnist.yaml", "pytorchjob_elastic_echo.yaml", "pytorchjob_elastic_imagenet.yaml", "pytorchjob_workers_only.yaml", "jaxjob_cpu_demo.yaml", "xgboostjob_iris.yaml"} {
		t.Run(name, func(t *testing.T) {
			manifest, err := os.ReadFile(filepath.Join("..", "..", "pkg", "frameworks", "testdata", name))
			if err != nil {
				t.Fatal(err)
			}
			converted := runCLI(t, string(manifest), nil, "convert", "-f", "-")
			if converted.code != 0 || !strings.HasPrefix(converted.stdout, "apiVersion: trainstep.dev/v1alpha1\nkind: TrainJob\n") {
				t.Fatalf("convert: exit %d, stdout %q, stderr %q", converted.code, converted.stdout, converted.stderr)
			}
			fromKubeflow := runCLI(t, string(manifest), nil, "render", "-f", "-", "-o", "json")
			fromTrainJob := runCLI(t, converted.stdout, nil, "render", "-f", "-", "-o", "json")
			if fromKubeflow.code != 0 || fromTrainJob.code != 0 {
				t.Fatalf("render: %q / %q", fromKubeflow.stderr, fromTrainJob.stderr)
			}
			if diff := cmp.Diff(fromKubeflow.stdout, fromTrainJob.stdout); diff != "" {
				t.Errorf("objects of the Kubeflow manifest (-) and of its conversion (+) differ:\n%s", diff)
			}
		})
	}
}

// kubeflowGangJob declares Kubeflow's own schedulingPolicy.
const kubeflowGangJob = `apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata: {name: ddp}
spec:
  runPolicy:
    schedulingPolicy: {minAvailable: 2, queue: research, priorityClass: high, scheduleTimeoutSeconds: 120}
  pytorchReplicaSpecs:
    Master:
      template: {spec: {containers: [{name: pytorch, image: example.com/ddp:1}]}}
    Worker:
      replicas: 2
      template: {spec: {containers: [{name: pytorch, image: example.com/ddp:1}]}}
`

// A Kubeflow manifest gets a gang with --gang or --set on its own path, and
// its schedulingPolicy (minAvailable, queue, priorityClass, timeout) is used;
// the priority class is one the template author allows.
func TestKubeflowManifestsCanUseGangScheduling(t *testing.T) {
	for _, choose := range [][]string{{"--gang", "volcano"}, {"--set", "spec.runPolicy.schedulingPolicy.gang=volcano"}} {
		t.Run(strings.Join(choose, " "), func(t *testing.T) {
			got := runCLI(t, kubeflowGangJob, nil, append([]string{"render", "-f", "-", "-o", "json", "--allowed-priority-classes", "high"}, choose...)...)
			if got.code != 0 {
				t.Fatalf("exit %d: %s", got.code, got.stderr)
			}
			if strings.Contains(got.stderr, "keeps it off") {
				t.Errorf("warned that gang scheduling is off: %s", got.stderr)
			}
			var list struct {
				Items []struct {
					Kind string `json:"kind"`
					Spec struct {
						MinMember         int32  `json:"minMember"`
						Queue             string `json:"queue"`
						PriorityClassName string `json:"priorityClassName"`
						SchedulerName     string `json:"schedulerName"`
					} `json:"spec"`
				} `json:"items"`
			}
			if err := json.Unmarshal([]byte(got.stdout), &list); err != nil {
				t.Fatal(err)
			}
			var podGroups, volcanoPods int
			for _, item := range list.Items {
				switch item.Kind {
				case "PodGroup":
					podGroups++
					if item.Spec.MinMember != 2 || item.Spec.Queue != "research" || item.Spec.PriorityClassName != "high" {
						t.Errorf("PodGroup spec %+v, want minMember 2, queue research, priorityClassName high", item.Spec)
					}
				case "Pod":
					if item.Spec.SchedulerName == "volcano" && item.Spec.PriorityClassName == "high" {
						volcanoPods++
					}
				}
			}
			if podGroups != 1 || volcanoPods != 3 {
				t.Errorf("%d PodGroups and %d pods for volcano with priority high, want 1 and 3", podGroups, volcanoPods)
			}
		})
	}
	t.Run("without a choice the gang stays off, with a warning that says how to choose", func(t *testing.T) {
		got := runCLI(t, kubeflowGangJob, nil, "validate", "-f", "-", "--allowed-priority-classes", "high")
		if got.code != 0 || !strings.Contains(got.stderr, "--gang") {
			t.Errorf("exit %d, stderr %q: want valid with a warning naming --gang", got.code, got.stderr)
		}
	})
	t.Run("a gang that does not exist", func(t *testing.T) {
		got := runCLI(t, kubeflowGangJob, nil, "validate", "-f", "-", "--gang", "slurm")
		if got.code != 11 || !strings.Contains(got.stderr, `spec.runPolicy.schedulingPolicy.gang: Unsupported value: "slurm"`) {
			t.Errorf("exit %d, stderr %q", got.code, got.stderr)
		}
	})
}

// Training Operator's own elastic examples, unchanged, validate and render:
// a worker for every slot up to maxReplicas, torchrun's env for min:max,
// and imagenet's HPA metric is kept, not warned away.
func TestTrainingOperatorElasticExamplesRender(t *testing.T) {
	for _, tc := range []struct {
		file    string
		workers int
		nnodes  string
	}{
		{"pytorchjob_elastic_echo.yaml", 2, "1:2"},
		{"pytorchjob_elastic_imagenet.yaml", 3, "1:3"},
	} {
		t.Run(tc.file, func(t *testing.T) {
			manifest, err := os.ReadFile(filepath.Join("..", "..", "pkg", "frameworks", "testdata", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			if got := runCLI(t, string(manifest), nil, "validate", "-f", "-"); got.code != 0 {
				t.Fatalf("validate: exit %d, stderr %q", got.code, got.stderr)
			}
			got := runCLI(t, string(manifest), nil, "render", "-f", "-", "-o", "json")
			if got.code != 0 {
				t.Fatalf("render: exit %d, stderr %q", got.code, got.stderr)
			}
			if strings.Contains(got.stderr, "metrics") {
				t.Errorf("render warned about metrics: %s", got.stderr)
			}
			var list struct {
				Items []struct {
					Kind string `json:"kind"`
					Spec struct {
						Containers []struct {
							Env []struct{ Name, Value string } `json:"env"`
						} `json:"containers"`
					} `json:"spec"`
				} `json:"items"`
			}
			if err := json.Unmarshal([]byte(got.stdout), &list); err != nil {
				t.Fatal(err)
			}
			pods := 0
			for _, item := range list.Items {
				if item.Kind != "Pod" {
					continue
				}
				pods++
				nnodes := ""
				for _, e := range item.Spec.Containers[0].Env {
					if e.Name == "PET_NNODES" {
						nnodes = e.Value
					}
				}
				if nnodes != tc.nnodes {
					t.Errorf("PET_NNODES = %q, want %q", nnodes, tc.nnodes)
				}
			}
			if pods != tc.workers {
				t.Errorf("%d pods, want a worker for each of the %d slots", pods, tc.workers)
			}
		})
	}
}

// mpiJobV1 is a Training Operator MPIJob whose ranks run in the container
// mainContainer names, the second, with Intel MPI.
const mpiJobV1 = `apiVersion: kubeflow.org/v1
kind: MPIJob
metadata: {name: pi}
spec:
  slotsPerWorker: 2
  cleanPodPolicy: All
  mainContainer: ranks
  mpiReplicaSpecs:
    Launcher:
      template:
        spec:
          containers:
          - {name: sidecar, image: example.com/log-shipper:1}
          - name: ranks
            image: example.com/pi:intel
            command: [mpirun, -n, "4", /pi]
            env: [{name: I_MPI_HYDRA_BOOTSTRAP, value: rsh}]
    Worker:
      replicas: 2
      template:
        spec:
          securityContext: {runAsUser: 1000}
          containers:
          - {name: sidecar, image: example.com/log-shipper:1}
          - {name: ranks, image: example.com/pi:intel}
`

// Training Operator's MPIJob v1 runs nowhere as it is: validate says how
// to convert it, and convert writes the MPIJob v2beta1 that runs the same
// job, saying on stderr what changes; that manifest renders.
func TestConvertWritesAnMPIJobV1AsV2beta1(t *testing.T) {
	refused := runCLI(t, mpiJobV1, nil, "validate", "-f", "-")
	if refused.code != 11 || !strings.Contains(refused.stderr, "`trainstep convert -f FILE` writes this job as an MPIJob kubeflow.org/v2beta1") {
		t.Fatalf("validate: exit %d, stderr %q; want 11 saying how to convert", refused.code, refused.stderr)
	}
	converted := runCLI(t, mpiJobV1, nil, "convert", "-f", "-")
	if converted.code != 0 || !strings.HasPrefix(converted.stdout, "apiVersion: kubeflow.org/v2beta1\nkind: MPIJob\n") {
		t.Fatalf("convert: exit %d, stdout %q, stderr %q", converted.code, converted.stdout, converted.stderr)
	}
	for _, want := range []string{
		"Warning: written as kubeflow.org/v2beta1 MPIJob; what changes:",
		"spec.cleanPodPolicy is spec.runPolicy.cleanPodPolicy",
		`spec.mpiReplicaSpecs.Worker.template.spec.containers: "ranks", spec.mainContainer, comes first`,
		"spec.mpiImplementation is Intel",
		"the workers run sshd (/usr/sbin/sshd -De, MPI Operator v2's default) where v1 ran sleep 365d",
		"the workers run as user 1000: set spec.sshAuthMountPath",
		"the launcher logs in to the workers over SSH",
	} {
		if !strings.Contains(converted.stderr, want) {
			t.Errorf("convert's stderr does not say %q:\n%s", want, converted.stderr)
		}
	}
	for _, want := range []string{"mpiImplementation: Intel", "cleanPodPolicy: All", "slotsPerWorker: 2", "restartPolicy: Never"} {
		if !strings.Contains(converted.stdout, want) {
			t.Errorf("the MPIJob v2beta1 lacks %q:\n%s", want, converted.stdout)
		}
	}
	rendered := runCLI(t, converted.stdout, nil, "render", "-f", "-", "-o", "json")
	if rendered.code != 0 {
		t.Fatalf("render of the v2beta1 manifest: exit %d, %s", rendered.code, rendered.stderr)
	}
	var objs struct {
		Items []struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
			Spec struct {
				Containers []struct {
					Name    string   `json:"name"`
					Command []string `json:"command"`
				} `json:"containers"`
			} `json:"spec"`
		} `json:"items"`
	}
	if err := json.Unmarshal([]byte(rendered.stdout), &objs); err != nil {
		t.Fatal(err)
	}
	for _, o := range objs.Items {
		if o.Kind == "Pod" && o.Metadata.Name == "pi-worker-0" {
			if c := o.Spec.Containers[0]; c.Name != "ranks" || strings.Join(c.Command, " ") != "/usr/sbin/sshd -De" {
				t.Errorf("worker 0's first container %s runs %v, want ranks running sshd", c.Name, c.Command)
			}
		}
	}
}
