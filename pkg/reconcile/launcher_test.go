package reconcile

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/tools/record"

	"github.com/trainstep/trainstep/internal/testutil"
	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/frameworks"
	"github.com/trainstep/trainstep/pkg/policy"
	"github.com/trainstep/trainstep/pkg/render"
	"github.com/trainstep/trainstep/pkg/result"
)

func mpiJob(creation v1alpha1.LauncherCreationPolicy) *v1alpha1.TrainJob {
	two, one := int32(2), int32(1)
	container := corev1.PodSpec{Containers: []corev1.Container{{Name: "mpi", Image: "mpi:1"}}}
	job := &v1alpha1.TrainJob{
		ObjectMeta: metav1.ObjectMeta{Name: "pi", Namespace: ns},
		Spec: v1alpha1.TrainJobSpec{Framework: v1alpha1.FrameworkMPI, LauncherCreationPolicy: creation,
			ReplicaSpecs: map[v1alpha1.ReplicaType]*v1alpha1.ReplicaSpec{
				v1alpha1.ReplicaTypeLauncher: {Replicas: &one, RestartPolicy: v1alpha1.RestartPolicyOnFailure, Template: corev1.PodTemplateSpec{Spec: container}},
				v1alpha1.ReplicaTypeWorker:   {Replicas: &two, RestartPolicy: v1alpha1.RestartPolicyNever, Template: corev1.PodTemplateSpec{Spec: container}},
			},
			// These tests follow the launcher alone through its restarts.
			RunPolicy: v1alpha1.RunPolicy{FailurePolicy: &v1alpha1.FailurePolicy{Restart: v1alpha1.FailureRestartReplica}}},
	}
	frameworks.SetDefaults(job)
	return job
}

// setReady plays the kubelet for an MPI replica: running, with its Ready
// condition as given.
func (h *harness) setReady(name string, phase corev1.PodPhase, ready bool) {
	h.t.Helper()
	pod := h.pod(name).DeepCopy()
	pod.Status.Phase = phase
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "mpi", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}, Ready: ready}}
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: status}}
	if _, err := h.client.CoreV1().Pods(ns).UpdateStatus(context.Background(), pod, metav1.UpdateOptions{}); err != nil {
		h.t.Fatal(err)
	}
}

// podCreates counts the creates of pod name the fake client received.
func (h *harness) podCreates(name string) int {
	n := 0
	for _, a := range h.client.Actions() {
		if a.GetVerb() == "create" && a.GetResource().Resource == "pods" && a.GetNamespace() == ns {
			if obj, ok := a.(interface{ GetObject() runtime.Object }); ok {
				if m, ok := obj.GetObject().(metav1.Object); ok && m.GetName() == name {
					n++
				}
			}
		}
	}
	return n
}

// progressLines hands the controller's progress lines to the test in the
// order they were reported.
func progressLines(o *Options) <-chan string {
	lines := make(chan string, 256)
	o.OnProgress = func(p Progress) { lines <- p.String() }
	return lines
}

// waitProgress reads progress lines until one contains every part, and
// returns the lines read. A sync reports progress after its creates were
// sent: a create that sync made is among the client's actions by then.
func waitProgress(t *testing.T, lines <-chan string, parts ...string) []string {
	t.Helper()
	var seen []string
	timeout := time.After(waitTimeout)
	for {
		select {
		case l := <-lines:
			seen = append(seen, l)
			if containsAll(l, parts) {
				return seen
			}
		case <-timeout:
			t.Fatalf("no progress line with %q within %s; lines:\n%s", parts, waitTimeout, strings.Join(seen, "\n"))
			return nil
		}
	}
}

func containsAll(s string, parts []string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}

