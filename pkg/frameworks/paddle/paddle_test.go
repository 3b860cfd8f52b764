package paddle_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/trainstep/trainstep/internal/testutil"
	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/frameworks"
	"github.com/trainstep/trainstep/pkg/frameworks/framework"
	"github.com/trainstep/trainstep/pkg/frameworks/paddle"
	"github.com/trainstep/trainstep/pkg/kubeflow"
)

const (
	master = v1alpha1.ReplicaTypeMaster
	worker = v1alpha1.ReplicaTypeWorker
)

// operatorJob is a defaulted Paddle job laid out as Training Operator lays
// out a PaddleJob (a Service per replica), so its env is the operator's.
func operatorJob(name string, shape testutil.Replicas, edits ...func(*v1alpha1.TrainJob)) *v1alpha1.TrainJob {
	perReplica := func(j *v1alpha1.TrainJob) { j.Spec.ServiceLayout = v1alpha1.ServiceLayoutPerReplica }
	return testutil.NewJob(paddle.Name, name, "ml", shape, append([]func(*v1alpha1.TrainJob){perReplica}, edits...)...)
}

// configured is the pod spec of one replica after its framework configured
// a copy of its template.
func configured(t *testing.T, job *v1alpha1.TrainJob, rt v1alpha1.ReplicaType, index int) *corev1.PodSpec {
	t.Helper()
	spec := job.Spec.ReplicaSpecs[rt].Template.Spec.DeepCopy()
	at := frameworks.Placement{JobName: job.Name, Namespace: job.Namespace}
	if err := frameworks.ConfigurePod(job, at, frameworks.ReplicaRef{Type: rt, Index: index}, spec); err != nil {
		t.Fatalf("ConfigurePod(%s/%d): %v", rt, index, err)
	}
	return spec
}

func env(pairs ...string) []corev1.EnvVar {
	out := make([]corev1.EnvVar, 0, len(pairs)/2)
	for i := 0; i+1 < len(pairs); i += 2 {
		out = append(out, corev1.EnvVar{Name: pairs[i], Value: pairs[i+1]})
	}
	return out
}

// podIP is POD_IP_DUMMY as the operator sets it on the rendezvous host.
var podIP = corev1.EnvVar{Name: "POD_IP_DUMMY", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}}

