package v1alpha1

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// podWith is a pod template with the given containers (name, image).
func podWith(containers ...corev1.Container) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: containers}}
}

func container(name string) corev1.Container {
	return corev1.Container{Name: name, Image: "example.com/train:1"}
}

func ptrTo[T any](v T) *T { return &v }

func newJob(f Framework, specs map[ReplicaType]*ReplicaSpec) *TrainJob {
	return &TrainJob{
		ObjectMeta: metav1.ObjectMeta{Name: "mnist"},
		Spec:       TrainJobSpec{Framework: f, ReplicaSpecs: specs},
	}
}

// The expected ports, container names and restart policies below are
// transcribed from the Kubeflow Training Operator v1.9
// (pkg/apis/kubeflow.org/v1/{tensorflow,pytorch,jax,xgboost}_types.go and
// *_defaults_test.go) and the MPI Operator v2
// (pkg/apis/kubeflow/v2beta1/constants.go, default_test.go).
func TestSetDefaultsPerFramework(t *testing.T) {
	cases := []struct {
		name          string
		framework     Framework
		types         []ReplicaType
		containerName string // name given in the template
		wantContainer string
		wantPorts     []corev1.ContainerPort
		wantRestart   map[ReplicaType]RestartPolicy
	}{
		{
			name: "tensorflow", framework: FrameworkTensorFlow, types: []ReplicaType{ReplicaTypePS, ReplicaTypeWorker},
			containerName: "tensorflow", wantContainer: "tensorflow",
			wantPorts:   []corev1.ContainerPort{{Name: "tfjob-port", ContainerPort: 2222}},
			wantRestart: map[ReplicaType]RestartPolicy{ReplicaTypePS: "Never", ReplicaTypeWorker: "Never"},
		},
		{
			name: "pytorch", framework: FrameworkPyTorch, types: []ReplicaType{ReplicaTypeMaster, ReplicaTypeWorker},
			containerName: "pytorch", wantContainer: "pytorch",
			wantPorts:   []corev1.ContainerPort{{Name: "pytorchjob-port", ContainerPort: 23456}},
			wantRestart: map[ReplicaType]RestartPolicy{ReplicaTypeMaster: "OnFailure", ReplicaTypeWorker: "OnFailure"},
		},
		{
			name: "jax", framework: FrameworkJAX, types: []ReplicaType{ReplicaTypeWorker},
			containerName: "jax", wantContainer: "jax",
			wantPorts:   []corev1.ContainerPort{{Name: "jaxjob-port", ContainerPort: 6666}},
			wantRestart: map[ReplicaType]RestartPolicy{ReplicaTypeWorker: "Never"},
		},
		{
			name: "xgboost", framework: FrameworkXGBoost, types: []ReplicaType{ReplicaTypeMaster, ReplicaTypeWorker},
			containerName: "xgboost", wantContainer: "xgboost",
			wantPorts:   []corev1.ContainerPort{{Name: "xgboostjob-port", ContainerPort: 9999}},
			wantRestart: map[ReplicaType]RestartPolicy{ReplicaTypeMaster: "Never", ReplicaTypeWorker: "Never"},
		},
		{
			name: "mpi has no port and keeps its container name", framework: FrameworkMPI,
			types:         []ReplicaType{ReplicaTypeLauncher, ReplicaTypeWorker},
			containerName: "mpi-launcher", wantContainer: "mpi-launcher",
			wantRestart: map[ReplicaType]RestartPolicy{ReplicaTypeLauncher: "OnFailure", ReplicaTypeWorker: "Never"},
		},
		{
			name: "unnamed main container takes the framework name", framework: FrameworkTensorFlow,
			types:         []ReplicaType{ReplicaTypeWorker},
			containerName: "", wantContainer: "tensorflow",
			wantPorts:   []corev1.ContainerPort{{Name: "tfjob-port", ContainerPort: 2222}},
			wantRestart: map[ReplicaType]RestartPolicy{ReplicaTypeWorker: "Never"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			specs := map[ReplicaType]*ReplicaSpec{}
			for _, rt := range tc.types {
				specs[rt] = &ReplicaSpec{Template: podWith(container(tc.containerName))}
			}
			job := newJob(tc.framework, specs)
			SetDefaults(job)
			for _, rt := range tc.types {
				spec := job.Spec.ReplicaSpecs[rt]
				if got := spec.ReplicaCount(); got != 1 {
					t.Errorf("%s replicas = %d, want 1", rt, got)
				}
				if spec.RestartPolicy != tc.wantRestart[rt] {
					t.Errorf("%s restartPolicy = %q, want %q", rt, spec.RestartPolicy, tc.wantRestart[rt])
				}
				c := spec.Template.Spec.Containers[0]
				if c.Name != tc.wantContainer {
					t.Errorf("%s container name = %q, want %q", rt, c.Name, tc.wantContainer)
				}
				if diff := cmp.Diff(tc.wantPorts, c.Ports); diff != "" {
					t.Errorf("%s ports (-want +got):\n%s", rt, diff)
				}
			}
		})
	}
}

