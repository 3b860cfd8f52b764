package frameworks_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/frameworks"
	"github.com/trainstep/trainstep/pkg/frameworks/framework"
	"github.com/trainstep/trainstep/pkg/frameworks/tensorflow"
)

const (
	ps        = v1alpha1.ReplicaTypePS
	worker    = v1alpha1.ReplicaTypeWorker
	chief     = v1alpha1.ReplicaTypeChief
	master    = v1alpha1.ReplicaTypeMaster
	evaluator = v1alpha1.ReplicaTypeEvaluator
	launcher  = v1alpha1.ReplicaTypeLauncher
)

func TestTFConfig(t *testing.T) {
	cases := []struct {
		name  string
		job   *v1alpha1.TrainJob
		rt    v1alpha1.ReplicaType
		index int
		// want is the TF_CONFIG value; "" means no TF_CONFIG at all.
		want string
	}{
		{
			// kubeflow/training-operator v1.9.0 pkg/controller.v1/tensorflow/pod_test.go
			// "should generate desired cluster spec": NewTFJobWithNamespace(1, 0, "ns0") has no TF_CONFIG.
			name: "single worker trains locally",
			job:  newJob(v1alpha1.FrameworkTensorFlow, "test-tfjob", "ns0", replicas{worker: 1}),
			rt:   worker,
		},
		{
			// Same Kubeflow test, NewTFJobWithNamespace(1, 1, "ns2"), without
			// the custom cluster domain the operator appends from its own env.
			name: "ps and worker",
			job:  newJob(v1alpha1.FrameworkTensorFlow, "test-tfjob", "ns2", replicas{worker: 1, ps: 1}),
			rt:   worker,
			want: `{"cluster":{"ps":["test-tfjob-ps-0.ns2.svc:2222"],"worker":["test-tfjob-worker-0.ns2.svc:2222"]},"task":{"type":"worker","index":0},"environment":"cloud"}`,
		},
		{
			// Same Kubeflow test, NewTFJobWithEvaluatorAndNamespace(1, 1, 1, "ns3"),
			// customClusterDomain "": transcribed verbatim.
			name: "evaluator is part of the cluster",
			job:  newJob(v1alpha1.FrameworkTensorFlow, "test-tfjob", "ns3", replicas{worker: 1, ps: 1, evaluator: 1}),
			rt:   worker,
			want: `{"cluster":{"evaluator":["test-tfjob-evaluator-0.ns3.svc:2222"],"ps":["test-tfjob-ps-0.ns3.svc:2222"],"worker":["test-tfjob-worker-0.ns3.svc:2222"]},"task":{"type":"worker","index":0},"environment":"cloud"}`,
		},
		{
			name:  "chief and workers, task of the second worker",
			job:   newJob(v1alpha1.FrameworkTensorFlow, "mnist", "team-a", replicas{chief: 1, worker: 2}),
			rt:    worker,
			index: 1,
			want:  `{"cluster":{"chief":["mnist-chief-0.team-a.svc:2222"],"worker":["mnist-worker-0.team-a.svc:2222","mnist-worker-1.team-a.svc:2222"]},"task":{"type":"worker","index":1},"environment":"cloud"}`,
		},
		{
			name: "chief's own task",
			job:  newJob(v1alpha1.FrameworkTensorFlow, "mnist", "team-a", replicas{chief: 1, worker: 1}),
			rt:   chief,
			want: `{"cluster":{"chief":["mnist-chief-0.team-a.svc:2222"],"worker":["mnist-worker-0.team-a.svc:2222"]},"task":{"type":"chief","index":0},"environment":"cloud"}`,
		},
		{
			// GetPortFromTFJob (tensorflow/util.go) reads tfjob-port per replica type.
			name: "custom port per replica type",
			job: newJob(v1alpha1.FrameworkTensorFlow, "mnist", "default", replicas{ps: 1, worker: 2},
				withPort(worker, 3333)),
			rt:   ps,
			want: `{"cluster":{"ps":["mnist-ps-0.default.svc:2222"],"worker":["mnist-worker-0.default.svc:3333","mnist-worker-1.default.svc:3333"]},"task":{"type":"ps","index":0},"environment":"cloud"}`,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			spec := configured(t, tc.job, tc.rt, tc.index)
			if tc.want == "" {
				if len(spec.Containers[0].Env) != 0 {
					t.Errorf("env of the tensorflow container = %v, want none", spec.Containers[0].Env)
				}
				if cms := tfConfigMaps(t, tc.job); len(cms) != 0 {
					t.Errorf("ConfigMaps = %v, want none", cms)
				}
				return
			}
			if got := tfConfigSeen(t, tc.job, spec.Containers[0].Env); got != tc.want {
				t.Errorf("TF_CONFIG as the process sees it:\n got %s\nwant %s", got, tc.want)
			}
		})
	}
}