// Expected values follow kubeflow/training-operator v1.9.0
// pkg/controller.v1/paddlepaddle/envvar.go setPodEnv: PYTHONUNBUFFERED,
// PADDLE_JOB_ID (the job's name), PADDLE_NNODES (every replica), then on
// replica 0 of the rendezvous host (Master in parameter-server mode, else
// Worker) POD_IP_DUMMY from status.podIP and PADDLE_MASTER
// $(POD_IP_DUMMY):<port>, on the others PADDLE_MASTER <job>-<type>-0:<port>;
// in parameter-server mode PADDLE_SERVER_NUM=1 on Masters and
// PADDLE_TRAINER_NUM=1 on Workers. The port is the container's "master"
// port, default 36543 (paddlepaddle_types.go).
func TestPaddleEnvIsTrainingOperators(t *testing.T) {
	withPort := func(port int32) func(*v1alpha1.TrainJob) {
		return func(j *v1alpha1.TrainJob) {
			c := &j.Spec.ReplicaSpecs[worker].Template.Spec.Containers[0]
			c.Ports = append(c.Ports, corev1.ContainerPort{Name: "master", ContainerPort: port})
		}
	}
	collective := operatorJob("resnet", testutil.Replicas{worker: 3}, withPort(37777))
	ps := operatorJob("ctr", testutil.Replicas{master: 2, worker: 2})
	cases := []struct {
		name  string
		job   *v1alpha1.TrainJob
		rt    v1alpha1.ReplicaType
		index int
		want  []corev1.EnvVar
	}{
		{"collective worker 0 hosts the rendezvous", collective, worker, 0, append(append(
			env("PYTHONUNBUFFERED", "1", "PADDLE_JOB_ID", "resnet", "PADDLE_NNODES", "3"), podIP),
			env("PADDLE_MASTER", "$(POD_IP_DUMMY):37777")...)},
		{"collective worker 2", collective, worker, 2,
			env("PYTHONUNBUFFERED", "1", "PADDLE_JOB_ID", "resnet", "PADDLE_NNODES", "3", "PADDLE_MASTER", "resnet-worker-0:37777")},
		{"parameter-server master 0 hosts the rendezvous", ps, master, 0, append(append(
			env("PYTHONUNBUFFERED", "1", "PADDLE_JOB_ID", "ctr", "PADDLE_NNODES", "4"), podIP),
			env("PADDLE_MASTER", "$(POD_IP_DUMMY):36543", "PADDLE_SERVER_NUM", "1")...)},
		{"parameter-server master 1", ps, master, 1,
			env("PYTHONUNBUFFERED", "1", "PADDLE_JOB_ID", "ctr", "PADDLE_NNODES", "4", "PADDLE_MASTER", "ctr-master-0:36543", "PADDLE_SERVER_NUM", "1")},
		{"parameter-server worker 0 is a trainer", ps, worker, 0,
			env("PYTHONUNBUFFERED", "1", "PADDLE_JOB_ID", "ctr", "PADDLE_NNODES", "4", "PADDLE_MASTER", "ctr-master-0:36543", "PADDLE_TRAINER_NUM", "1")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := configured(t, tc.job, tc.rt, tc.index).Containers[0].Env
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("env (-want +got):\n%s", diff)
			}
		})
	}
}

// Like the operator, every container of the pod gets the variables, each
// its own copy of the field reference.
func TestPaddleEnvOnEveryContainer(t *testing.T) {
	job := operatorJob("resnet", testutil.Replicas{worker: 2}, func(j *v1alpha1.TrainJob) {
		spec := &j.Spec.ReplicaSpecs[worker].Template.Spec
		spec.Containers = append(spec.Containers, corev1.Container{Name: "sidecar", Image: "example.com/sidecar:1"})
	})
	spec := configured(t, job, worker, 0)
	if diff := cmp.Diff(spec.Containers[0].Env, spec.Containers[1].Env); diff != "" {
		t.Errorf("sidecar env differs (-paddle +sidecar):\n%s", diff)
	}
	if spec.Containers[0].Env[3].ValueFrom == spec.Containers[1].Env[3].ValueFrom {
		t.Error("the containers share one POD_IP_DUMMY source; each must own its copy")
	}
}

// Under the job-wide Service a TrainJob's Paddle replicas reach the host as
// <pod>.<job>.
func TestPaddleMasterFollowsTheServiceLayout(t *testing.T) {
	job := testutil.NewJob(paddle.Name, "resnet", "ml", testutil.Replicas{worker: 2})
	got := configured(t, job, worker, 1).Containers[0].Env
	if last := got[len(got)-1]; last.Name != "PADDLE_MASTER" || last.Value != "resnet-worker-0.resnet:36543" {
		t.Errorf("PADDLE_MASTER = %v, want resnet-worker-0.resnet:36543", last)
	}
}

