package render_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/render"
)

// The whole pod of one TensorFlow worker, written out by hand.
func TestRenderTensorFlowPod(t *testing.T) {
	job := newJob(v1alpha1.FrameworkTensorFlow, "mnist", replicas{ps: 1, worker: 2}, func(j *v1alpha1.TrainJob) {
		tmpl := &j.Spec.ReplicaSpecs[worker].Template
		tmpl.Labels = map[string]string{"team": "vision", v1alpha1.LabelReplicaIndex: "spoofed"}
		tmpl.Annotations = map[string]string{"note": "kept"}
	})
	objs, err := render.Render(job, identity("team-a", "mnist"), render.Inputs{})
	if err != nil {
		t.Fatalf("Render: %v", err)
	}
	want := &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{
			Name:      "mnist-worker-1",
			Namespace: "team-a",
			Labels: map[string]string{
				"team":                           "vision",
				"trainstep.dev/job-name":         "mnist",
				"trainstep.dev/replica-type":     "worker",
				"trainstep.dev/replica-index":    "1",
				"trainstep.dev/attempt":          "0",
				"workflows.argoproj.io/workflow": "wf-1",
			},
			Annotations:     map[string]string{"note": "kept", "trainstep.dev/framework": "tensorflow"},
			OwnerReferences: controllerRef(),
		},
		Spec: corev1.PodSpec{
			RestartPolicy:                corev1.RestartPolicyNever,
			AutomountServiceAccountToken: ptr(false),
			// A TrainJob's default layout: the job's Service as subdomain.
			Hostname:  "mnist-worker-1",
			Subdomain: "mnist",
			Containers: []corev1.Container{{
				Name:  "tensorflow",
				Image: "example.com/train:1",
				Ports: []corev1.ContainerPort{{Name: "tfjob-port", ContainerPort: 2222}},
				Env: []corev1.EnvVar{
					{Name: "TRAINSTEP_TF_CLUSTER", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
						LocalObjectReference: corev1.LocalObjectReference{Name: "mnist-tf-cluster"}, Key: "cluster"}}},
					{Name: "TF_CONFIG", Value: `{"cluster":$(TRAINSTEP_TF_CLUSTER),"task":{"type":"worker","index":1},"environment":"cloud"}`},
					{Name: "TRAINSTEP_JOB_NAME", Value: "mnist"},
					{Name: "TRAINSTEP_REPLICA_TYPE", Value: "worker"},
					{Name: "TRAINSTEP_REPLICA_INDEX", Value: "1"},
					{Name: "TRAINSTEP_TERMINATION_MESSAGE_PATH", Value: "/dev/termination-log"},
					fromPodEnv("TRAINSTEP_JOB_ATTEMPT", "metadata.labels['trainstep.dev/job-attempt']"),
					fromPodEnv("TRAINSTEP_RESTART_REASON", "metadata.annotations['trainstep.dev/restart-reason']"),
				},
			}},
		},
	}
	if diff := cmp.Diff(want, objs.Pods[2]); diff != "" {
		t.Errorf("worker 1 pod (-want +got):\n%s", diff)
	}
}

