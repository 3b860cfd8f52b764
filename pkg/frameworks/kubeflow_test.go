package frameworks_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/frameworks"
	"github.com/trainstep/trainstep/pkg/frameworks/mpi"
	"github.com/trainstep/trainstep/pkg/frameworks/pytorch"
	"github.com/trainstep/trainstep/pkg/frameworks/tensorflow"
	"github.com/trainstep/trainstep/pkg/kubeflow"
)

// decodeFile reads a testdata manifest strictly into the object its
// apiVersion/kind names.
func decodeFile(t *testing.T, name string) kubeflow.Object {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	data, err := yaml.YAMLToJSON(raw)
	if err != nil {
		t.Fatal(err)
	}
	var header kubeflow.Header
	if err := kjson.UnmarshalCaseSensitivePreserveInts(data, &header); err != nil {
		t.Fatal(err)
	}
	kind, ok := frameworks.KubeflowKind(header.APIVersion, header.Kind)
	if !ok {
		t.Fatalf("%s: %s %s not supported", name, header.APIVersion, header.Kind)
	}
	obj := kind.New()
	strict, err := kjson.UnmarshalStrict(data, obj, kjson.DisallowUnknownFields)
	if err != nil || len(strict) > 0 {
		t.Fatalf("%s: decoding: %v %v", name, err, strict)
	}
	return obj
}

// replicaSummary is what a conversion must carry over for one replica type.
type replicaSummary struct {
	Replicas      *int32
	RestartPolicy v1alpha1.RestartPolicy
	Containers    []string // name=image
}

type jobSummary struct {
	Name, Namespace string
	Framework       v1alpha1.Framework
	Replicas        map[v1alpha1.ReplicaType]replicaSummary
	CleanPodPolicy  v1alpha1.CleanPodPolicy
	TTL             *int32
	SuccessPolicy   v1alpha1.SuccessPolicy
	Elastic         *v1alpha1.ElasticPolicy
	NprocPerNode    *string
	SlotsPerWorker  *int32
	SSHAuthPath     string
	MPIImpl         v1alpha1.MPIImplementation
	LauncherPolicy  v1alpha1.LauncherCreationPolicy
}

func summarise(job *v1alpha1.TrainJob) jobSummary {
	s := jobSummary{
		Name: job.Name, Namespace: job.Namespace, Framework: job.Spec.Framework,
		Replicas:      map[v1alpha1.ReplicaType]replicaSummary{},
		TTL:           job.Spec.RunPolicy.TTLSecondsAfterFinished,
		SuccessPolicy: job.Spec.SuccessPolicy, Elastic: job.Spec.ElasticPolicy, NprocPerNode: job.Spec.NprocPerNode,
		SlotsPerWorker: job.Spec.SlotsPerWorker, SSHAuthPath: job.Spec.SSHAuthMountPath, MPIImpl: job.Spec.MPIImplementation,
		LauncherPolicy: job.Spec.LauncherCreationPolicy,
	}
	if p := job.Spec.RunPolicy.CleanPodPolicy; p != nil {
		s.CleanPodPolicy = *p
	}
	for rt, spec := range job.Spec.ReplicaSpecs {
		var containers []string
		for _, c := range spec.Template.Spec.Containers {
			containers = append(containers, c.Name+"="+c.Image)
		}
		s.Replicas[rt] = replicaSummary{Replicas: spec.Replicas, RestartPolicy: spec.RestartPolicy, Containers: containers}
	}
	return s
}

func i32(v int32) *int32 { return &v }

