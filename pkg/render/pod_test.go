package render_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/render"
)

func metaOf(obj runtime.Object) (metav1.Object, error) { return meta.Accessor(obj) }

// Kubeflow's ExitCode is decided by trainstep, so the kubelet must never
// restart such a pod; the other policies are the kubelet's own — unless
// the job restarts as a whole, where trainstep restarts every replica
// together and no container restarts in place.
func TestPodRestartPolicy(t *testing.T) {
	cases := []struct {
		replica v1alpha1.RestartPolicy
		restart v1alpha1.FailureRestart
		want    corev1.RestartPolicy
	}{
		{v1alpha1.RestartPolicyExitCode, v1alpha1.FailureRestartReplica, corev1.RestartPolicyNever},
		{v1alpha1.RestartPolicyNever, v1alpha1.FailureRestartReplica, corev1.RestartPolicyNever},
		{v1alpha1.RestartPolicyOnFailure, v1alpha1.FailureRestartReplica, corev1.RestartPolicyOnFailure},
		{v1alpha1.RestartPolicyAlways, v1alpha1.FailureRestartReplica, corev1.RestartPolicyAlways},
		{v1alpha1.RestartPolicyOnFailure, v1alpha1.FailureRestartJob, corev1.RestartPolicyNever},
		{v1alpha1.RestartPolicyAlways, v1alpha1.FailureRestartJob, corev1.RestartPolicyNever},
	}
	for _, tc := range cases {
		t.Run(string(tc.replica)+" restart "+string(tc.restart), func(t *testing.T) {
			job := newJob(v1alpha1.FrameworkPyTorch, "pt", replicas{worker: 1}, func(j *v1alpha1.TrainJob) {
				j.Spec.ReplicaSpecs[worker].RestartPolicy = tc.replica
				j.Spec.ReplicaSpecs[worker].Template.Spec.RestartPolicy = corev1.RestartPolicyAlways
				j.Spec.RunPolicy.FailurePolicy = &v1alpha1.FailurePolicy{Restart: tc.restart}
			})
			pod, err := render.Pod(job, identity("ns", "pt"), worker, 0, 0)
			if err != nil {
				t.Fatalf("Pod: %v", err)
			}
			if pod.Spec.RestartPolicy != tc.want {
				t.Errorf("restartPolicy = %q, want %q", pod.Spec.RestartPolicy, tc.want)
			}
		})
	}
}

func TestPodPriorityClass(t *testing.T) {
	job := newJob(v1alpha1.FrameworkJAX, "jx", replicas{worker: 2}, func(j *v1alpha1.TrainJob) {
		j.Spec.RunPolicy.SchedulingPolicy = &v1alpha1.SchedulingPolicy{PriorityClass: "high"}
	})
	objs, err := render.Render(job, identity("ns", "jx"), render.Inputs{})
	if err != nil {
		t.Fatalf("Render: %v", err)
	}
	for _, pod := range objs.Pods {
		if pod.Spec.PriorityClassName != "high" {
			t.Errorf("%s: priorityClassName = %q, want high", pod.Name, pod.Spec.PriorityClassName)
		}
	}
}

// A recreated replica keeps its name and counts its attempt.
func TestPodRecreation(t *testing.T) {
	job := newJob(v1alpha1.FrameworkTensorFlow, "mnist", replicas{ps: 1, worker: 2})
	id := identity("team-a", "mnist")
	first, err := render.Pod(job, id, worker, 1, 0)
	if err != nil {
		t.Fatalf("Pod attempt 0: %v", err)
	}
	again, err := render.Pod(job, id, worker, 1, 3)
	if err != nil {
		t.Fatalf("Pod attempt 3: %v", err)
	}
	if again.Name != "mnist-worker-1" || again.Name != first.Name {
		t.Errorf("names %q and %q, want mnist-worker-1 for both", first.Name, again.Name)
	}
	if got := again.Labels[v1alpha1.LabelAttempt]; got != "3" {
		t.Errorf("attempt label = %q, want 3", got)
	}
	again.Labels[v1alpha1.LabelAttempt] = "0"
	if diff := cmp.Diff(first, again); diff != "" {
		t.Errorf("recreated pod differs beyond its attempt (-first +again):\n%s", diff)
	}
}

func TestPodErrors(t *testing.T) {
	job := newJob(v1alpha1.FrameworkTensorFlow, "mnist", replicas{worker: 2})
	id := identity("ns", "mnist")
	cases := []struct {
		name  string
		rt    v1alpha1.ReplicaType
		index int
	}{
		{"index past the replicas", worker, 2},
		{"negative index", worker, -1},
		{"type the job lacks", ps, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if pod, err := render.Pod(job, id, tc.rt, tc.index, 0); err == nil {
				t.Errorf("Pod(%s, %d) = %s, want an error", tc.rt, tc.index, pod.Name)
			}
		})
	}
}