// DESIGN's Service contract, per replica: named like the pod, headless,
// publishing not-ready addresses, selecting only that replica.
func TestRenderTensorFlowServices(t *testing.T) {
	job := newJob(v1alpha1.FrameworkTensorFlow, "mnist", replicas{ps: 1, worker: 2}, perReplica)
	objs, err := render.Render(job, identity("team-a", "mnist"), render.Inputs{})
	if err != nil {
		t.Fatalf("Render: %v", err)
	}
	if diff := cmp.Diff([]string{"mnist-ps-0", "mnist-worker-0", "mnist-worker-1"}, serviceNames(objs)); diff != "" {
		t.Errorf("service names (-want +got):\n%s", diff)
	}
	want := &corev1.Service{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{
			Name:      "mnist-worker-1",
			Namespace: "team-a",
			Labels: map[string]string{
				"trainstep.dev/job-name":         "mnist",
				"trainstep.dev/replica-type":     "worker",
				"trainstep.dev/replica-index":    "1",
				"workflows.argoproj.io/workflow": "wf-1",
			},
			OwnerReferences: controllerRef(),
		},
		Spec: corev1.ServiceSpec{
			ClusterIP: "None",
			Selector: map[string]string{
				"trainstep.dev/job-name":      "mnist",
				"trainstep.dev/replica-type":  "worker",
				"trainstep.dev/replica-index": "1",
			},
			Ports:                    []corev1.ServicePort{{Name: "tfjob-port", Port: 2222, TargetPort: intstr.FromInt32(2222)}},
			PublishNotReadyAddresses: true,
		},
	}
	if diff := cmp.Diff(want, objs.Services[2]); diff != "" {
		t.Errorf("worker 1 service (-want +got):\n%s", diff)
	}
	if len(objs.Secrets) != 0 {
		t.Errorf("TensorFlow job rendered %d Secrets, want none", len(objs.Secrets))
	}
	// TF_CONFIG's cluster, once for the whole job.
	immutable := true
	wantCM := &corev1.ConfigMap{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{
			Name:            "mnist-tf-cluster",
			Namespace:       "team-a",
			Labels:          map[string]string{"trainstep.dev/job-name": "mnist", "workflows.argoproj.io/workflow": "wf-1"},
			OwnerReferences: controllerRef(),
		},
		Immutable: &immutable,
		Data:      map[string]string{"cluster": `{"ps":["mnist-ps-0.team-a.svc:2222"],"worker":["mnist-worker-0.team-a.svc:2222","mnist-worker-1.team-a.svc:2222"]}`},
	}
	if len(objs.ConfigMaps) != 1 {
		t.Fatalf("TensorFlow job rendered %d ConfigMaps, want its cluster's", len(objs.ConfigMaps))
	}
	if diff := cmp.Diff(wantCM, objs.ConfigMaps[0]); diff != "" {
		t.Errorf("cluster ConfigMap (-want +got):\n%s", diff)
	}
}

// Under the per-replica layout each framework exposes its port (default or
// declared) on every replica's Service, and the names in its env are those
// Services.
func TestRenderServicePorts(t *testing.T) {
	withPort := func(rt v1alpha1.ReplicaType, name string, port int32) func(*v1alpha1.TrainJob) {
		return func(j *v1alpha1.TrainJob) {
			c := &j.Spec.ReplicaSpecs[rt].Template.Spec.Containers[0]
			c.Ports = append(c.Ports, corev1.ContainerPort{Name: name, ContainerPort: port})
		}
	}
	cases := []struct {
		name      string
		job       *v1alpha1.TrainJob
		wantNames []string
		wantPorts [][]corev1.ServicePort
	}{
		{
			name:      "pytorch defaults",
			job:       newJob(v1alpha1.FrameworkPyTorch, "pt", replicas{master: 1, worker: 1}, perReplica),
			wantNames: []string{"pt-master-0", "pt-worker-0"},
			wantPorts: [][]corev1.ServicePort{{{Name: "pytorchjob-port", Port: 23456, TargetPort: intstr.FromInt32(23456)}}, {{Name: "pytorchjob-port", Port: 23456, TargetPort: intstr.FromInt32(23456)}}},
		},
		{
			name:      "jax custom port plus a metrics port",
			job:       newJob(v1alpha1.FrameworkJAX, "jx", replicas{worker: 1}, withPort(worker, "metrics", 9090), withPort(worker, "jaxjob-port", 1234), perReplica),
			wantNames: []string{"jx-worker-0"},
			wantPorts: [][]corev1.ServicePort{{{Name: "metrics", Port: 9090, TargetPort: intstr.FromInt32(9090)}, {Name: "jaxjob-port", Port: 1234, TargetPort: intstr.FromInt32(1234)}}},
		},
		{
			name:      "xgboost",
			job:       newJob(v1alpha1.FrameworkXGBoost, "xg", replicas{master: 1, worker: 1}, perReplica),
			wantNames: []string{"xg-master-0", "xg-worker-0"},
			wantPorts: [][]corev1.ServicePort{{{Name: "xgboostjob-port", Port: 9999, TargetPort: intstr.FromInt32(9999)}}, {{Name: "xgboostjob-port", Port: 9999, TargetPort: intstr.FromInt32(9999)}}},
		},
		{
			name:      "tensorflow chief, evaluator",
			job:       newJob(v1alpha1.FrameworkTensorFlow, "tf", replicas{chief: 1, evaluator: 1}, perReplica),
			wantNames: []string{"tf-chief-0", "tf-evaluator-0"},
			wantPorts: [][]corev1.ServicePort{{{Name: "tfjob-port", Port: 2222, TargetPort: intstr.FromInt32(2222)}}, {{Name: "tfjob-port", Port: 2222, TargetPort: intstr.FromInt32(2222)}}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			objs, err := render.Render(tc.job, identity("ns", tc.job.Name), render.Inputs{})
			if err != nil {
				t.Fatalf("Render: %v", err)
			}
			if diff := cmp.Diff(tc.wantNames, serviceNames(objs)); diff != "" {
				t.Errorf("service names (-want +got):\n%s", diff)
			}
			var ports [][]corev1.ServicePort
			for _, s := range objs.Services {
				ports = append(ports, s.Spec.Ports)
			}
			if diff := cmp.Diff(tc.wantPorts, ports); diff != "" {
				t.Errorf("service ports (-want +got):\n%s", diff)
			}
		})
	}
}