// Expected values are read off the manifests in testdata (each cites its
// source) plus the step's cleanPodPolicy default Running (Kubeflow's None keeps
// pods until the job object is deleted, which no step does) and the MPI
// Operator's Worker replicas default 0.
func TestToTrainJob(t *testing.T) {
	tfImage := "tensorflow=kubeflow/tf-dist-mnist-test:latest"
	ptImage := "pytorch=docker.io/kubeflowkatib/pytorch-mnist:v1beta1-45c5727"
	xgbImage := "xgboost=docker.io/kubeflow/xgboost-dist-iris:latest"
	cases := []struct {
		file         string
		want         jobSummary
		wantWarnings []string
	}{
		{file: "tfjob_dist_mnist.yaml", want: jobSummary{
			Name: "dist-mnist-for-e2e-test", Framework: v1alpha1.FrameworkTensorFlow,
			Replicas: map[v1alpha1.ReplicaType]replicaSummary{
				"Chief":  {i32(1), "Never", []string{tfImage}},
				"PS":     {i32(1), "Never", []string{tfImage}},
				"Worker": {i32(2), "Never", []string{tfImage}},
			},
			CleanPodPolicy: "Running", SuccessPolicy: "Default",
		}},
		{file: "tfjob_multi_worker.yaml", want: jobSummary{
			Name: "multi-worker", Framework: v1alpha1.FrameworkTensorFlow,
			Replicas: map[v1alpha1.ReplicaType]replicaSummary{
				"Worker": {i32(2), "Never", []string{"tensorflow=kubeflow/tf-multi-worker-strategy:latest"}},
			},
			CleanPodPolicy: "None", SuccessPolicy: "Default",
		}},
		{file: "pytorchjob_simple.yaml", want: jobSummary{
			Name: "pytorch-simple", Namespace: "kubeflow", Framework: v1alpha1.FrameworkPyTorch,
			Replicas: map[v1alpha1.ReplicaType]replicaSummary{
				"Master": {i32(1), "OnFailure", []string{ptImage}},
				"Worker": {i32(1), "OnFailure", []string{ptImage}},
			},
			CleanPodPolicy: "Running",
		}},
		{file: "pytorchjob_elastic_echo.yaml", want: jobSummary{
			Name: "elastic-example-echo", Framework: v1alpha1.FrameworkPyTorch,
			Replicas: map[v1alpha1.ReplicaType]replicaSummary{
				"Worker": {i32(2), "", []string{"pytorch=kubeflow/pytorch-elastic-example-echo:latest"}},
			},
			CleanPodPolicy: "Running",
			Elastic: &v1alpha1.ElasticPolicy{
				RDZVBackend: ptr(v1alpha1.BackendC10D), MinReplicas: i32(1), MaxReplicas: i32(2), MaxRestarts: i32(100),
				GrowIntoCapacity: ptr(false), // the operator keeps the Worker replicas
			},
		}},
		{file: "pytorchjob_elastic_imagenet.yaml", want: jobSummary{
			Name: "elastic-example-imagenet", Framework: v1alpha1.FrameworkPyTorch,
			Replicas: map[v1alpha1.ReplicaType]replicaSummary{
				"Worker": {i32(2), "OnFailure", []string{"pytorch=quay.io/johnugeorge/pytorch-elastic-example-imagenet:0.1"}},
			},
			CleanPodPolicy: "Running",
			Elastic: &v1alpha1.ElasticPolicy{
				RDZVBackend: ptr(v1alpha1.BackendC10D), MinReplicas: i32(1), MaxReplicas: i32(3), MaxRestarts: i32(100),
				Metrics: []autoscalingv2.MetricSpec{{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{
					Name: corev1.ResourceCPU, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: i32(80)}}}},
			},
		}},
		{file: "jaxjob_cpu_demo.yaml", want: jobSummary{
			Name: "jaxjob-simple", Namespace: "kubeflow", Framework: v1alpha1.FrameworkJAX,
			Replicas: map[v1alpha1.ReplicaType]replicaSummary{
				"Worker": {i32(2), "OnFailure", []string{"jax=docker.io/kubeflow/jaxjob-simple:latest"}},
			},
			CleanPodPolicy: "Running",
		}},
		{file: "xgboostjob_iris.yaml", want: jobSummary{
			Name: "xgboost-dist-iris-test-train", Framework: v1alpha1.FrameworkXGBoost,
			Replicas: map[v1alpha1.ReplicaType]replicaSummary{
				"Master": {i32(1), "Never", []string{xgbImage}},
				"Worker": {i32(2), "ExitCode", []string{xgbImage}},
			},
			CleanPodPolicy: "Running",
		}},
		{file: "mpijob_pi.yaml", want: jobSummary{
			Name: "pi", Framework: v1alpha1.FrameworkMPI,
			Replicas: map[v1alpha1.ReplicaType]replicaSummary{
				"Launcher": {i32(1), "", []string{"mpi-launcher=mpioperator/mpi-pi:openmpi"}},
				"Worker":   {i32(2), "", []string{"mpi-worker=mpioperator/mpi-pi:openmpi"}},
			},
			CleanPodPolicy: "Running", TTL: i32(60), SlotsPerWorker: i32(1), SSHAuthPath: "/home/mpiuser/.ssh",
		}, wantWarnings: []string{
			"spec.runPolicy.ttlSecondsAfterFinished is ignored: trainstep cleans up when the step ends, as cleanPodPolicy says",
		}},
		{file: "mpijob_pi_intel.yaml", want: jobSummary{
			Name: "pi", Framework: v1alpha1.FrameworkMPI,
			Replicas: map[v1alpha1.ReplicaType]replicaSummary{
				"Launcher": {i32(1), "", []string{"mpi-launcher=mpioperator/mpi-pi:intel"}},
				"Worker":   {i32(2), "", []string{"mpi-worker=mpioperator/mpi-pi:intel"}},
			},
			CleanPodPolicy: "Running", SlotsPerWorker: i32(1), SSHAuthPath: "/home/mpiuser/.ssh", MPIImpl: "Intel",
		}},
	}
	for _, tc := range cases {
		t.Run(tc.file, func(t *testing.T) {
			job, warnings := convert(t, decodeFile(t, tc.file))
			if job.APIVersion != v1alpha1.APIVersion || job.Kind != v1alpha1.Kind {
				t.Errorf("type = %s %s, want a TrainJob", job.APIVersion, job.Kind)
			}
			if diff := cmp.Diff(tc.want, summarise(job)); diff != "" {
				t.Errorf("converted job (-want +got):\n%s", diff)
			}
			if !manifestSays(t, tc.file, "cleanPodPolicy") {
				tc.wantWarnings = append([]string{unsetCleanPodPolicyWarning}, tc.wantWarnings...)
			}
			if diff := cmp.Diff(tc.wantWarnings, warnings); diff != "" {
				t.Errorf("warnings (-want +got):\n%s", diff)
			}
		})
	}
}

