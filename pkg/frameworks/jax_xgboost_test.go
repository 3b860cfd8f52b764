package frameworks_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/frameworks"
)

func TestJAXEnv(t *testing.T) {
	cases := []struct {
		name  string
		job   *v1alpha1.TrainJob
		index int
		want  []corev1.EnvVar
	}{
		{
			// kubeflow/training-operator v1.9.0 pkg/controller.v1/jax/envvar_test.go
			// "successful environment variable setup", transcribed verbatim.
			name: "single worker",
			job:  newJob(v1alpha1.FrameworkJAX, "test-jaxjob", "default", replicas{worker: 1}),
			want: env(
				"PYTHONUNBUFFERED", "1",
				"COORDINATOR_PORT", "6666",
				"COORDINATOR_ADDRESS", "test-jaxjob-worker-0",
				"NUM_PROCESSES", "1",
				"PROCESS_ID", "0",
			),
		},
		{
			name:  "third of four workers on a custom port",
			job:   newJob(v1alpha1.FrameworkJAX, "spmd", "default", replicas{worker: 4}, withPort(worker, 1234)),
			index: 2,
			want: env(
				"PYTHONUNBUFFERED", "1",
				"COORDINATOR_PORT", "1234",
				"COORDINATOR_ADDRESS", "spmd-worker-0",
				"NUM_PROCESSES", "4",
				"PROCESS_ID", "2",
			),
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			spec := configured(t, tc.job, worker, tc.index)
			if diff := cmp.Diff(tc.want, spec.Containers[0].Env); diff != "" {
				t.Errorf("env (-want +got):\n%s", diff)
			}
		})
	}
}

// Expected values follow kubeflow/training-operator v1.9.0
// pkg/controller.v1/xgboost/xgboost.go SetPodEnv: MASTER_PORT, MASTER_ADDR,
// WORLD_SIZE, RANK (workers offset by the master count), PYTHONUNBUFFERED,
// then with more than one replica WORKER_PORT and WORKER_ADDRS (the first
// total-1 worker names).
func TestXGBoostEnv(t *testing.T) {
	cases := []struct {
		name  string
		job   *v1alpha1.TrainJob
		rt    v1alpha1.ReplicaType
		index int
		want  []corev1.EnvVar
	}{
		{
			name: "master alone",
			job:  newJob(v1alpha1.FrameworkXGBoost, "xgb", "default", replicas{master: 1}),
			rt:   master,
			want: env(
				"MASTER_PORT", "9999",
				"MASTER_ADDR", "xgb-master-0",
				"WORLD_SIZE", "1",
				"RANK", "0",
				"PYTHONUNBUFFERED", "1",
			),
		},
		{
			name:  "second worker",
			job:   newJob(v1alpha1.FrameworkXGBoost, "xgb", "default", replicas{master: 1, worker: 2}),
			rt:    worker,
			index: 1,
			want: env(
				"MASTER_PORT", "9999",
				"MASTER_ADDR", "xgb-master-0",
				"WORLD_SIZE", "3",
				"RANK", "2",
				"PYTHONUNBUFFERED", "1",
				"WORKER_PORT", "9999",
				"WORKER_ADDRS", "xgb-worker-0,xgb-worker-1",
			),
		},
		{
			name: "custom ports",
			job: newJob(v1alpha1.FrameworkXGBoost, "xgb", "default", replicas{master: 1, worker: 1},
				withPort(master, 9090), withPort(worker, 9191)),
			rt: master,
			want: env(
				"MASTER_PORT", "9090",
				"MASTER_ADDR", "xgb-master-0",
				"WORLD_SIZE", "2",
				"RANK", "0",
				"PYTHONUNBUFFERED", "1",
				"WORKER_PORT", "9191",
				"WORKER_ADDRS", "xgb-worker-0",
			),
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			spec := configured(t, tc.job, tc.rt, tc.index)
			if diff := cmp.Diff(tc.want, spec.Containers[0].Env); diff != "" {
				t.Errorf("env (-want +got):\n%s", diff)
			}
		})
	}
}

// JAXJob succeeds when every worker has (jaxjob_controller.go
// UpdateJobStatus); XGBoostJob when its master has (xgboostjob_controller.go).
func TestJAXAndXGBoostSuccessRules(t *testing.T) {
	cases := []struct {
		name        string
		job         *v1alpha1.TrainJob
		want        frameworks.SuccessRule
		wantLeaders []frameworks.ReplicaRef
	}{
		{"jax", newJob(v1alpha1.FrameworkJAX, "j", "ns", replicas{worker: 3}),
			frameworks.SuccessRule{AllOf: []v1alpha1.ReplicaType{worker}},
			[]frameworks.ReplicaRef{{Type: worker}}},
		{"xgboost", newJob(v1alpha1.FrameworkXGBoost, "j", "ns", replicas{master: 1, worker: 3}),
			frameworks.SuccessRule{Leader: &frameworks.ReplicaRef{Type: master}},
			[]frameworks.ReplicaRef{{Type: master}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, frameworks.SuccessRuleFor(tc.job)); diff != "" {
				t.Errorf("SuccessRuleFor (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantLeaders, frameworks.Leaders(tc.job)); diff != "" {
				t.Errorf("Leaders (-want +got):\n%s", diff)
			}
		})
	}
}

func TestForRejectsUnknownFramework(t *testing.T) {
	if _, err := frameworks.For("caffe"); err == nil {
		t.Fatal("For(caffe) succeeded, want an error")
	}
}

// XGBoost's WORKER_ADDRS lists every replica: a job whose list no longer
// fits one environment string is refused, one whose list fits is not.
func TestXGBoostWorkerAddrsOverTheEnvironmentLimit(t *testing.T) {
	fw, err := frameworks.For(v1alpha1.FrameworkXGBoost)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		job     string
		wantErr bool
	}{
		{name: "short job name", job: "ts-0123456789"}, // 4095 names of about 25 characters: 105 KB
		{name: "long job name", job: strings.Repeat("x", 40), wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			job := newJob(v1alpha1.FrameworkXGBoost, tc.job, "default", replicas{master: 1, worker: 4095})
			_, err := fw.Prepare(job, frameworks.Placement{JobName: job.Name, Namespace: job.Namespace})
			if gotErr := err != nil; gotErr != tc.wantErr {
				t.Fatalf("Prepare error = %v, want error: %v", err, tc.wantErr)
			}
			if err != nil && !strings.Contains(err.Error(), "WORKER_ADDRS") {
				t.Errorf("error %v does not name WORKER_ADDRS", err)
			}
		})
	}
}
