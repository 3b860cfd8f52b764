package frameworks_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/frameworks"
	"github.com/trainstep/trainstep/pkg/frameworks/tensorflow"
)

// Under the per-job layout every address trainstep renders names a pod
// through the job's Service, "<pod>.<job>"; under the per-replica layout
// the pod's own Service, "<pod>" (the Training Operator's env).
func TestPeerAddressesFollowTheServiceLayout(t *testing.T) {
	perJob := withLayout(v1alpha1.ServiceLayoutPerJob)
	elastic := func(job *v1alpha1.TrainJob) {
		job.Spec.ElasticPolicy = &v1alpha1.ElasticPolicy{MinReplicas: ptr(int32(2)), MaxReplicas: ptr(int32(3))}
	}
	cases := []struct {
		name    string
		job     *v1alpha1.TrainJob
		replica frameworks.ReplicaRef
		// want holds the variables to check, by name, on the first container.
		want map[string]string
	}{{
		name:    "pytorch master",
		job:     newJob(v1alpha1.FrameworkPyTorch, "ddp", "ml", replicas{master: 1, worker: 2}, perJob),
		replica: frameworks.ReplicaRef{Type: worker, Index: 1},
		want:    map[string]string{"MASTER_ADDR": "ddp-master-0.ddp", "PET_MASTER_ADDR": "ddp-master-0.ddp", "MASTER_PORT": "23456", "RANK": "2"},
	}, {
		name:    "pytorch master, per replica",
		job:     newJob(v1alpha1.FrameworkPyTorch, "ddp", "ml", replicas{master: 1, worker: 2}),
		replica: frameworks.ReplicaRef{Type: worker, Index: 1},
		want:    map[string]string{"MASTER_ADDR": "ddp-master-0", "PET_MASTER_ADDR": "ddp-master-0"},
	}, {
		name:    "pytorch elastic rendezvous",
		job:     newJob(v1alpha1.FrameworkPyTorch, "el", "ml", replicas{worker: 2}, perJob, elastic),
		replica: frameworks.ReplicaRef{Type: worker, Index: 2},
		want:    map[string]string{"PET_RDZV_ENDPOINT": "el-worker-0.el:23456", "PET_NNODES": "2:3"},
	}, {
		name: "pytorch elastic rendezvous on a host of the job's choosing",
		job: newJob(v1alpha1.FrameworkPyTorch, "el", "ml", replicas{worker: 2}, perJob, elastic, func(job *v1alpha1.TrainJob) {
			job.Spec.ElasticPolicy.RDZVHost = ptr("etcd.ml.svc")
		}),
		replica: frameworks.ReplicaRef{Type: worker, Index: 0},
		want:    map[string]string{"PET_RDZV_ENDPOINT": "etcd.ml.svc:23456"},
	}, {
		name:    "jax coordinator",
		job:     newJob(v1alpha1.FrameworkJAX, "spmd", "ml", replicas{worker: 4}, perJob),
		replica: frameworks.ReplicaRef{Type: worker, Index: 3},
		want:    map[string]string{"COORDINATOR_ADDRESS": "spmd-worker-0.spmd", "COORDINATOR_PORT": "6666"},
	}, {
		name:    "xgboost tracker and workers",
		job:     newJob(v1alpha1.FrameworkXGBoost, "xgb", "ml", replicas{master: 1, worker: 2}, perJob),
		replica: frameworks.ReplicaRef{Type: worker, Index: 0},
		want:    map[string]string{"MASTER_ADDR": "xgb-master-0.xgb", "WORKER_ADDRS": "xgb-worker-0.xgb,xgb-worker-1.xgb"},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			spec := configured(t, tc.job, tc.replica.Type, tc.replica.Index)
			got := map[string]string{}
			for _, e := range spec.Containers[0].Env {
				if _, wanted := tc.want[e.Name]; wanted {
					got[e.Name] = e.Value
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("env (-want +got):\n%s", diff)
			}
		})
	}
}

func TestTFClusterFollowsTheServiceLayout(t *testing.T) {
	shape := replicas{v1alpha1.ReplicaTypeChief: 1, ps: 1, worker: 2}
	for _, tc := range []struct {
		layout v1alpha1.ServiceLayout
		want   string
	}{
		{v1alpha1.ServiceLayoutPerJob, `{"chief":["mnist-chief-0.mnist:2222"],"ps":["mnist-ps-0.mnist:2222"],"worker":["mnist-worker-0.mnist:2222","mnist-worker-1.mnist:2222"]}`},
		{v1alpha1.ServiceLayoutPerReplica, `{"chief":["mnist-chief-0.ml.svc:2222"],"ps":["mnist-ps-0.ml.svc:2222"],"worker":["mnist-worker-0.ml.svc:2222","mnist-worker-1.ml.svc:2222"]}`},
	} {
		t.Run(string(tc.layout), func(t *testing.T) {
			job := newJob(v1alpha1.FrameworkTensorFlow, "mnist", "ml", shape, withLayout(tc.layout))
			cms := tfConfigMaps(t, job)
			if len(cms) != 1 {
				t.Fatalf("got %d ConfigMaps, want 1", len(cms))
			}
			if got := cms[0].Data[tensorflow.TFClusterKey]; got != tc.want {
				t.Errorf("cluster = %s\nwant      %s", got, tc.want)
			}
			config, err := tensorflow.TFConfig(job, frameworks.Placement{JobName: job.Name, Namespace: job.Namespace}, frameworks.ReplicaRef{Type: worker, Index: 1})
			if err != nil {
				t.Fatal(err)
			}
			if want := `{"cluster":` + tc.want + `,"task":{"type":"worker","index":1},"environment":"cloud"}`; config != want {
				t.Errorf("TF_CONFIG = %s\nwant        %s", config, want)
			}
		})
	}
}

// Under the per-job layout XGBoost's WORKER_ADDRS names the job twice per
// worker: 4095 workers of a job named as the templates name jobs no longer
// fit one environment string, and the error says which layout would.
func TestXGBoostWorkerAddrsPerJobNameTheLayout(t *testing.T) {
	fw, err := frameworks.For(v1alpha1.FrameworkXGBoost)
	if err != nil {
		t.Fatal(err)
	}
	job := newJob(v1alpha1.FrameworkXGBoost, "ts-0123456789", "default", replicas{master: 1, worker: 4095}, withLayout(v1alpha1.ServiceLayoutPerJob))
	_, err = fw.Prepare(job, frameworks.Placement{JobName: job.Name, Namespace: job.Namespace})
	if err == nil {
		t.Fatal("Prepare succeeded, want WORKER_ADDRS over the environment limit")
	}
	for _, want := range []string{"WORKER_ADDRS", "spec.serviceLayout PerReplica"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}