// unsetCleanPodPolicyWarning is what a manifest without cleanPodPolicy is
// told: in a step nothing deletes a job object, so Running is the default.
const unsetCleanPodPolicyWarning = "spec.runPolicy.cleanPodPolicy is unset: replicas still running when the step ends are deleted (Running), " +
	"where the operator's default None would keep them until the job object is deleted; in a workflow nothing deletes one"

// convert converts a manifest that converts without error.
func convert(t *testing.T, obj kubeflow.Object) (*v1alpha1.TrainJob, []string) {
	t.Helper()
	job, warnings, err := obj.ToTrainJob()
	if err != nil {
		t.Fatalf("ToTrainJob: %v", err)
	}
	return job, warnings
}

func manifestSays(t *testing.T, file, field string) bool {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", file))
	if err != nil {
		t.Fatal(err)
	}
	return strings.Contains(string(data), field+":")
}

func TestToTrainJobKubeflowSpecifics(t *testing.T) {
	t.Run("MPI worker replicas default to 0 as the MPI Operator does", func(t *testing.T) {
		job, _ := convert(t, &mpi.MPIJob{Spec: mpi.MPIJobSpec{MPIReplicaSpecs: map[string]*kubeflow.ReplicaSpec{"Launcher": {}, "Worker": {}}}})
		if got := job.Spec.ReplicaSpecs["Worker"].Replicas; got == nil || *got != 0 {
			t.Errorf("worker replicas = %v, want 0", got)
		}
		if got := job.Spec.ReplicaSpecs["Launcher"].Replicas; got != nil {
			t.Errorf("launcher replicas = %v, want unset (defaulted to 1 later)", *got)
		}
	})
	t.Run("declared cleanPodPolicy is kept", func(t *testing.T) {
		all := "All"
		job, _ := convert(t, &pytorch.PyTorchJob{Spec: pytorch.PyTorchJobSpec{RunPolicy: kubeflow.RunPolicy{CleanPodPolicy: &all}}})
		if got := *job.Spec.RunPolicy.CleanPodPolicy; got != v1alpha1.CleanPodPolicyAll {
			t.Errorf("cleanPodPolicy = %s, want All", got)
		}
	})
	t.Run("TF AllWorkers success policy", func(t *testing.T) {
		all := "AllWorkers"
		job, _ := convert(t, &tensorflow.TFJob{Spec: tensorflow.TFJobSpec{SuccessPolicy: &all}})
		if job.Spec.SuccessPolicy != v1alpha1.SuccessPolicyAllWorkers {
			t.Errorf("successPolicy = %s", job.Spec.SuccessPolicy)
		}
	})
	t.Run("MPIJob launcherCreationPolicy carries over", func(t *testing.T) {
		for _, policy := range []string{"", "AtStartup", "WaitForWorkersReady"} {
			mpi := decodeFile(t, "mpijob_pi.yaml").(*mpi.MPIJob)
			mpi.Spec.LauncherCreationPolicy = policy
			job, warnings := convert(t, mpi)
			if string(job.Spec.LauncherCreationPolicy) != policy {
				t.Errorf("launcherCreationPolicy %q became %q", policy, job.Spec.LauncherCreationPolicy)
			}
			if len(warnings) != 1 { // only ttlSecondsAfterFinished, as in TestToTrainJob
				t.Errorf("launcherCreationPolicy %q: warnings %q", policy, warnings)
			}
			frameworks.SetDefaults(job)
			if errs := frameworks.Validate(job); len(errs) != 0 {
				t.Errorf("launcherCreationPolicy %q: %v", policy, errs.ToAggregate())
			}
		}
		mpi := decodeFile(t, "mpijob_pi.yaml").(*mpi.MPIJob)
		mpi.Spec.LauncherCreationPolicy = "Later"
		job, _ := convert(t, mpi)
		frameworks.SetDefaults(job)
		want := `spec.launcherCreationPolicy: Unsupported value: "Later": supported values: "AtStartup", "WaitForWorkersReady"`
		if errs := frameworks.Validate(job); len(errs) != 1 || errs[0].Error() != want {
			t.Errorf("errors = %v, want %s", errs, want)
		}
	})
	t.Run("warnings for accepted but ignored fields", func(t *testing.T) {
		_, tfWarnings := convert(t, &tensorflow.TFJob{Spec: tensorflow.TFJobSpec{EnableDynamicWorker: true,
			RunPolicy: kubeflow.RunPolicy{ManagedBy: ptr("kubeflow.org/training-operator"), SchedulingPolicy: &kubeflow.SchedulingPolicy{Queue: "q"}}}})
		_, ptWarnings := convert(t, &pytorch.PyTorchJob{Spec: pytorch.PyTorchJobSpec{ElasticPolicy: &v1alpha1.ElasticPolicy{NProcPerNode: i32(2)}}})
		got := append(tfWarnings, ptWarnings...)
		want := []string{
			unsetCleanPodPolicyWarning,
			"spec.runPolicy.managedBy is ignored: trainstep runs the job itself",
			"spec.enableDynamicWorker is ignored: trainstep runs a fixed set of TensorFlow workers",
			unsetCleanPodPolicyWarning,
			// training-operator v1.9 pytorchjob_webhook.go's deprecation warning.
			"spec.elasticPolicy.nProcPerNode is deprecated, use spec.nprocPerNode instead",
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("warnings (-want +got):\n%s", diff)
		}
	})
	t.Run("missing default container name is a warning", func(t *testing.T) {
		obj := decodeFile(t, "pytorchjob_simple.yaml").(*pytorch.PyTorchJob)
		obj.Spec.PyTorchReplicaSpecs["Worker"].Template.Spec.Containers[0].Name = "trainer"
		_, warnings := convert(t, obj)
		want := []string{`spec.pytorchReplicaSpecs.Worker.template.spec.containers: no container named "pytorch" (the Training Operator requires one); trainstep uses the first container, "trainer"`, unsetCleanPodPolicyWarning}
		if diff := cmp.Diff(want, warnings); diff != "" {
			t.Errorf("warnings (-want +got):\n%s", diff)
		}
	})
}