// PaddleJob's defaults (paddlepaddle_defautls.go): one replica, restart
// policy OnFailure, the port "master" 36543 on the container "paddle".
func TestPaddleDefaults(t *testing.T) {
	job := operatorJob("resnet", testutil.Replicas{master: 1, worker: 2})
	for _, rt := range []v1alpha1.ReplicaType{master, worker} {
		spec := job.Spec.ReplicaSpecs[rt]
		if spec.RestartPolicy != v1alpha1.RestartPolicyOnFailure {
			t.Errorf("%s restartPolicy = %s, want OnFailure", rt, spec.RestartPolicy)
		}
		want := []corev1.ContainerPort{{Name: "master", ContainerPort: 36543}}
		if diff := cmp.Diff(want, spec.Template.Spec.Containers[0].Ports); diff != "" {
			t.Errorf("%s ports (-want +got):\n%s", rt, diff)
		}
	}
	if got := job.Spec.RunPolicy.FailurePolicy.Restart; got != v1alpha1.FailureRestartReplica {
		t.Errorf("parameter-server mode restarts %s, want Replica", got)
	}
	if got := operatorJob("resnet", testutil.Replicas{worker: 2}).Spec.RunPolicy.FailurePolicy.Restart; got != v1alpha1.FailureRestartJob {
		t.Errorf("collective mode restarts %s, want Job", got)
	}
}

