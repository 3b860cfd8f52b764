package render_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/frameworks"
	"github.com/trainstep/trainstep/pkg/frameworks/tensorflow"
	"github.com/trainstep/trainstep/pkg/render"
	"github.com/trainstep/trainstep/pkg/spec"
)

// Under the per-job layout, every framework's job has one headless Service
// named after the job, selecting all its pods and publishing not-ready
// addresses, and every pod is "<pod>.<job>": hostname its name, subdomain
// the job. A Renderer renders no Service per replica.
func TestRenderPerJobLayout(t *testing.T) {
	elastic := func(j *v1alpha1.TrainJob) {
		j.Spec.ElasticPolicy = &v1alpha1.ElasticPolicy{MinReplicas: ptr(int32(1)), MaxReplicas: ptr(int32(3))}
	}
	cases := []struct {
		name     string
		job      *v1alpha1.TrainJob
		wantPods []string
	}{
		{"tensorflow", newJob(v1alpha1.FrameworkTensorFlow, "tf", replicas{ps: 1, worker: 2}), []string{"tf-ps-0", "tf-worker-0", "tf-worker-1"}},
		{"pytorch", newJob(v1alpha1.FrameworkPyTorch, "tf", replicas{master: 1, worker: 1}), []string{"tf-master-0", "tf-worker-0"}},
		{"pytorch elastic, a pod per slot", newJob(v1alpha1.FrameworkPyTorch, "tf", replicas{worker: 1}, elastic), []string{"tf-worker-0", "tf-worker-1", "tf-worker-2"}},
		{"jax", newJob(v1alpha1.FrameworkJAX, "tf", replicas{worker: 2}), []string{"tf-worker-0", "tf-worker-1"}},
		{"xgboost", newJob(v1alpha1.FrameworkXGBoost, "tf", replicas{master: 1, worker: 1}), []string{"tf-master-0", "tf-worker-0"}},
		{"mpi", newJob(v1alpha1.FrameworkMPI, "tf", replicas{launcher: 1, worker: 1}), []string{"tf-launcher-0", "tf-worker-0"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.job.Spec.ServiceLayout; got != v1alpha1.ServiceLayoutPerJob {
				t.Fatalf("a TrainJob's default layout is %q, want PerJob", got)
			}
			objs, err := render.Render(tc.job, identity("ns", "tf"), testKeys)
			if err != nil {
				t.Fatalf("Render: %v", err)
			}
			labels := map[string]string{"trainstep.dev/job-name": "tf", "workflows.argoproj.io/workflow": "wf-1"}
			if tc.job.Spec.Framework == v1alpha1.FrameworkMPI {
				labels["app"] = "tf"
			}
			want := []*corev1.Service{{
				TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
				ObjectMeta: metav1.ObjectMeta{Name: "tf", Namespace: "ns", Labels: labels, OwnerReferences: controllerRef()},
				Spec: corev1.ServiceSpec{
					ClusterIP:                "None",
					Selector:                 map[string]string{"trainstep.dev/job-name": "tf"},
					PublishNotReadyAddresses: true,
				},
			}}
			if diff := cmp.Diff(want, objs.Services); diff != "" {
				t.Errorf("services (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantPods, podNames(objs)); diff != "" {
				t.Errorf("pods (-want +got):\n%s", diff)
			}
			for _, pod := range objs.Pods {
				if pod.Spec.Hostname != pod.Name || pod.Spec.Subdomain != "tf" {
					t.Errorf("pod %s: hostname %q subdomain %q, want %q and %q", pod.Name, pod.Spec.Hostname, pod.Spec.Subdomain, pod.Name, "tf")
				}
			}
			r, err := render.NewRenderer(tc.job, identity("ns", "tf"))
			if err != nil {
				t.Fatal(err)
			}
			ref := r.Replicas()[0]
			if svc, err := r.Service(ref.Type, ref.Index); svc != nil || err != nil {
				t.Errorf("Service(%s) = %v, %v; want no Service per replica", ref, svc, err)
			}
		})
	}
}

// A template's own hostname and subdomain give way to the job's Service
// under the per-job layout, and are kept under the per-replica layout.
func TestRenderTemplateHostname(t *testing.T) {
	own := func(j *v1alpha1.TrainJob) {
		j.Spec.ReplicaSpecs[worker].Template.Spec.Hostname = "mine"
		j.Spec.ReplicaSpecs[worker].Template.Spec.Subdomain = "elsewhere"
	}
	for _, tc := range []struct {
		name                    string
		job                     *v1alpha1.TrainJob
		wantHost, wantSubdomain string
	}{
		{"per job", newJob(v1alpha1.FrameworkJAX, "jx", replicas{worker: 1}, own), "jx-worker-0", "jx"},
		{"per replica", newJob(v1alpha1.FrameworkJAX, "jx", replicas{worker: 1}, own, perReplica), "mine", "elsewhere"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod, err := render.Pod(tc.job, identity("ns", "jx"), worker, 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			if pod.Spec.Hostname != tc.wantHost || pod.Spec.Subdomain != tc.wantSubdomain {
				t.Errorf("hostname %q subdomain %q, want %q and %q", pod.Spec.Hostname, pod.Spec.Subdomain, tc.wantHost, tc.wantSubdomain)
			}
		})
	}
}

// A Kubeflow TFJob keeps the Training Operator's layout and env unless it
// opts in, in the manifest or with --set spec.serviceLayout=PerJob; an
// MPIJob has the job-wide Service either way and refuses PerReplica.
func TestKubeflowManifestsOptInToThePerJobLayout(t *testing.T) {
	tfjob, err := os.ReadFile(filepath.Join("..", "frameworks", "testdata", "tfjob_dist_mnist.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name         string
		sets         []string
		wantServices int
		wantAddress  string
	}{
		{"operator's layout", nil, 4, "dist-mnist-for-e2e-test-worker-0.kubeflow.svc:2222"},
		{"opted in", []string{"spec.serviceLayout=PerJob"}, 1, "dist-mnist-for-e2e-test-worker-0.dist-mnist-for-e2e-test:2222"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			job, _, err := spec.Load(tfjob, spec.Options{Sets: tc.sets})
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			objs, err := render.Render(job, identity("kubeflow", job.Name), render.Inputs{})
			if err != nil {
				t.Fatalf("Render: %v", err)
			}
			if len(objs.Services) != tc.wantServices {
				t.Errorf("got %d Services (%v), want %d", len(objs.Services), serviceNames(objs), tc.wantServices)
			}
			config, err := tensorflow.TFConfig(job, frameworks.Placement{JobName: job.Name, Namespace: "kubeflow"}, frameworks.ReplicaRef{Type: worker, Index: 0})
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(config, `"`+tc.wantAddress+`"`) {
				t.Errorf("TF_CONFIG %s does not list %s", config, tc.wantAddress)
			}
		})
	}
	mpijob, err := os.ReadFile(filepath.Join("..", "frameworks", "testdata", "mpijob_pi.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	job, _, err := spec.Load(mpijob, spec.Options{})
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if job.Spec.ServiceLayout != v1alpha1.ServiceLayoutPerJob {
		t.Errorf("MPIJob layout %q, want PerJob", job.Spec.ServiceLayout)
	}
	_, _, err = spec.Load(mpijob, spec.Options{Sets: []string{"spec.serviceLayout=PerReplica"}})
	if err == nil || !strings.Contains(err.Error(), "spec.serviceLayout") {
		t.Errorf("MPIJob with PerReplica: error %v, want one naming spec.serviceLayout", err)
	}
}