func TestUnsupported(t *testing.T) {
	cases := []struct {
		apiVersion, kind string
		want             string // substring; "" means not a known look-alike
	}{
		{"trainer.kubeflow.org/v1alpha1", "TrainJob", "Kubeflow Trainer v2"},
		{"kubeflow.org/v1alpha2", "MPIJob", "older MPIJob version; trainstep reads MPIJob kubeflow.org/v2beta1"},
		{"kubeflow.org/v1", "MXJob", "no MXNet framework"},
		{"kubeflow.org/v1beta2", "TFJob", "older version; trainstep reads kubeflow.org/v1 TFJob"},
		{"batch/v1", "Job", ""},
	}
	for _, tc := range cases {
		t.Run(tc.apiVersion+" "+tc.kind, func(t *testing.T) {
			got := frameworks.KubeflowUnsupported(tc.apiVersion, tc.kind)
			if tc.want == "" && got != "" || !strings.Contains(got, tc.want) {
				t.Errorf("Unsupported = %q, want it to contain %q", got, tc.want)
			}
			if _, ok := frameworks.KubeflowKind(tc.apiVersion, tc.kind); ok {
				t.Errorf("New accepted an unsupported kind")
			}
		})
	}
}

// trainstep's failurePolicy rides on a Kubeflow manifest (or --set) and
// is carried over; an empty rule list stays empty.
func TestFailurePolicyIsCarriedOver(t *testing.T) {
	in := &v1alpha1.FailurePolicy{Restart: v1alpha1.FailureRestartReplica, Rules: []v1alpha1.FailurePolicyRule{}}
	job, _ := convert(t, &pytorch.PyTorchJob{Spec: pytorch.PyTorchJobSpec{RunPolicy: kubeflow.RunPolicy{FailurePolicy: in}}})
	fp := job.Spec.RunPolicy.FailurePolicy
	if fp == nil || fp == in || fp.Restart != v1alpha1.FailureRestartReplica || fp.Rules == nil || len(fp.Rules) != 0 {
		t.Fatalf("failure policy %+v, want a copy: restart Replica with no rules", fp)
	}
}