// Kubeflow's "set replicas adding default port" case
// (training-operator v1.9 tensorflow_defaults_test.go): a custom port stays
// first and the default port is appended; an existing default port is kept.
func TestSetDefaultsPorts(t *testing.T) {
	cases := []struct {
		name       string
		containers []corev1.Container
		wantIndex  int
		want       []corev1.ContainerPort
	}{
		{
			name: "custom port kept, default appended",
			containers: []corev1.Container{{Name: "tensorflow", Image: "i",
				Ports: []corev1.ContainerPort{{Name: "customPort", ContainerPort: 1234}}}},
			want: []corev1.ContainerPort{{Name: "customPort", ContainerPort: 1234}, {Name: "tfjob-port", ContainerPort: 2222}},
		},
		{
			name: "declared default port number kept",
			containers: []corev1.Container{{Name: "tensorflow", Image: "i",
				Ports: []corev1.ContainerPort{{Name: "tfjob-port", ContainerPort: 3333}}}},
			want: []corev1.ContainerPort{{Name: "tfjob-port", ContainerPort: 3333}},
		},
		{
			name:       "port goes on the tensorflow container, not the first",
			containers: []corev1.Container{{Name: "sidecar", Image: "s"}, {Name: "tensorflow", Image: "i"}},
			wantIndex:  1,
			want:       []corev1.ContainerPort{{Name: "tfjob-port", ContainerPort: 2222}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			job := newJob(FrameworkTensorFlow, map[ReplicaType]*ReplicaSpec{
				ReplicaTypeWorker: {Template: podWith(tc.containers...)},
			})
			SetDefaults(job)
			got := job.Spec.ReplicaSpecs[ReplicaTypeWorker].Template.Spec.Containers
			if diff := cmp.Diff(tc.want, got[tc.wantIndex].Ports); diff != "" {
				t.Errorf("ports (-want +got):\n%s", diff)
			}
			for i := range got {
				if i != tc.wantIndex && len(got[i].Ports) != 0 {
					t.Errorf("container %d got ports %v, want none", i, got[i].Ports)
				}
			}
		})
	}
}