// MPI: one job-wide Service, the hostfile ConfigMap and the SSH Secret,
// labelled app: <job> as MPI Operator v2 labels them (mpi_job_controller.go
// newJobService, newConfigMap, newSSHAuthSecret), and pods whose
// hostname.subdomain is the name the hostfile lists.
func TestRenderMPI(t *testing.T) {
	job := newJob(v1alpha1.FrameworkMPI, "pi", replicas{launcher: 1, worker: 2})
	objs, err := render.Render(job, identity("hpc", "pi"), testKeys)
	if err != nil {
		t.Fatalf("Render: %v", err)
	}
	wantService := &corev1.Service{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{
			Name:            "pi",
			Namespace:       "hpc",
			Labels:          map[string]string{"app": "pi", "trainstep.dev/job-name": "pi", "workflows.argoproj.io/workflow": "wf-1"},
			OwnerReferences: controllerRef(),
		},
		Spec: corev1.ServiceSpec{
			ClusterIP:                "None",
			Selector:                 map[string]string{"trainstep.dev/job-name": "pi"},
			PublishNotReadyAddresses: true,
		},
	}
	if diff := cmp.Diff([]*corev1.Service{wantService}, objs.Services); diff != "" {
		t.Errorf("services (-want +got):\n%s", diff)
	}
	jobMeta := func(name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{
			Name:            name,
			Namespace:       "hpc",
			Labels:          map[string]string{"app": "pi", "trainstep.dev/job-name": "pi", "workflows.argoproj.io/workflow": "wf-1"},
			OwnerReferences: controllerRef(),
		}
	}
	wantSecret := &corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: jobMeta("pi-ssh"),
		Type:       corev1.SecretTypeSSHAuth,
		Data:       map[string][]byte{"ssh-privatekey": testKeys.SSHPrivateKey, "ssh-publickey": testKeys.SSHPublicKey},
	}
	if diff := cmp.Diff([]*corev1.Secret{wantSecret}, objs.Secrets); diff != "" {
		t.Errorf("secrets (-want +got):\n%s", diff)
	}
	if len(objs.ConfigMaps) != 1 {
		t.Fatalf("got %d ConfigMaps, want 1", len(objs.ConfigMaps))
	}
	if diff := cmp.Diff(jobMeta("pi-config"), objs.ConfigMaps[0].ObjectMeta); diff != "" {
		t.Errorf("ConfigMap metadata (-want +got):\n%s", diff)
	}
	hostfile := objs.ConfigMaps[0].Data["hostfile"]
	for _, pod := range objs.Pods {
		fqdn := pod.Spec.Hostname + "." + pod.Spec.Subdomain + ".hpc.svc"
		if pod.Spec.Hostname != pod.Name || pod.Spec.Subdomain != "pi" {
			t.Errorf("pod %s: hostname %q subdomain %q, want %q and %q", pod.Name, pod.Spec.Hostname, pod.Spec.Subdomain, pod.Name, "pi")
		}
		isWorker := pod.Labels[v1alpha1.LabelReplicaType] == "worker"
		if listed := strings.Contains(hostfile, fqdn+" slots=1\n"); listed != isWorker {
			t.Errorf("pod %s: listed in hostfile = %v, want %v (hostfile %q)", pod.Name, listed, isWorker, hostfile)
		}
	}
	if diff := cmp.Diff([]string{"pi-launcher-0", "pi-worker-0", "pi-worker-1"}, podNames(objs)); diff != "" {
		t.Errorf("pod names (-want +got):\n%s", diff)
	}
	// The operator's pods carry its training.kubeflow.org labels, not app.
	for _, pod := range objs.Pods {
		if v, ok := pod.Labels["app"]; ok {
			t.Errorf("pod %s is labelled app=%s; MPI Operator v2 labels no pod so", pod.Name, v)
		}
	}
}

