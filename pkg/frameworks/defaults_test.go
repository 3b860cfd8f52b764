package frameworks

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
)

// podWith is a pod template with the given containers (name, image).
func podWith(containers ...corev1.Container) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: containers}}
}

func container(name string) corev1.Container {
	return corev1.Container{Name: name, Image: "example.com/train:1"}
}

func ptrTo[T any](v T) *T { return &v }

func newJob(f v1alpha1.Framework, specs map[v1alpha1.ReplicaType]*v1alpha1.ReplicaSpec) *v1alpha1.TrainJob {
	return &v1alpha1.TrainJob{
		ObjectMeta: metav1.ObjectMeta{Name: "mnist"},
		Spec:       v1alpha1.TrainJobSpec{Framework: f, ReplicaSpecs: specs},
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
		framework     v1alpha1.Framework
		types         []v1alpha1.ReplicaType
		containerName string // name given in the template
		wantContainer string
		wantPorts     []corev1.ContainerPort
		wantRestart   map[v1alpha1.ReplicaType]v1alpha1.RestartPolicy
	}{
		{
			name: "tensorflow", framework: v1alpha1.FrameworkTensorFlow, types: []v1alpha1.ReplicaType{v1alpha1.ReplicaTypePS, v1alpha1.ReplicaTypeWorker},
			containerName: "tensorflow", wantContainer: "tensorflow",
			wantPorts:   []corev1.ContainerPort{{Name: "tfjob-port", ContainerPort: 2222}},
			wantRestart: map[v1alpha1.ReplicaType]v1alpha1.RestartPolicy{v1alpha1.ReplicaTypePS: "Never", v1alpha1.ReplicaTypeWorker: "Never"},
		},
		{
			name: "pytorch", framework: v1alpha1.FrameworkPyTorch, types: []v1alpha1.ReplicaType{v1alpha1.ReplicaTypeMaster, v1alpha1.ReplicaTypeWorker},
			containerName: "pytorch", wantContainer: "pytorch",
			wantPorts:   []corev1.ContainerPort{{Name: "pytorchjob-port", ContainerPort: 23456}},
			wantRestart: map[v1alpha1.ReplicaType]v1alpha1.RestartPolicy{v1alpha1.ReplicaTypeMaster: "OnFailure", v1alpha1.ReplicaTypeWorker: "OnFailure"},
		},
		{
			name: "jax", framework: v1alpha1.FrameworkJAX, types: []v1alpha1.ReplicaType{v1alpha1.ReplicaTypeWorker},
			containerName: "jax", wantContainer: "jax",
			wantPorts:   []corev1.ContainerPort{{Name: "jaxjob-port", ContainerPort: 6666}},
			wantRestart: map[v1alpha1.ReplicaType]v1alpha1.RestartPolicy{v1alpha1.ReplicaTypeWorker: "Never"},
		},
		{
			name: "xgboost", framework: v1alpha1.FrameworkXGBoost, types: []v1alpha1.ReplicaType{v1alpha1.ReplicaTypeMaster, v1alpha1.ReplicaTypeWorker},
			containerName: "xgboost", wantContainer: "xgboost",
			wantPorts:   []corev1.ContainerPort{{Name: "xgboostjob-port", ContainerPort: 9999}},
			wantRestart: map[v1alpha1.ReplicaType]v1alpha1.RestartPolicy{v1alpha1.ReplicaTypeMaster: "Never", v1alpha1.ReplicaTypeWorker: "Never"},
		},
		{
			name: "mpi has no port and keeps its container name", framework: v1alpha1.FrameworkMPI,
			types:         []v1alpha1.ReplicaType{v1alpha1.ReplicaTypeLauncher, v1alpha1.ReplicaTypeWorker},
			containerName: "mpi-launcher", wantContainer: "mpi-launcher",
			wantRestart: map[v1alpha1.ReplicaType]v1alpha1.RestartPolicy{v1alpha1.ReplicaTypeLauncher: "OnFailure", v1alpha1.ReplicaTypeWorker: "Never"},
		},
		{
			name: "unnamed main container takes the framework name", framework: v1alpha1.FrameworkTensorFlow,
			types:         []v1alpha1.ReplicaType{v1alpha1.ReplicaTypeWorker},
			containerName: "", wantContainer: "tensorflow",
			wantPorts:   []corev1.ContainerPort{{Name: "tfjob-port", ContainerPort: 2222}},
			wantRestart: map[v1alpha1.ReplicaType]v1alpha1.RestartPolicy{v1alpha1.ReplicaTypeWorker: "Never"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			specs := map[v1alpha1.ReplicaType]*v1alpha1.ReplicaSpec{}
			for _, rt := range tc.types {
				specs[rt] = &v1alpha1.ReplicaSpec{Template: podWith(container(tc.containerName))}
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
			job := newJob(v1alpha1.FrameworkTensorFlow, map[v1alpha1.ReplicaType]*v1alpha1.ReplicaSpec{
				v1alpha1.ReplicaTypeWorker: {Template: podWith(tc.containers...)},
			})
			SetDefaults(job)
			got := job.Spec.ReplicaSpecs[v1alpha1.ReplicaTypeWorker].Template.Spec.Containers
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
		framework v1alpha1.Framework
		keys      []v1alpha1.ReplicaType
		want      []v1alpha1.ReplicaType
	}{
		{"tf lower case", v1alpha1.FrameworkTensorFlow, []v1alpha1.ReplicaType{"ps", "worker", "chief", "evaluator"},
			[]v1alpha1.ReplicaType{"Chief", "PS", "Worker", "Evaluator"}},
		// Kubeflow's TestSetTypeNames: "WORKER" becomes "Worker".
		{"upper case", v1alpha1.FrameworkTensorFlow, []v1alpha1.ReplicaType{"WORKER", "master"}, []v1alpha1.ReplicaType{"Master", "Worker"}},
		{"mpi", v1alpha1.FrameworkMPI, []v1alpha1.ReplicaType{"launcher", "worker"}, []v1alpha1.ReplicaType{"Launcher", "Worker"}},
		{"both spellings kept for validation to report", v1alpha1.FrameworkPyTorch, []v1alpha1.ReplicaType{"worker", "Worker", "Master"},
			[]v1alpha1.ReplicaType{"Master", "Worker", "worker"}},
		{"unknown kept as written", v1alpha1.FrameworkJAX, []v1alpha1.ReplicaType{"Worker", "coordinator"}, []v1alpha1.ReplicaType{"Worker", "coordinator"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			specs := map[v1alpha1.ReplicaType]*v1alpha1.ReplicaSpec{}
			for _, k := range tc.keys {
				specs[k] = &v1alpha1.ReplicaSpec{Template: podWith(container("c"))}
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
	job := newJob(v1alpha1.FrameworkMPI, map[v1alpha1.ReplicaType]*v1alpha1.ReplicaSpec{
		v1alpha1.ReplicaTypeLauncher: {Template: podWith(container("l"))},
		v1alpha1.ReplicaTypeWorker:   {Replicas: ptrTo[int32](4), Template: podWith(container("w"))},
	})
	SetDefaults(job)
	want := v1alpha1.TrainJobSpec{
		Framework: v1alpha1.FrameworkMPI,
		RunPolicy: v1alpha1.RunPolicy{
			CleanPodPolicy: ptrTo(v1alpha1.CleanPodPolicyRunning),
			// MPI Operator's launcher is a batch Job: 6 restarts by default.
			BackoffLimit: ptrTo[int32](6),
			SchedulingPolicy: &v1alpha1.SchedulingPolicy{
				Gang: v1alpha1.GangNone, ScheduleTimeoutSeconds: ptrTo[int32](300), MaxScheduleAttempts: ptrTo[int32](3),
			},
			// An all-reduce job restarts as a whole; disruptions cost nothing.
			FailurePolicy: &v1alpha1.FailurePolicy{Restart: v1alpha1.FailureRestartJob, Rules: []v1alpha1.FailurePolicyRule{{
				Action: v1alpha1.FailureActionIgnore, OnPodConditions: []v1alpha1.PodConditionPattern{{Type: "DisruptionTarget", Status: corev1.ConditionTrue}},
			}}},
		},
		SuccessPolicy: v1alpha1.SuccessPolicyDefault,
		// mpi-operator v2beta1 default.go: slotsPerWorker 1, /root/.ssh,
		// OpenMPI, the launcher created at startup.
		SlotsPerWorker:         ptrTo[int32](1),
		MPIImplementation:      v1alpha1.MPIImplementationOpenMPI,
		SSHAuthMountPath:       "/root/.ssh",
		LauncherCreationPolicy: v1alpha1.LauncherCreationAtStartup,
		// One Service for the job, as the MPI Operator lays MPI jobs out.
		ServiceLayout: v1alpha1.ServiceLayoutPerJob,
	}
	got := job.Spec
	got.ReplicaSpecs = nil
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("spec (-want +got):\n%s", diff)
	}
	if n := job.Spec.ReplicaSpecs[v1alpha1.ReplicaTypeWorker].ReplicaCount(); n != 4 {
		t.Errorf("declared worker replicas changed to %d", n)
	}
}

func TestSetDefaultsKeepsDeclaredValues(t *testing.T) {
	job := newJob(v1alpha1.FrameworkTensorFlow, map[v1alpha1.ReplicaType]*v1alpha1.ReplicaSpec{
		v1alpha1.ReplicaTypeWorker: {Replicas: ptrTo[int32](0), RestartPolicy: v1alpha1.RestartPolicyExitCode, Template: podWith(container("tensorflow"))},
	})
	job.Spec.RunPolicy.CleanPodPolicy = ptrTo(v1alpha1.CleanPodPolicyNone)
	job.Spec.RunPolicy.SchedulingPolicy = &v1alpha1.SchedulingPolicy{Gang: v1alpha1.GangVolcano, ScheduleTimeoutSeconds: ptrTo[int32](10)}
	job.Spec.SuccessPolicy = v1alpha1.SuccessPolicyAllWorkers
	SetDefaults(job)
	worker := job.Spec.ReplicaSpecs[v1alpha1.ReplicaTypeWorker]
	if worker.ReplicaCount() != 0 || worker.RestartPolicy != v1alpha1.RestartPolicyExitCode {
		t.Errorf("worker = %d replicas %s, want 0 ExitCode", worker.ReplicaCount(), worker.RestartPolicy)
	}
	if got := *job.Spec.RunPolicy.CleanPodPolicy; got != v1alpha1.CleanPodPolicyNone {
		t.Errorf("cleanPodPolicy = %s, want None", got)
	}
	sp := job.Spec.RunPolicy.SchedulingPolicy
	if sp.Gang != v1alpha1.GangVolcano || *sp.ScheduleTimeoutSeconds != 10 || *sp.MaxScheduleAttempts != 3 {
		t.Errorf("schedulingPolicy = %s/%d/%d, want volcano/10/3", sp.Gang, *sp.ScheduleTimeoutSeconds, *sp.MaxScheduleAttempts)
	}
	if job.Spec.SuccessPolicy != v1alpha1.SuccessPolicyAllWorkers {
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
		elastic      *v1alpha1.ElasticPolicy
		nproc        *string
		wantMin      *int32
		wantMax      *int32
		wantNproc    *string
		wantElasticP *int32
	}{
		{name: "no elastic", wantNproc: ptrTo("auto")},
		{name: "declared nproc kept", nproc: ptrTo("4"), wantNproc: ptrTo("4")},
		{name: "elastic without bounds", elastic: &v1alpha1.ElasticPolicy{}, wantMin: ptrTo[int32](3), wantMax: ptrTo[int32](3), wantNproc: ptrTo("auto")},
		{name: "only max", elastic: &v1alpha1.ElasticPolicy{MaxReplicas: ptrTo[int32](5)}, wantMin: ptrTo[int32](5), wantMax: ptrTo[int32](5), wantNproc: ptrTo("auto")},
		{name: "only min", elastic: &v1alpha1.ElasticPolicy{MinReplicas: ptrTo[int32](2)}, wantMin: ptrTo[int32](2), wantMax: ptrTo[int32](2), wantNproc: ptrTo("auto")},
		{name: "deprecated nProcPerNode suppresses auto",
			elastic: &v1alpha1.ElasticPolicy{MinReplicas: ptrTo[int32](1), MaxReplicas: ptrTo[int32](4), NProcPerNode: ptrTo[int32](2)},
			wantMin: ptrTo[int32](1), wantMax: ptrTo[int32](4), wantElasticP: ptrTo[int32](2)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			job := newJob(v1alpha1.FrameworkPyTorch, map[v1alpha1.ReplicaType]*v1alpha1.ReplicaSpec{
				v1alpha1.ReplicaTypeWorker: {Replicas: ptrTo[int32](3), Template: podWith(container("pytorch"))},
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
	job := newJob(v1alpha1.FrameworkTensorFlow, map[v1alpha1.ReplicaType]*v1alpha1.ReplicaSpec{
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
		framework  v1alpha1.Framework
		containers []corev1.Container
		want       string
	}{
		{"named default wins", v1alpha1.FrameworkPyTorch, []corev1.Container{container("init-data"), container("pytorch")}, "pytorch"},
		{"first when none is named", v1alpha1.FrameworkPyTorch, []corev1.Container{container("trainer"), container("sidecar")}, "trainer"},
		{"mpi uses the first", v1alpha1.FrameworkMPI, []corev1.Container{container("mpi-worker"), container("mpi")}, "mpi-worker"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			job := newJob(tc.framework, map[v1alpha1.ReplicaType]*v1alpha1.ReplicaSpec{v1alpha1.ReplicaTypeWorker: {Template: podWith(tc.containers...)}})
			if got := MainContainer(job, v1alpha1.ReplicaTypeWorker); got == nil || got.Name != tc.want {
				t.Fatalf("MainContainer = %v, want %q", got, tc.want)
			}
		})
	}
	job := newJob(v1alpha1.FrameworkJAX, map[v1alpha1.ReplicaType]*v1alpha1.ReplicaSpec{v1alpha1.ReplicaTypeWorker: {}})
	if got := MainContainer(job, v1alpha1.ReplicaTypeWorker); got != nil {
		t.Errorf("MainContainer of a pod without containers = %v, want nil", got)
	}
	if got := MainContainer(job, v1alpha1.ReplicaTypeMaster); got != nil {
		t.Errorf("MainContainer of a missing type = %v, want nil", got)
	}
}

func TestFailurePolicyDefaultsByFramework(t *testing.T) {
	worker := func() *v1alpha1.ReplicaSpec { return &v1alpha1.ReplicaSpec{Template: podWith(container("w"))} }
	cases := []struct {
		name    string
		job     *v1alpha1.TrainJob
		restart v1alpha1.FailureRestart
	}{
		{"pytorch DDP", newJob(v1alpha1.FrameworkPyTorch, map[v1alpha1.ReplicaType]*v1alpha1.ReplicaSpec{v1alpha1.ReplicaTypeMaster: worker(), v1alpha1.ReplicaTypeWorker: worker()}), v1alpha1.FailureRestartJob},
		{"elastic pytorch", func() *v1alpha1.TrainJob {
			j := newJob(v1alpha1.FrameworkPyTorch, map[v1alpha1.ReplicaType]*v1alpha1.ReplicaSpec{v1alpha1.ReplicaTypeWorker: worker()})
			j.Spec.ElasticPolicy = &v1alpha1.ElasticPolicy{MinReplicas: ptrTo[int32](1)}
			return j
		}(), v1alpha1.FailureRestartReplica},
		{"mpi", newJob(v1alpha1.FrameworkMPI, map[v1alpha1.ReplicaType]*v1alpha1.ReplicaSpec{v1alpha1.ReplicaTypeLauncher: worker(), v1alpha1.ReplicaTypeWorker: worker()}), v1alpha1.FailureRestartJob},
		{"jax", newJob(v1alpha1.FrameworkJAX, map[v1alpha1.ReplicaType]*v1alpha1.ReplicaSpec{v1alpha1.ReplicaTypeWorker: worker()}), v1alpha1.FailureRestartJob},
		{"tensorflow MultiWorkerMirrored", newJob(v1alpha1.FrameworkTensorFlow, map[v1alpha1.ReplicaType]*v1alpha1.ReplicaSpec{v1alpha1.ReplicaTypeWorker: worker()}), v1alpha1.FailureRestartJob},
		{"tensorflow with PS", newJob(v1alpha1.FrameworkTensorFlow, map[v1alpha1.ReplicaType]*v1alpha1.ReplicaSpec{v1alpha1.ReplicaTypePS: worker(), v1alpha1.ReplicaTypeWorker: worker()}), v1alpha1.FailureRestartReplica},
		{"xgboost", newJob(v1alpha1.FrameworkXGBoost, map[v1alpha1.ReplicaType]*v1alpha1.ReplicaSpec{v1alpha1.ReplicaTypeMaster: worker(), v1alpha1.ReplicaTypeWorker: worker()}), v1alpha1.FailureRestartReplica},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			SetDefaults(tc.job)
			fp := tc.job.Spec.RunPolicy.FailurePolicy
			if fp.Restart != tc.restart {
				t.Errorf("restart %s, want %s", fp.Restart, tc.restart)
			}
			if len(fp.Rules) != 1 || fp.Rules[0].Action != v1alpha1.FailureActionIgnore || fp.Rules[0].OnPodConditions[0].Type != v1alpha1.PodConditionDisruptionTarget {
				t.Errorf("rules %+v, want the DisruptionTarget → Ignore rule", fp.Rules)
			}
		})
	}
	t.Run("an empty rule list turns the default rule off", func(t *testing.T) {
		job := newJob(v1alpha1.FrameworkJAX, map[v1alpha1.ReplicaType]*v1alpha1.ReplicaSpec{v1alpha1.ReplicaTypeWorker: worker()})
		job.Spec.RunPolicy.FailurePolicy = &v1alpha1.FailurePolicy{Rules: []v1alpha1.FailurePolicyRule{}}
		SetDefaults(job)
		if n := len(job.Spec.RunPolicy.FailurePolicy.Rules); n != 0 {
			t.Errorf("%d rules, want none", n)
		}
	})
}