// With WaitForWorkersReady the launcher is not created while a worker is
// Pending or Running but not Ready; it is once both are Ready, and the
// progress line says what it waits for meanwhile. Each step waits for the
// progress line of the sync that saw it: had that sync created the
// launcher, the create would have been sent before the line.
func TestLauncherWaitsForEveryWorkerReady(t *testing.T) {
	var progress <-chan string
	h := startWith(t, mpiJob(v1alpha1.LauncherCreationWaitForWorkersReady), func(_ *harness, o *Options) {
		progress = progressLines(o)
	})
	noLauncherYet := func(when string) {
		t.Helper()
		if n := h.podCreates("pi-launcher-0"); n != 0 {
			t.Fatalf("launcher created %d times while %s", n, when)
		}
		if st := h.stage("pi-launcher-0"); st != stageAbsent {
			t.Fatalf("launcher stage %s while %s, want absent", st, when)
		}
	}
	steps := []struct {
		change func()
		// line is what the progress line of the sync that saw the change
		// shows.
		line []string
		when string
	}{
		{func() { h.setReady("pi-worker-0", corev1.PodRunning, false) },
			[]string{"worker 1/2 running", "launcher waits for workers Ready (0/2)"}, "worker-0 runs but is not Ready and worker-1 is Pending"},
		{func() { h.setReady("pi-worker-1", corev1.PodRunning, false) },
			[]string{"worker 2/2 running", "launcher waits for workers Ready (0/2)"}, "both workers run but neither is Ready"},
		{func() { h.setReady("pi-worker-0", corev1.PodRunning, true) },
			[]string{"worker 2/2 running", "launcher waits for workers Ready (1/2)"}, "worker-1 runs but is not Ready"},
	}
	lines := waitProgress(t, progress, "worker 0/2 running", "launcher waits for workers Ready (0/2)")
	h.pod("pi-worker-0")
	h.pod("pi-worker-1")
	noLauncherYet("both workers are Pending")
	for _, step := range steps {
		step.change()
		lines = append(lines, waitProgress(t, progress, step.line...)...)
		noLauncherYet(step.when)
	}
	h.setReady("pi-worker-1", corev1.PodRunning, true)
	h.pod("pi-launcher-0")
	lines = append(lines, waitProgress(t, progress, "launcher 0/1 running", "worker 2/2 running")...)
	if last := lines[len(lines)-1]; strings.Contains(last, "waits") {
		t.Errorf("once the launcher was created the progress line still shows it waiting: %s", last)
	}
	if n := h.podCreates("pi-launcher-0"); n != 1 {
		t.Errorf("launcher created %d times, want 1", n)
	}
}

// AtStartup (the default) creates the launcher with the workers.
func TestLauncherAtStartupIsCreatedWithTheWorkers(t *testing.T) {
	h := start(t, mpiJob(""))
	if got := h.ctrl.opts.Job.Spec.LauncherCreationPolicy; got != v1alpha1.LauncherCreationAtStartup {
		t.Fatalf("default launcherCreationPolicy %q", got)
	}
	h.pod("pi-worker-0")
	h.pod("pi-worker-1")
	h.pod("pi-launcher-0")
}

// Once created, the launcher is handled as with AtStartup: a failure is
// recreated at once even while a worker is not Ready, the job's restarts
// count it, and an event says when the workers released it.
func TestLauncherRestartDoesNotWaitAgain(t *testing.T) {
	recorder := record.NewFakeRecorder(50)
	job := mpiJob(v1alpha1.LauncherCreationWaitForWorkersReady)
	limit := int32(3)
	job.Spec.RunPolicy.BackoffLimit = &limit
	h := startWith(t, job, func(_ *harness, o *Options) {
		o.Recorder, o.EventObject = recorder, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "step", Namespace: ns}}
	})
	h.setReady("pi-worker-0", corev1.PodRunning, true)
	h.setReady("pi-worker-1", corev1.PodRunning, true)
	h.pod("pi-launcher-0")
	h.setReady("pi-worker-1", corev1.PodRunning, false)
	h.setStatus("pi-launcher-0", corev1.PodFailed, 1)
	testutil.Eventually(h.t, waitTimeout, "the launcher recreated", func() bool { return h.podCreates("pi-launcher-0") == 2 })
	found := false
	for len(recorder.Events) > 0 {
		if e := <-recorder.Events; strings.Contains(e, EventWorkersReady) {
			found = true
		}
	}
	if !found {
		t.Errorf("no %s event", EventWorkersReady)
	}
}