// Only MPI's job-wide objects get app: <job>; neither the Training
// Operator's per-replica Services nor a PodGroup carry it.
func TestRenderAppLabelOnlyOnMPIJobWideObjects(t *testing.T) {
	gang := withGang(v1alpha1.SchedulingPolicy{Gang: v1alpha1.GangVolcano})
	for _, job := range []*v1alpha1.TrainJob{
		newJob(v1alpha1.FrameworkTensorFlow, "mnist", replicas{ps: 1, worker: 2}, gang),
		newJob(v1alpha1.FrameworkMPI, "pi", replicas{launcher: 1, worker: 2}, gang),
	} {
		objs, err := render.Render(job, identity("ns", job.Name), testKeys)
		if err != nil {
			t.Fatalf("Render %s: %v", job.Name, err)
		}
		if objs.PodGroup == nil {
			t.Fatalf("%s: no PodGroup", job.Name)
		}
		if v, ok := objs.PodGroup.GetLabels()["app"]; ok {
			t.Errorf("%s PodGroup labelled app=%s", job.Name, v)
		}
		for _, svc := range objs.Services {
			_, ok := svc.Labels["app"]
			if want := job.Spec.Framework == v1alpha1.FrameworkMPI; ok != want {
				t.Errorf("Service %s labelled app: %v, want %v", svc.Name, ok, want)
			}
		}
	}
}

func TestRenderMPIRequiresKeys(t *testing.T) {
	job := newJob(v1alpha1.FrameworkMPI, "pi", replicas{launcher: 1, worker: 1})
	if _, err := render.Render(job, identity("hpc", "pi"), render.Inputs{}); err == nil {
		t.Fatal("Render of an MPI job without SSH keys succeeded, want an error")
	}
}

