package frameworks_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/frameworks"
)

// Expected values follow kubeflow/training-operator v1.9.0
// pkg/controller.v1/pytorch: setPodEnv (envvar.go) appends PYTHONUNBUFFERED,
// then with a Master the MasterEnvVarGenerator's MASTER_PORT,
// PET_MASTER_PORT, MASTER_ADDR, PET_MASTER_ADDR (master.go), then
// WORLD_SIZE, RANK, PET_NODE_RANK, then PET_NPROC_PER_NODE, then either
// PET_NNODES or the ElasticEnvVarGenerator's variables (elastic.go).
// nprocPerNode defaults to "auto" (pytorch_defaults.go).
func TestPyTorchEnv(t *testing.T) {
	cases := []struct {
		name  string
		job   *v1alpha1.TrainJob
		rt    v1alpha1.ReplicaType
		index int
		want  []corev1.EnvVar
	}{
		{
			name: "master",
			job:  newJob(v1alpha1.FrameworkPyTorch, "bert", "ml", replicas{master: 1, worker: 2}),
			rt:   master,
			want: env(
				"PYTHONUNBUFFERED", "1",
				"MASTER_PORT", "23456",
				"PET_MASTER_PORT", "23456",
				"MASTER_ADDR", "bert-master-0",
				"PET_MASTER_ADDR", "bert-master-0",
				"WORLD_SIZE", "3",
				"RANK", "0",
				"PET_NODE_RANK", "0",
				"PET_NPROC_PER_NODE", "auto",
				"PET_NNODES", "3",
			),
		},
		{
			name:  "worker ranks start after the master",
			job:   newJob(v1alpha1.FrameworkPyTorch, "bert", "ml", replicas{master: 1, worker: 2}),
			rt:    worker,
			index: 1,
			want: env(
				"PYTHONUNBUFFERED", "1",
				"MASTER_PORT", "23456",
				"PET_MASTER_PORT", "23456",
				"MASTER_ADDR", "bert-master-0",
				"PET_MASTER_ADDR", "bert-master-0",
				"WORLD_SIZE", "3",
				"RANK", "2",
				"PET_NODE_RANK", "2",
				"PET_NPROC_PER_NODE", "auto",
				"PET_NNODES", "3",
			),
		},
		{
			name: "numeric nprocPerNode multiplies the world size",
			job: newJob(v1alpha1.FrameworkPyTorch, "bert", "ml", replicas{master: 1, worker: 3},
				func(j *v1alpha1.TrainJob) { j.Spec.NprocPerNode = ptr("4") }),
			rt:    worker,
			index: 0,
			want: env(
				"PYTHONUNBUFFERED", "1",
				"MASTER_PORT", "23456",
				"PET_MASTER_PORT", "23456",
				"MASTER_ADDR", "bert-master-0",
				"PET_MASTER_ADDR", "bert-master-0",
				"WORLD_SIZE", "16",
				"RANK", "1",
				"PET_NODE_RANK", "1",
				"PET_NPROC_PER_NODE", "4",
				"PET_NNODES", "4",
			),
		},
		{
			name: "custom master port",
			job: newJob(v1alpha1.FrameworkPyTorch, "bert", "ml", replicas{master: 1, worker: 1},
				withPort(master, 29500), withPort(worker, 29500)),
			rt: master,
			want: env(
				"PYTHONUNBUFFERED", "1",
				"MASTER_PORT", "29500",
				"PET_MASTER_PORT", "29500",
				"MASTER_ADDR", "bert-master-0",
				"PET_MASTER_ADDR", "bert-master-0",
				"WORLD_SIZE", "2",
				"RANK", "0",
				"PET_NODE_RANK", "0",
				"PET_NPROC_PER_NODE", "auto",
				"PET_NNODES", "2",
			),
		},
		{
			// Without a Master the operator sets no MASTER_*, WORLD_SIZE or RANK.
			name: "elastic workers",
			job: newJob(v1alpha1.FrameworkPyTorch, "elastic", "ml", replicas{worker: 2},
				func(j *v1alpha1.TrainJob) {
					j.Spec.ElasticPolicy = &v1alpha1.ElasticPolicy{MinReplicas: ptr[int32](1), MaxReplicas: ptr[int32](3), MaxRestarts: ptr[int32](3)}
				}),
			rt:    worker,
			index: 1,
			want: env(
				"PYTHONUNBUFFERED", "1",
				"PET_NPROC_PER_NODE", "auto",
				"PET_RDZV_ENDPOINT", "elastic-worker-0:23456",
				"PET_RDZV_BACKEND", "c10d",
				"PET_NNODES", "1:3",
				"PET_MAX_RESTARTS", "3",
			),
		},
		{
			// Values of kubeflow/training-operator v1.9.0
			// pkg/controller.v1/pytorch/elastic_test.go "With ElasticPolicy"
			// (which compares ignoring order); order from elastic.go Generate.
			name: "elastic with every rendezvous option",
			job: newJob(v1alpha1.FrameworkPyTorch, "elastic", "ml", replicas{worker: 1},
				func(j *v1alpha1.TrainJob) {
					backend := v1alpha1.BackendC10D
					j.Spec.ElasticPolicy = &v1alpha1.ElasticPolicy{
						MinReplicas: ptr[int32](1),
						MaxReplicas: ptr[int32](3),
						RDZVBackend: &backend,
						RDZVPort:    ptr[int32](1234),
						RDZVHost:    ptr("localhost"),
						RDZVID:      ptr("rdzv-id"),
						RDZVConf: []v1alpha1.RDZVConf{
							{Key: "rdzv-conf-name", Value: "rdzv-conf-value"},
							{Key: "rdzv-conf-name-1", Value: "rdzv-conf-value-1"},
						},
						MaxRestarts: ptr[int32](3),
					}
				}),
			rt: worker,
			want: env(
				"PYTHONUNBUFFERED", "1",
				"PET_NPROC_PER_NODE", "auto",
				"PET_RDZV_ENDPOINT", "localhost:1234",
				"PET_RDZV_BACKEND", "c10d",
				"PET_NNODES", "1:3",
				"PET_MAX_RESTARTS", "3",
				"PET_RDZV_ID", "rdzv-id",
				"PET_RDZV_CONF", "rdzv-conf-name=rdzv-conf-value,rdzv-conf-name-1=rdzv-conf-value-1",
			),
		},
		{
			// The deprecated elasticPolicy.nProcPerNode replaces the "auto"
			// default (setDefaultNprocPerNode) and is written by elastic.go.
			name: "elastic nProcPerNode and standalone",
			job: newJob(v1alpha1.FrameworkPyTorch, "elastic", "ml", replicas{worker: 2},
				func(j *v1alpha1.TrainJob) {
					backend := v1alpha1.BackendETCD
					j.Spec.ElasticPolicy = &v1alpha1.ElasticPolicy{
						RDZVBackend: &backend, NProcPerNode: ptr[int32](8), Standalone: ptr(true),
					}
				}),
			rt: worker,
			want: env(
				"PYTHONUNBUFFERED", "1",
				"PET_RDZV_ENDPOINT", "elastic-worker-0:23456",
				"PET_RDZV_BACKEND", "etcd",
				"PET_NNODES", "2:2",
				"PET_NPROC_PER_NODE", "8",
				"PET_STANDALONE", "",
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

// setPodEnv loops over every container of the pod.
func TestPyTorchEnvOnEveryContainer(t *testing.T) {
	job := newJob(v1alpha1.FrameworkPyTorch, "bert", "ml", replicas{master: 1, worker: 1}, withSidecar(worker))
	spec := configured(t, job, worker, 0)
	if diff := cmp.Diff(spec.Containers[0].Env, spec.Containers[1].Env); diff != "" {
		t.Errorf("sidecar env differs from the pytorch container's (-pytorch +sidecar):\n%s", diff)
	}
	if len(spec.Containers[1].Env) == 0 {
		t.Error("sidecar got no env")
	}
}

// UpdateJobStatus (pytorchjob_controller.go): the Master decides; without
// one, all workers, or with an elastic policy any finished worker.
func TestPyTorchSuccessRule(t *testing.T) {
	elastic := func(j *v1alpha1.TrainJob) { j.Spec.ElasticPolicy = &v1alpha1.ElasticPolicy{} }
	cases := []struct {
		name string
		job  *v1alpha1.TrainJob
		want frameworks.SuccessRule
	}{
		{"master", newJob(v1alpha1.FrameworkPyTorch, "j", "ns", replicas{master: 1, worker: 4}),
			frameworks.SuccessRule{Leader: &frameworks.ReplicaRef{Type: master}}},
		{"workers only", newJob(v1alpha1.FrameworkPyTorch, "j", "ns", replicas{worker: 4}),
			frameworks.SuccessRule{AllOf: []v1alpha1.ReplicaType{worker}}},
		{"elastic workers", newJob(v1alpha1.FrameworkPyTorch, "j", "ns", replicas{worker: 4}, elastic),
			frameworks.SuccessRule{AnyOf: []v1alpha1.ReplicaType{worker}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, frameworks.SuccessRuleFor(tc.job)); diff != "" {
				t.Errorf("SuccessRuleFor (-want +got):\n%s", diff)
			}
		})
	}
}

// Pods configured from one prepared job get their own rank and share no
// env slice: changing one pod's env must leave the next pod's alone.
func TestPyTorchPreparedPodsAreIndependent(t *testing.T) {
	job := newJob(v1alpha1.FrameworkPyTorch, "pt", "default", replicas{master: 1, worker: 2})
	fw, err := frameworks.For(job.Spec.Framework)
	if err != nil {
		t.Fatal(err)
	}
	pods, err := fw.Prepare(job, frameworks.Placement{JobName: job.Name, Namespace: job.Namespace})
	if err != nil {
		t.Fatalf("Prepare: %v", err)
	}
	rankOf := func(spec *corev1.PodSpec) string {
		for _, e := range spec.Containers[0].Env {
			if e.Name == "RANK" {
				return e.Value
			}
		}
		return ""
	}
	for i := 0; i < 2; i++ {
		spec := job.Spec.ReplicaSpecs[worker].Template.Spec.DeepCopy()
		if err := pods.ConfigurePod(frameworks.ReplicaRef{Type: worker, Index: i}, spec); err != nil {
			t.Fatalf("ConfigurePod(worker/%d): %v", i, err)
		}
		for j := range spec.Containers[0].Env {
			spec.Containers[0].Env[j].Value = "changed"
		}
	}
	spec := job.Spec.ReplicaSpecs[master].Template.Spec.DeepCopy()
	if err := pods.ConfigurePod(frameworks.ReplicaRef{Type: master}, spec); err != nil {
		t.Fatalf("ConfigurePod(master/0): %v", err)
	}
	if got := rankOf(spec); got != "0" {
		t.Errorf("master RANK = %q after the workers' env was changed, want 0", got)
	}
	if got := spec.Containers[0].Env[0]; got.Name != "PYTHONUNBUFFERED" || got.Value != "1" {
		t.Errorf("master's first env = %v, want PYTHONUNBUFFERED=1", got)
	}
}