// The cluster is in the job's one ConfigMap, and TF_CONFIG refers to it:
// a pod's bytes no longer grow with the job's size.
func TestTFConfigRefersToTheClusterConfigMap(t *testing.T) {
	job := newJob(v1alpha1.FrameworkTensorFlow, "mnist", "team-a", replicas{ps: 1, worker: 2})
	spec := configured(t, job, worker, 1)
	want := []corev1.EnvVar{
		{Name: "TRAINSTEP_TF_CLUSTER", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: "mnist-tf-cluster"}, Key: "cluster"}}},
		{Name: "TF_CONFIG", Value: `{"cluster":$(TRAINSTEP_TF_CLUSTER),"task":{"type":"worker","index":1},"environment":"cloud"}`},
	}
	if diff := cmp.Diff(want, spec.Containers[0].Env); diff != "" {
		t.Errorf("env (-want +got):\n%s", diff)
	}
	cms := tfConfigMaps(t, job)
	if len(cms) != 1 {
		t.Fatalf("ConfigMaps = %v, want one", cms)
	}
	if cm := cms[0]; cm.Name != "mnist-tf-cluster" || cm.Immutable == nil || !*cm.Immutable ||
		cm.Data["cluster"] != `{"ps":["mnist-ps-0.team-a.svc:2222"],"worker":["mnist-worker-0.team-a.svc:2222","mnist-worker-1.team-a.svc:2222"]}` {
		t.Errorf("ConfigMap = %s immutable %v data %v", cm.Name, cm.Immutable, cm.Data)
	}
}

func tfConfigMaps(t *testing.T, job *v1alpha1.TrainJob) []*corev1.ConfigMap {
	t.Helper()
	cms, err := frameworks.ConfigMaps(job, frameworks.Placement{JobName: job.Name, Namespace: job.Namespace})
	if err != nil {
		t.Fatal(err)
	}
	return cms
}

// tfConfigSeen is TF_CONFIG as the kubelet gives it to the process: the
// cluster variable read from the job's ConfigMap, then $(TRAINSTEP_TF_CLUSTER)
// in TF_CONFIG replaced by it. Any other env is an error.
func tfConfigSeen(t *testing.T, job *v1alpha1.TrainJob, envs []corev1.EnvVar) string {
	t.Helper()
	if len(envs) != 2 || envs[0].Name != tensorflow.EnvTFCluster || envs[1].Name != tensorflow.EnvTFConfig {
		t.Fatalf("env = %v, want TRAINSTEP_TF_CLUSTER then TF_CONFIG", envs)
	}
	ref := envs[0].ValueFrom
	if ref == nil || ref.ConfigMapKeyRef == nil {
		t.Fatalf("TRAINSTEP_TF_CLUSTER = %v, want a ConfigMap key", envs[0])
	}
	var cluster *string
	for _, cm := range tfConfigMaps(t, job) {
		if cm.Name == ref.ConfigMapKeyRef.Name {
			if v, ok := cm.Data[ref.ConfigMapKeyRef.Key]; ok {
				cluster = &v
			}
		}
	}
	if cluster == nil {
		t.Fatalf("no rendered ConfigMap holds %s/%s", ref.ConfigMapKeyRef.Name, ref.ConfigMapKeyRef.Key)
	}
	if strings.Count(envs[1].Value, "$") != 1 || !strings.Contains(envs[1].Value, "$(TRAINSTEP_TF_CLUSTER)") {
		t.Fatalf("TF_CONFIG = %s, want one reference to $(TRAINSTEP_TF_CLUSTER)", envs[1].Value)
	}
	return strings.Replace(envs[1].Value, "$(TRAINSTEP_TF_CLUSTER)", *cluster, 1)
}