// Every object carries the job-name and extra labels and the owner, so
// `argo logs -l` finds them and the garbage collector removes them.
func TestRenderLabelsAndOwnerOnEveryObject(t *testing.T) {
	for _, job := range everyFramework() {
		t.Run(string(job.Spec.Framework), func(t *testing.T) {
			objs, err := render.Render(job, identity("ns", job.Name), testKeys)
			if err != nil {
				t.Fatalf("Render: %v", err)
			}
			for _, obj := range objs.List() {
				meta, err := metaOf(obj)
				if err != nil {
					t.Fatal(err)
				}
				if got := meta.GetLabels()[v1alpha1.LabelJobName]; got != job.Name {
					t.Errorf("%s: job-name label = %q, want %q", meta.GetName(), got, job.Name)
				}
				if got := meta.GetLabels()[v1alpha1.LabelWorkflow]; got != "wf-1" {
					t.Errorf("%s: workflow label = %q, want wf-1", meta.GetName(), got)
				}
				if diff := cmp.Diff(controllerRef(), meta.GetOwnerReferences()); diff != "" {
					t.Errorf("%s: owner references (-want +got):\n%s", meta.GetName(), diff)
				}
			}
		})
	}
}

func TestRenderWithoutOwner(t *testing.T) {
	job := newJob(v1alpha1.FrameworkPyTorch, "pt", replicas{master: 1})
	objs, err := render.Render(job, render.Identity{Namespace: "ns", JobName: "pt"}, render.Inputs{})
	if err != nil {
		t.Fatalf("Render: %v", err)
	}
	for _, obj := range objs.List() {
		meta, _ := metaOf(obj)
		if refs := meta.GetOwnerReferences(); len(refs) != 0 {
			t.Errorf("%s has owner references %v, want none", meta.GetName(), refs)
		}
	}
}

// List returns Secrets, ConfigMaps, Services, then Pods.
func TestObjectsListOrder(t *testing.T) {
	job := newJob(v1alpha1.FrameworkMPI, "pi", replicas{launcher: 1, worker: 1})
	objs, err := render.Render(job, identity("hpc", "pi"), testKeys)
	if err != nil {
		t.Fatalf("Render: %v", err)
	}
	var kinds []string
	for _, obj := range objs.List() {
		kinds = append(kinds, obj.GetObjectKind().GroupVersionKind().Kind)
	}
	want := []string{"Secret", "ConfigMap", "Service", "Pod", "Pod"}
	if diff := cmp.Diff(want, kinds); diff != "" {
		t.Errorf("kinds in List order (-want +got):\n%s", diff)
	}
}

// Rendering the same input gives the same bytes, however Go orders maps.
func TestRenderIsDeterministic(t *testing.T) {
	for _, job := range everyFramework() {
		t.Run(string(job.Spec.Framework), func(t *testing.T) {
			first := renderJSON(t, job)
			for i := 0; i < 20; i++ {
				if again := renderJSON(t, job); again != first {
					t.Fatalf("render %d differs from the first:\n%s\n----\n%s", i+2, first, again)
				}
			}
		})
	}
}

func renderJSON(t *testing.T, job *v1alpha1.TrainJob) string {
	t.Helper()
	objs, err := render.Render(job, identity("ns", job.Name), testKeys)
	if err != nil {
		t.Fatalf("Render: %v", err)
	}
	data, err := json.Marshal(objs.List())
	if err != nil {
		t.Fatalf("encoding: %v", err)
	}
	return string(data)
}

// everyFramework returns a multi-type job of each framework.
func everyFramework() []*v1alpha1.TrainJob {
	return []*v1alpha1.TrainJob{
		newJob(v1alpha1.FrameworkTensorFlow, "tf", replicas{chief: 1, ps: 2, worker: 3, evaluator: 1}),
		newJob(v1alpha1.FrameworkPyTorch, "pt", replicas{master: 1, worker: 3}),
		newJob(v1alpha1.FrameworkMPI, "mpi", replicas{launcher: 1, worker: 3}),
		newJob(v1alpha1.FrameworkJAX, "jax", replicas{worker: 3}),
		newJob(v1alpha1.FrameworkXGBoost, "xgb", replicas{master: 1, worker: 3}),
	}
}

func serviceNames(objs *render.Objects) []string {
	var names []string
	for _, s := range objs.Services {
		names = append(names, s.Name)
	}
	return names
}

func podNames(objs *render.Objects) []string {
	var names []string
	for _, p := range objs.Pods {
		names = append(names, p.Name)
	}
	return names
}