func TestSetDefaultsNormalisesReplicaTypes(t *testing.T) {
	cases := []struct {
		name      string
		framework Framework
		keys      []ReplicaType
		want      []ReplicaType
	}{
		{"tf lower case", FrameworkTensorFlow, []ReplicaType{"ps", "worker", "chief", "evaluator"},
			[]ReplicaType{"Chief", "PS", "Worker", "Evaluator"}},
		// Kubeflow's TestSetTypeNames: "WORKER" becomes "Worker".
		{"upper case", FrameworkTensorFlow, []ReplicaType{"WORKER", "master"}, []ReplicaType{"Master", "Worker"}},
		{"mpi", FrameworkMPI, []ReplicaType{"launcher", "worker"}, []ReplicaType{"Launcher", "Worker"}},
		{"both spellings kept for validation to report", FrameworkPyTorch, []ReplicaType{"worker", "Worker", "Master"},
			[]ReplicaType{"Master", "Worker", "worker"}},
		{"unknown kept as written", FrameworkJAX, []ReplicaType{"Worker", "coordinator"}, []ReplicaType{"Worker", "coordinator"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			specs := map[ReplicaType]*ReplicaSpec{}
			for _, k := range tc.keys {
				specs[k] = &ReplicaSpec{Template: podWith(container("c"))}
			}
			job := newJob(tc.framework, specs)
			SetDefaults(job)
			if diff := cmp.Diff(tc.want, SortedReplicaTypes(job)); diff != "" {
				t.Errorf("replica types (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSetDefaultsJobWide(t *testing.T) {
	job := newJob(FrameworkMPI, map[ReplicaType]*ReplicaSpec{
		ReplicaTypeLauncher: {Template: podWith(container("l"))},
		ReplicaTypeWorker:   {Replicas: ptrTo[int32](4), Template: podWith(container("w"))},
	})
	SetDefaults(job)
	want := TrainJobSpec{
		Framework: FrameworkMPI,
		RunPolicy: RunPolicy{
			CleanPodPolicy: ptrTo(CleanPodPolicyRunning),
			// MPI Operator's launcher is a batch Job: 6 restarts by default.
			BackoffLimit: ptrTo[int32](6),
			SchedulingPolicy: &SchedulingPolicy{
				Gang: GangNone, ScheduleTimeoutSeconds: ptrTo[int32](300), MaxScheduleAttempts: ptrTo[int32](3),
			},
			// An all-reduce job restarts as a whole; disruptions cost nothing.
			FailurePolicy: &FailurePolicy{Restart: FailureRestartJob, Rules: []FailurePolicyRule{{
				Action: FailureActionIgnore, OnPodConditions: []PodConditionPattern{{Type: "DisruptionTarget", Status: corev1.ConditionTrue}},
			}}},
		},
		SuccessPolicy: SuccessPolicyDefault,
		// mpi-operator v2beta1 default.go: slotsPerWorker 1, /root/.ssh,
		// OpenMPI, the launcher created at startup.
		SlotsPerWorker:         ptrTo[int32](1),
		MPIImplementation:      MPIImplementationOpenMPI,
		SSHAuthMountPath:       "/root/.ssh",
		LauncherCreationPolicy: LauncherCreationAtStartup,
		// One Service for the job, as the MPI Operator lays MPI jobs out.
		ServiceLayout: ServiceLayoutPerJob,
	}
	got := job.Spec
	got.ReplicaSpecs = nil
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("spec (-want +got):\n%s", diff)
	}
	if n := job.Spec.ReplicaSpecs[ReplicaTypeWorker].ReplicaCount(); n != 4 {
		t.Errorf("declared worker replicas changed to %d", n)
	}
}

func TestSetDefaultsKeepsDeclaredValues(t *testing.T) {
	job := newJob(FrameworkTensorFlow, map[ReplicaType]*ReplicaSpec{
		ReplicaTypeWorker: {Replicas: ptrTo[int32](0), RestartPolicy: RestartPolicyExitCode, Template: podWith(container("tensorflow"))},
	})
	job.Spec.RunPolicy.CleanPodPolicy = ptrTo(CleanPodPolicyNone)
	job.Spec.RunPolicy.SchedulingPolicy = &SchedulingPolicy{Gang: GangVolcano, ScheduleTimeoutSeconds: ptrTo[int32](10)}
	job.Spec.SuccessPolicy = SuccessPolicyAllWorkers
	SetDefaults(job)
	worker := job.Spec.ReplicaSpecs[ReplicaTypeWorker]
	if worker.ReplicaCount() != 0 || worker.RestartPolicy != RestartPolicyExitCode {
		t.Errorf("worker = %d replicas %s, want 0 ExitCode", worker.ReplicaCount(), worker.RestartPolicy)
	}
	if got := *job.Spec.RunPolicy.CleanPodPolicy; got != CleanPodPolicyNone {
		t.Errorf("cleanPodPolicy = %s, want None", got)
	}
	sp := job.Spec.RunPolicy.SchedulingPolicy
	if sp.Gang != GangVolcano || *sp.ScheduleTimeoutSeconds != 10 || *sp.MaxScheduleAttempts != 3 {
		t.Errorf("schedulingPolicy = %s/%d/%d, want volcano/10/3", sp.Gang, *sp.ScheduleTimeoutSeconds, *sp.MaxScheduleAttempts)
	}
	if job.Spec.SuccessPolicy != SuccessPolicyAllWorkers {
		t.Errorf("successPolicy = %s", job.Spec.SuccessPolicy)
	}
	if job.Spec.SlotsPerWorker != nil || job.Spec.MPIImplementation != "" || job.Spec.NprocPerNode != nil {
		t.Errorf("framework fields of other frameworks were defaulted: %+v", job.Spec)
	}
}

// Expectations from training-operator v1.9 pytorch_defaults.go /
// pytorch_defaults_test.go: one elastic bound copies the other, none copies
// the worker count; nprocPerNode defaults to "auto" unless the deprecated
// elasticPolicy.nProcPerNode is set.
func TestSetDefaultsPyTorch(t *testing.T) {
	cases := []struct {
		name         string
		elastic      *ElasticPolicy
		nproc        *string
		wantMin      *int32
		wantMax      *int32
		wantNproc    *string
		wantElasticP *int32
	}{
		{name: "no elastic", wantNproc: ptrTo("auto")},
		{name: "declared nproc kept", nproc: ptrTo("4"), wantNproc: ptrTo("4")},
		{name: "elastic without bounds", elastic: &ElasticPolicy{}, wantMin: ptrTo[int32](3), wantMax: ptrTo[int32](3), wantNproc: ptrTo("auto")},
		{name: "only max", elastic: &ElasticPolicy{MaxReplicas: ptrTo[int32](5)}, wantMin: ptrTo[int32](5), wantMax: ptrTo[int32](5), wantNproc: ptrTo("auto")},
		{name: "only min", elastic: &ElasticPolicy{MinReplicas: ptrTo[int32](2)}, wantMin: ptrTo[int32](2), wantMax: ptrTo[int32](2), wantNproc: ptrTo("auto")},
		{name: "deprecated nProcPerNode suppresses auto",
			elastic: &ElasticPolicy{MinReplicas: ptrTo[int32](1), MaxReplicas: ptrTo[int32](4), NProcPerNode: ptrTo[int32](2)},
			wantMin: ptrTo[int32](1), wantMax: ptrTo[int32](4), wantElasticP: ptrTo[int32](2)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			job := newJob(FrameworkPyTorch, map[ReplicaType]*ReplicaSpec{
				ReplicaTypeWorker: {Replicas: ptrTo[int32](3), Template: podWith(container("pytorch"))},
			})
			job.Spec.ElasticPolicy = tc.elastic
			job.Spec.NprocPerNode = tc.nproc
			SetDefaults(job)
			if diff := cmp.Diff(tc.wantNproc, job.Spec.NprocPerNode); diff != "" {
				t.Errorf("nprocPerNode (-want +got):\n%s", diff)
			}
			if tc.elastic == nil {
				return
			}
			ep := job.Spec.ElasticPolicy
			if diff := cmp.Diff([]*int32{tc.wantMin, tc.wantMax, tc.wantElasticP}, []*int32{ep.MinReplicas, ep.MaxReplicas, ep.NProcPerNode}); diff != "" {
				t.Errorf("elastic min, max, nProcPerNode (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSetDefaultsIsIdempotent(t *testing.T) {
	job := newJob(FrameworkTensorFlow, map[ReplicaType]*ReplicaSpec{
		"worker": {Template: podWith(container(""))},
	})
	SetDefaults(job)
	once := job.DeepCopy()
	SetDefaults(job)
	if diff := cmp.Diff(once, job); diff != "" {
		t.Errorf("second SetDefaults changed the job (-first +second):\n%s", diff)
	}
}

func TestMainContainer(t *testing.T) {
	cases := []struct {
		name       string
		framework  Framework
		containers []corev1.Container
		want       string
	}{
		{"named default wins", FrameworkPyTorch, []corev1.Container{container("init-data"), container("pytorch")}, "pytorch"},
		{"first when none is named", FrameworkPyTorch, []corev1.Container{container("trainer"), container("sidecar")}, "trainer"},
		{"mpi uses the first", FrameworkMPI, []corev1.Container{container("mpi-worker"), container("mpi")}, "mpi-worker"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			job := newJob(tc.framework, map[ReplicaType]*ReplicaSpec{ReplicaTypeWorker: {Template: podWith(tc.containers...)}})
			if got := MainContainer(job, ReplicaTypeWorker); got == nil || got.Name != tc.want {
				t.Fatalf("MainContainer = %v, want %q", got, tc.want)
			}
		})
	}
	job := newJob(FrameworkJAX, map[ReplicaType]*ReplicaSpec{ReplicaTypeWorker: {}})
	if got := MainContainer(job, ReplicaTypeWorker); got != nil {
		t.Errorf("MainContainer of a pod without containers = %v, want nil", got)
	}
	if got := MainContainer(job, ReplicaTypeMaster); got != nil {
		t.Errorf("MainContainer of a missing type = %v, want nil", got)
	}
}

func TestFailurePolicyDefaultsByFramework(t *testing.T) {
	worker := func() *ReplicaSpec { return &ReplicaSpec{Template: podWith(container("w"))} }
	cases := []struct {
		name    string
		job     *TrainJob
		restart FailureRestart
	}{
		{"pytorch DDP", newJob(FrameworkPyTorch, map[ReplicaType]*ReplicaSpec{ReplicaTypeMaster: worker(), ReplicaTypeWorker: worker()}), FailureRestartJob},
		{"elastic pytorch", func() *TrainJob {
			j := newJob(FrameworkPyTorch, map[ReplicaType]*ReplicaSpec{ReplicaTypeWorker: worker()})
			j.Spec.ElasticPolicy = &ElasticPolicy{MinReplicas: ptrTo[int32](1)}
			return j
		}(), FailureRestartReplica},
		{"mpi", newJob(FrameworkMPI, map[ReplicaType]*ReplicaSpec{ReplicaTypeLauncher: worker(), ReplicaTypeWorker: worker()}), FailureRestartJob},
		{"jax", newJob(FrameworkJAX, map[ReplicaType]*ReplicaSpec{ReplicaTypeWorker: worker()}), FailureRestartJob},
		{"tensorflow MultiWorkerMirrored", newJob(FrameworkTensorFlow, map[ReplicaType]*ReplicaSpec{ReplicaTypeWorker: worker()}), FailureRestartJob},
		{"tensorflow with PS", newJob(FrameworkTensorFlow, map[ReplicaType]*ReplicaSpec{ReplicaTypePS: worker(), ReplicaTypeWorker: worker()}), FailureRestartReplica},
		{"xgboost", newJob(FrameworkXGBoost, map[ReplicaType]*ReplicaSpec{ReplicaTypeMaster: worker(), ReplicaTypeWorker: worker()}), FailureRestartReplica},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			SetDefaults(tc.job)
			fp := tc.job.Spec.RunPolicy.FailurePolicy
			if fp.Restart != tc.restart {
				t.Errorf("restart %s, want %s", fp.Restart, tc.restart)
			}
			if len(fp.Rules) != 1 || fp.Rules[0].Action != FailureActionIgnore || fp.Rules[0].OnPodConditions[0].Type != PodConditionDisruptionTarget {
				t.Errorf("rules %+v, want the DisruptionTarget → Ignore rule", fp.Rules)
			}
		})
	}
	t.Run("an empty rule list turns the default rule off", func(t *testing.T) {
		job := newJob(FrameworkJAX, map[ReplicaType]*ReplicaSpec{ReplicaTypeWorker: worker()})
		job.Spec.RunPolicy.FailurePolicy = &FailurePolicy{Rules: []FailurePolicyRule{}}
		SetDefaults(job)
		if n := len(job.Spec.RunPolicy.FailurePolicy.Rules); n != 0 {
			t.Errorf("%d rules, want none", n)
		}
	})
}