// Every framework's main container tells the script who it is; sidecars
// get nothing from trainstep.
func TestTrainstepEnvOnMainContainer(t *testing.T) {
	job := newJob(v1alpha1.FrameworkTensorFlow, "mnist", replicas{ps: 1}, func(j *v1alpha1.TrainJob) {
		spec := &j.Spec.ReplicaSpecs[ps].Template.Spec
		spec.Containers = append([]corev1.Container{{Name: "proxy", Image: "example.com/proxy:1"}}, spec.Containers...)
	})
	pod, err := render.Pod(job, identity("ns", "mnist"), ps, 0, 0)
	if err != nil {
		t.Fatalf("Pod: %v", err)
	}
	if len(pod.Spec.Containers[0].Env) != 0 {
		t.Errorf("sidecar env = %v, want none", pod.Spec.Containers[0].Env)
	}
	want := []corev1.EnvVar{
		{Name: "TRAINSTEP_JOB_NAME", Value: "mnist"},
		{Name: "TRAINSTEP_REPLICA_TYPE", Value: "ps"},
		{Name: "TRAINSTEP_REPLICA_INDEX", Value: "0"},
		{Name: "TRAINSTEP_TERMINATION_MESSAGE_PATH", Value: "/dev/termination-log"},
		fromPodEnv("TRAINSTEP_JOB_ATTEMPT", "metadata.labels['trainstep.dev/job-attempt']"),
		fromPodEnv("TRAINSTEP_RESTART_REASON", "metadata.annotations['trainstep.dev/restart-reason']"),
	}
	if diff := cmp.Diff(want, pod.Spec.Containers[1].Env); diff != "" {
		t.Errorf("main container env of a single-replica job (-want +got):\n%s", diff)
	}
}

// The variable a local process writes its metrics to names the container's
// own terminationMessagePath in a cluster, so one script works on both.
func TestTerminationMessagePathEnvFollowsTheContainer(t *testing.T) {
	job := newJob(v1alpha1.FrameworkTensorFlow, "mnist", replicas{ps: 1}, func(j *v1alpha1.TrainJob) {
		j.Spec.ReplicaSpecs[ps].Template.Spec.Containers[0].TerminationMessagePath = "/tmp/metrics.json"
	})
	pod, err := render.Pod(job, identity("ns", "mnist"), ps, 0, 0)
	if err != nil {
		t.Fatalf("Pod: %v", err)
	}
	main := pod.Spec.Containers[0]
	found := false
	for _, v := range main.Env {
		found = found || v.Name == "TRAINSTEP_TERMINATION_MESSAGE_PATH" && v.Value == "/tmp/metrics.json"
	}
	if !found {
		t.Errorf("env %v, want TRAINSTEP_TERMINATION_MESSAGE_PATH=/tmp/metrics.json", main.Env)
	}
}

// Rendering must not change the job it was given.
func TestRenderLeavesJobUnchanged(t *testing.T) {
	for _, job := range everyFramework() {
		t.Run(string(job.Spec.Framework), func(t *testing.T) {
			before := job.DeepCopy()
			if _, err := render.Render(job, identity("ns", job.Name), testKeys); err != nil {
				t.Fatalf("Render: %v", err)
			}
			if diff := cmp.Diff(before, job); diff != "" {
				t.Errorf("job changed by Render (-before +after):\n%s", diff)
			}
		})
	}
}

func TestNamesAndSelectors(t *testing.T) {
	if got := render.PodName("mnist", evaluator, 0); got != "mnist-evaluator-0" {
		t.Errorf("PodName = %q, want mnist-evaluator-0", got)
	}
	want := map[string]string{"trainstep.dev/job-name": "mnist", "trainstep.dev/replica-type": "ps", "trainstep.dev/replica-index": "4"}
	if diff := cmp.Diff(want, render.ReplicaLabels(render.Identity{JobName: "mnist"}, ps, 4)); diff != "" {
		t.Errorf("ReplicaLabels (-want +got):\n%s", diff)
	}
	id := render.Identity{JobName: "mnist", OwnerID: "a1b2"}
	want["trainstep.dev/identity"] = "a1b2"
	if diff := cmp.Diff(want, render.ReplicaLabels(id, ps, 4)); diff != "" {
		t.Errorf("ReplicaLabels with an identity (-want +got):\n%s", diff)
	}
	sel := render.JobSelector(id)
	if !sel.Matches(labels.Set{"trainstep.dev/job-name": "mnist", "trainstep.dev/identity": "a1b2", "trainstep.dev/replica-type": "worker"}) {
		t.Error("JobSelector does not match a replica of the job")
	}
	for _, other := range []labels.Set{
		{"trainstep.dev/job-name": "other", "trainstep.dev/identity": "a1b2"},
		{"trainstep.dev/job-name": "mnist"},
		{"trainstep.dev/job-name": "mnist", "trainstep.dev/identity": "c3d4"},
	} {
		if sel.Matches(other) {
			t.Errorf("JobSelector matches %v, not the job's", other)
		}
	}
}

// A replica mounts no ServiceAccount token unless its template asks: the
// training code has no business with the API server.
func TestPodServiceAccountToken(t *testing.T) {
	for _, tc := range []struct {
		name     string
		template *bool
		want     bool
	}{
		{"unset", nil, false},
		{"asked for", ptr(true), true},
		{"refused", ptr(false), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			job := newJob(v1alpha1.FrameworkTensorFlow, "mnist", replicas{worker: 1})
			job.Spec.ReplicaSpecs[v1alpha1.ReplicaTypeWorker].Template.Spec.AutomountServiceAccountToken = tc.template
			pod, err := render.Pod(job, identity("team-a", "mnist"), v1alpha1.ReplicaTypeWorker, 0, 0)
			if err != nil {
				t.Fatalf("Pod: %v", err)
			}
			got := pod.Spec.AutomountServiceAccountToken
			if got == nil || *got != tc.want {
				t.Errorf("automountServiceAccountToken = %v, want %v", got, tc.want)
			}
		})
	}
}

// fromPodEnv is an env var the downward API reads from the pod.
func fromPodEnv(name, fieldPath string) corev1.EnvVar {
	return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: fieldPath}}}
}