// The PaddleJob controller's UpdateJobStatus: with a Master the job
// succeeds when every Master has (so does Master 0's log lead), otherwise
// when every Worker has.
func TestPaddleSuccessRule(t *testing.T) {
	ps := operatorJob("ctr", testutil.Replicas{master: 2, worker: 2})
	if diff := cmp.Diff(frameworks.SuccessRule{AllOf: []v1alpha1.ReplicaType{master}}, frameworks.SuccessRuleFor(ps)); diff != "" {
		t.Errorf("parameter-server rule (-want +got):\n%s", diff)
	}
	collective := operatorJob("resnet", testutil.Replicas{worker: 3})
	if diff := cmp.Diff(frameworks.SuccessRule{AllOf: []v1alpha1.ReplicaType{worker}}, frameworks.SuccessRuleFor(collective)); diff != "" {
		t.Errorf("collective rule (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]frameworks.ReplicaRef{{Type: master}}, frameworks.Leaders(ps)); diff != "" {
		t.Errorf("leaders (-want +got):\n%s", diff)
	}
}

// A Paddle job needs Workers, may run several Masters (servers), and
// takes no field of another framework; its errors name Paddle's terms.
func TestPaddleValidation(t *testing.T) {
	if errs := frameworks.Validate(operatorJob("ctr", testutil.Replicas{master: 3, worker: 2})); len(errs) != 0 {
		t.Errorf("three servers rejected: %v", errs)
	}
	cases := []struct {
		name string
		job  *v1alpha1.TrainJob
		want []string
	}{
		{"a Master alone", operatorJob("ctr", testutil.Replicas{master: 1}),
			[]string{"spec.replicaSpecs.Worker: Required value: paddle needs Workers: alone in collective mode, beside a Master in parameter-server mode"}},
		{"a parameter server", operatorJob("ctr", testutil.Replicas{"PS": 1, worker: 1}),
			[]string{`spec.replicaSpecs.PS: Unsupported value: "PS": supported values: "Master", "Worker"`}},
		{"PyTorch's nprocPerNode", operatorJob("ctr", testutil.Replicas{worker: 1}, func(j *v1alpha1.TrainJob) { four := "4"; j.Spec.NprocPerNode = &four }),
			[]string{"spec.nprocPerNode: Forbidden: only for framework pytorch"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, e := range frameworks.Validate(tc.job) {
				got = append(got, e.Error())
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

func decode(t *testing.T, file string) kubeflow.Object {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", file))
	if err != nil {
		t.Fatal(err)
	}
	obj := &paddle.PaddleJob{}
	if err := yaml.UnmarshalStrict(raw, obj); err != nil {
		t.Fatal(err)
	}
	return obj
}

// A PaddleJob converts with the operator's defaults; its elasticPolicy is
// left alone, as the operator's controller leaves it, and said so.
func TestPaddleJobConverts(t *testing.T) {
	for _, tc := range []struct {
		file         string
		wantTypes    []v1alpha1.ReplicaType
		wantRestarts map[v1alpha1.ReplicaType]v1alpha1.RestartPolicy
		wantWarnings []string
	}{
		{"paddlejob_collective.yaml", []v1alpha1.ReplicaType{worker},
			map[v1alpha1.ReplicaType]v1alpha1.RestartPolicy{worker: v1alpha1.RestartPolicyOnFailure},
			[]string{
				"metadata.labels team are put on no replica, as the Training Operator puts a job's labels on none of its pods; labels the pods need go in the pod templates",
				"spec.runPolicy.cleanPodPolicy is unset: replicas still running when the step ends are deleted (Running), where the operator's default None would keep them until the job object is deleted; in a workflow nothing deletes one",
			}},
		{"paddlejob_ps.yaml", []v1alpha1.ReplicaType{master, worker},
			map[v1alpha1.ReplicaType]v1alpha1.RestartPolicy{master: v1alpha1.RestartPolicyOnFailure, worker: v1alpha1.RestartPolicyExitCode},
			[]string{"spec.elasticPolicy is ignored, as Training Operator v1.9's PaddleJob controller ignores it: the replicas run as written"}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			job, warnings, err := decode(t, tc.file).ToTrainJob()
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.wantWarnings, warnings); diff != "" {
				t.Errorf("warnings (-want +got):\n%s", diff)
			}
			frameworks.SetDefaults(job)
			if errs := frameworks.Validate(job); len(errs) != 0 {
				t.Fatalf("converted job invalid: %v", errs)
			}
			if job.Spec.Framework != paddle.Name || job.Spec.ServiceLayout != v1alpha1.ServiceLayoutPerReplica {
				t.Errorf("framework %s, layout %s; want paddle under the operator's PerReplica layout", job.Spec.Framework, job.Spec.ServiceLayout)
			}
			if diff := cmp.Diff(tc.wantTypes, frameworks.SortedReplicaTypes(job)); diff != "" {
				t.Errorf("types (-want +got):\n%s", diff)
			}
			for rt, want := range tc.wantRestarts {
				if got := job.Spec.ReplicaSpecs[rt].RestartPolicy; got != want {
					t.Errorf("%s restartPolicy = %s, want %s", rt, got, want)
				}
			}
		})
	}
}

// peers stands in for the local backend: every replica listens on
// 127.0.0.1 at a port of its own.
type peers struct{ ports map[framework.ReplicaRef]int }

func (p peers) Address(addr string) (string, bool) {
	if addr == "resnet-worker-0:36543" {
		return "127.0.0.1:40000", true
	}
	return addr, false
}
func (p peers) Port(r framework.ReplicaRef) int { return p.ports[r] }
func (p peers) PortOfHosts(string) (int, int, bool) {
	return 0, 0, false
}

// On one machine the rendezvous host's own address, its pod IP at the
// framework's port, becomes 127.0.0.1 at its local port; the others name
// it by its Service, which the local backend points at that port.
func TestPaddleLocalMasterIsTheHostsOwnPort(t *testing.T) {
	p := peers{ports: map[framework.ReplicaRef]int{{Type: worker, Index: 0}: 40000, {Type: worker, Index: 1}: 40001}}
	self := framework.ReplicaRef{Type: worker, Index: 0}
	got, handled, warning := paddle.Framework{}.LocalValue("PADDLE_MASTER", "127.0.0.1:36543", self, nil, p)
	if !handled || got != "127.0.0.1:40000" || warning != "" {
		t.Errorf("host's PADDLE_MASTER = %q (handled %v, warning %q), want 127.0.0.1:40000", got, handled, warning)
	}
	if _, handled, _ := (paddle.Framework{}).LocalValue("PADDLE_MASTER", "resnet-worker-0:36543", framework.ReplicaRef{Type: worker, Index: 1}, nil, p); handled {
		t.Error("a peer's PADDLE_MASTER names the host's Service: the local backend's to rewrite")
	}
	if _, handled, _ := (paddle.Framework{}).LocalValue("PADDLE_NNODES", "2", self, nil, p); handled {
		t.Error("PADDLE_NNODES is no address")
	}
}