// A step retry that finds the workers of the attempt before it but no
// launcher adopts the workers and creates the launcher once they are
// Ready; a running launcher it finds is adopted, and when it then fails it
// is recreated without waiting for the (not Ready) workers.
func TestLauncherAfterAdoption(t *testing.T) {
	for _, tc := range []struct {
		name         string
		withLauncher bool
		// firstLine is what the first sync reports, after any create it made.
		firstLine []string
	}{
		{"workers only", false, []string{"launcher 0/1 running", "worker 2/2 running", "launcher waits for workers Ready (0/2)"}},
		{"workers and launcher", true, []string{"launcher 1/1 running", "worker 2/2 running"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			job := mpiJob(v1alpha1.LauncherCreationWaitForWorkersReady)
			limit := int32(3)
			job.Spec.RunPolicy.BackoffLimit = &limit
			var progress <-chan string
			h := startWith(t, job, func(h *harness, o *Options) {
				progress = progressLines(o)
				renderer, err := render.NewRenderer(job, render.Identity{Namespace: ns, JobName: job.Name, OwnerID: testOwnerID})
				if err != nil {
					t.Fatal(err)
				}
				for _, id := range policy.Desired(job) {
					if id.Type == v1alpha1.ReplicaTypeLauncher && !tc.withLauncher {
						continue
					}
					pod, err := renderer.Pod(id.Type, id.Index, 0)
					if err != nil {
						t.Fatal(err)
					}
					pod.UID = uuid.NewUUID()
					pod.Status.Phase = corev1.PodRunning
					// Not Ready: an adopted launcher must not wait for them.
					pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse}}
					if err := h.client.Tracker().Create(corev1.SchemeGroupVersion.WithResource("pods"), pod, ns); err != nil {
						t.Fatal(err)
					}
				}
			})
			waitProgress(t, progress, tc.firstLine...)
			if n := h.podCreates("pi-worker-0") + h.podCreates("pi-worker-1"); n != 0 {
				t.Errorf("created %d workers, want both adopted", n)
			}
			if tc.withLauncher {
				if st := h.stage("pi-launcher-0"); st != stageObserved {
					t.Errorf("launcher stage %s, want observed (adopted)", st)
				}
				if n := h.podCreates("pi-launcher-0"); n != 0 {
					t.Errorf("launcher created %d times, want it adopted", n)
				}
				h.setStatus("pi-launcher-0", corev1.PodFailed, 1)
				testutil.Eventually(h.t, waitTimeout, "the adopted launcher recreated", func() bool { return h.podCreates("pi-launcher-0") == 1 })
				return
			}
			if n := h.podCreates("pi-launcher-0"); n != 0 {
				t.Fatalf("launcher created %d times before the adopted workers are Ready", n)
			}
			h.setReady("pi-worker-0", corev1.PodRunning, true)
			h.setReady("pi-worker-1", corev1.PodRunning, true)
			h.pod("pi-launcher-0")
		})
	}
}

// Workers that cannot be scheduled end the job at the pending timeout as
// with AtStartup, the launcher never created: waiting for them does not
// hang the job, and the cleanup removes the workers with no launcher to
// find.
func TestLauncherHeldByUnschedulableWorkersEndsAtThePendingTimeout(t *testing.T) {
	h := startWith(t, mpiJob(v1alpha1.LauncherCreationWaitForWorkersReady), func(_ *harness, o *Options) {
		o.Timeouts.Pending = 300 * time.Millisecond
	})
	for _, name := range []string{"pi-worker-0", "pi-worker-1"} {
		pod := h.pod(name).DeepCopy()
		pod.CreationTimestamp = metav1.Now() // the fake API server sets none
		pod.Status.Phase = corev1.PodPending
		pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable}}
		if _, err := h.client.CoreV1().Pods(ns).UpdateStatus(context.Background(), pod, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if d := h.decision(); d.Outcome != policy.OutcomeTransient || d.Reason != result.ReasonPendingTimeout {
		t.Fatalf("decision %+v, want Transient PendingTimeout", d)
	}
	if n := h.podCreates("pi-launcher-0"); n != 0 {
		t.Errorf("launcher created %d times, want 0", n)
	}
	left, err := h.ctrl.Cleanup(context.Background(), true, true)
	if err != nil || len(left) != 0 {
		t.Fatalf("cleanup: left %v, err %v", left, err)
	}
	pods, err := h.client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil || len(pods.Items) != 0 {
		t.Errorf("after cleanup: %d pods (err %v), want none", len(pods.Items), err)
	}
}