// SetClusterSpec (tfjob_controller.go) adds TF_CONFIG to the container
// named "tensorflow" only.
func TestTFConfigOnlyOnTensorflowContainer(t *testing.T) {
	job := newJob(v1alpha1.FrameworkTensorFlow, "mnist", "default", replicas{worker: 2},
		func(j *v1alpha1.TrainJob) {
			// The sidecar comes first: the main container is found by name.
			spec := &j.Spec.ReplicaSpecs[worker].Template.Spec
			spec.Containers = append([]corev1.Container{{Name: "sidecar", Image: "example.com/sidecar:1"}}, spec.Containers...)
		})
	spec := configured(t, job, worker, 0)
	if len(spec.Containers[0].Env) != 0 {
		t.Errorf("sidecar got env %v, want none", spec.Containers[0].Env)
	}
	if got := spec.Containers[1].Env; len(got) != 2 || got[0].Name != "TRAINSTEP_TF_CLUSTER" || got[1].Name != "TF_CONFIG" {
		t.Errorf("tensorflow container env = %v, want only TRAINSTEP_TF_CLUSTER and TF_CONFIG", got)
	}
}

func TestTensorFlowSuccessRule(t *testing.T) {
	cases := []struct {
		name        string
		job         *v1alpha1.TrainJob
		want        frameworks.SuccessRule
		wantLeaders []frameworks.ReplicaRef
	}{
		{
			name:        "chief decides",
			job:         newJob(v1alpha1.FrameworkTensorFlow, "j", "ns", replicas{chief: 1, worker: 2, ps: 1}),
			want:        frameworks.SuccessRule{Leader: &frameworks.ReplicaRef{Type: chief}},
			wantLeaders: []frameworks.ReplicaRef{{Type: chief}},
		},
		{
			name:        "master decides",
			job:         newJob(v1alpha1.FrameworkTensorFlow, "j", "ns", replicas{master: 1, worker: 2}),
			want:        frameworks.SuccessRule{Leader: &frameworks.ReplicaRef{Type: master}},
			wantLeaders: []frameworks.ReplicaRef{{Type: master}},
		},
		{
			name:        "without chief worker 0 decides",
			job:         newJob(v1alpha1.FrameworkTensorFlow, "j", "ns", replicas{ps: 2, worker: 3, evaluator: 1}),
			want:        frameworks.SuccessRule{Leader: &frameworks.ReplicaRef{Type: worker}},
			wantLeaders: []frameworks.ReplicaRef{{Type: worker}},
		},
		{
			name: "AllWorkers waits for every worker",
			job: newJob(v1alpha1.FrameworkTensorFlow, "j", "ns", replicas{ps: 1, worker: 3},
				func(j *v1alpha1.TrainJob) { j.Spec.SuccessPolicy = v1alpha1.SuccessPolicyAllWorkers }),
			want:        frameworks.SuccessRule{AllOf: []v1alpha1.ReplicaType{worker}},
			wantLeaders: []frameworks.ReplicaRef{{Type: worker}},
		},
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

// TF_CONFIG of a sizable job, built once per job, must be byte for byte what
// encoding the whole document for each replica gives (the Training
// Operator's encoding).
func TestTFConfigOfLargeJobMatchesWholeEncoding(t *testing.T) {
	job := newJob(v1alpha1.FrameworkTensorFlow, "ts-0123456789", "team-a",
		replicas{chief: 1, ps: 3, worker: 600, evaluator: 1}, withPort(ps, 3333))
	at := frameworks.Placement{JobName: job.Name, Namespace: job.Namespace}
	fw, err := frameworks.For(job.Spec.Framework)
	if err != nil {
		t.Fatal(err)
	}
	pods, err := fw.Prepare(job, at)
	if err != nil {
		t.Fatalf("Prepare: %v", err)
	}
	for _, rt := range frameworks.SortedReplicaTypes(job) {
		for i := 0; i < frameworks.Replicas(job, rt); i++ {
			spec := job.Spec.ReplicaSpecs[rt].Template.Spec.DeepCopy()
			if err := pods.ConfigurePod(frameworks.ReplicaRef{Type: rt, Index: i}, spec); err != nil {
				t.Fatalf("ConfigurePod(%s/%d): %v", rt, i, err)
			}
			want := wholeTFConfig(t, job, rt, i)
			if got := tfConfigSeen(t, job, spec.Containers[0].Env); got != want {
				t.Fatalf("%s/%d: TF_CONFIG = %.200q…, want %.200q…", rt, i, got, want)
			}
			if i == 0 {
				if got, err := tensorflow.TFConfig(job, at, frameworks.ReplicaRef{Type: rt, Index: i}); err != nil || got != want {
					t.Fatalf("%s/%d: TFConfig = %.200q…, %v, want %.200q…", rt, i, got, err, want)
				}
			}
		}
	}
}

// wholeTFConfig encodes a replica's TF_CONFIG in one json.Marshal, as the
// Training Operator does.
func wholeTFConfig(t *testing.T, job *v1alpha1.TrainJob, rt v1alpha1.ReplicaType, index int) string {
	t.Helper()
	type task struct {
		Type  string `json:"type"`
		Index int    `json:"index"`
	}
	doc := struct {
		Cluster     map[string][]string `json:"cluster"`
		Task        task                `json:"task"`
		Environment string              `json:"environment"`
	}{Cluster: map[string][]string{}, Task: task{Type: strings.ToLower(string(rt)), Index: index}, Environment: "cloud"}
	for peer, spec := range job.Spec.ReplicaSpecs {
		key := strings.ToLower(string(peer))
		_, port := frameworks.Port(job, peer)
		for i := 0; i < int(spec.ReplicaCount()); i++ {
			doc.Cluster[key] = append(doc.Cluster[key], fmt.Sprintf("%s.%s.svc:%d", framework.ReplicaName(job.Name, peer, i), job.Namespace, port))
		}
	}
	data, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// A TF_CONFIG over Linux's limit on one environment string would keep every
// replica from starting: Prepare refuses the job exactly at the size where
// the rendered "TF_CONFIG=<value>" and its NUL no longer fit.
func TestTFConfigOverTheEnvironmentLimit(t *testing.T) {
	fw, err := frameworks.For(v1alpha1.FrameworkTensorFlow)
	if err != nil {
		t.Fatal(err)
	}
	jobOf := func(workers int32) *v1alpha1.TrainJob {
		return newJob(v1alpha1.FrameworkTensorFlow, "ts-0123456789", "default", replicas{ps: 1, worker: workers})
	}
	fits := func(workers int32) bool {
		job := jobOf(workers)
		_, err := fw.Prepare(job, frameworks.Placement{JobName: job.Name, Namespace: job.Namespace})
		return err == nil
	}
	if !fits(2048) {
		t.Fatal("2048 workers rejected; their TF_CONFIG is about 91 KB")
	}
	if fits(4095) {
		t.Fatal("4095 workers accepted; their TF_CONFIG is about 183 KB")
	}
	lo, hi := int32(2048), int32(4095) // fits(lo), !fits(hi)
	for hi-lo > 1 {
		if mid := (lo + hi) / 2; fits(mid) {
			lo = mid
		} else {
			hi = mid
		}
	}
	size := func(workers int32) int {
		job := jobOf(workers)
		value, err := tensorflow.TFConfig(job, frameworks.Placement{JobName: job.Name, Namespace: job.Namespace},
			frameworks.ReplicaRef{Type: worker, Index: int(workers) - 1})
		if err != nil {
			t.Fatal(err)
		}
		return len("TF_CONFIG=") + len(value) + 1
	}
	t.Logf("in namespace default, job ts-0123456789: 1 PS and %d workers fit (%d bytes), %d do not", lo, size(lo), hi)
	if got := size(lo); got > framework.MaxEnvVarSize {
		t.Errorf("%d workers accepted with a TF_CONFIG string of %d bytes, over %d", lo, got, framework.MaxEnvVarSize)
	}
	if got := size(hi); got <= framework.MaxEnvVarSize {
		t.Errorf("%d workers rejected with a TF_CONFIG string of %d bytes, within %d", hi, got, framework.MaxEnvVarSize)
	}
	job := jobOf(hi)
	_, err = fw.Prepare(job, frameworks.Placement{JobName: job.Name, Namespace: job.Namespace})
	for _, want := range []string{"spec.replicaSpecs", "TF_CONFIG", "131072", `"ts-0123456789"`, `"default"`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not name %s", err, want)
		}
	}
}
