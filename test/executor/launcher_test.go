package executor_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/trainstep/trainstep/internal/testutil"
	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/result"
	"github.com/trainstep/trainstep/test/cluster"
)

// podEvent is one change of a pod as the API server ordered it.
type podEvent struct {
	name  string
	added bool
	ready bool
}

// podWatch records, in the API server's order, every add of the job's
// pods and whether each pod was Ready.
type podWatch struct {
	w      watch.Interface
	mu     sync.Mutex
	events []podEvent
	done   chan struct{}
}

func watchPodEvents(w watch.Interface) *podWatch {
	p := &podWatch{w: w, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		for ev := range w.ResultChan() {
			pod, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			ready := false
			for _, c := range pod.Status.Conditions {
				if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
					ready = true
				}
			}
			p.mu.Lock()
			p.events = append(p.events, podEvent{name: pod.Name, added: ev.Type == watch.Added, ready: ready && pod.Status.Phase == corev1.PodRunning})
			p.mu.Unlock()
		}
	}()
	return p
}

// seen returns the events so far.
func (p *podWatch) seen() []podEvent {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.events)
}

// stop ends the watch and returns every event.
func (p *podWatch) stop() []podEvent {
	p.w.Stop()
	<-p.done
	return p.seen()
}

func added(events []podEvent, name string) bool {
	return slices.ContainsFunc(events, func(e podEvent) bool { return e.added && e.name == name })
}

// With launcherCreationPolicy WaitForWorkersReady the launcher pod is
// created only after every worker pod is Running and Ready: while one
// worker is held Pending (its container waiting), no launcher exists; the
// launcher's create comes after the last worker's Ready in the API
// server's order, and the job then succeeds with no restart. A worker is
// released only once trainstep's progress line shows it saw the state
// before: had trainstep created the launcher then, the create would have
// come before that line.
func TestMPILauncherWaitsForEveryWorkerReady(t *testing.T) {
	t.Parallel()
	c := cluster.Get(t)
	ns := c.Namespace(t)
	held := map[string]string{waitReason: "ContainerCreating"}
	job := newJob("mpiwait", v1alpha1.FrameworkMPI).replicas(launcher, 1, exitsAfter("2s", 0)).replicas(worker, 2, held).
		with(func(j *v1alpha1.TrainJob) {
			j.Spec.LauncherCreationPolicy = v1alpha1.LauncherCreationWaitForWorkersReady
			zero := int32(0)
			j.Spec.RunPolicy.BackoffLimit = &zero
		})
	w, err := c.Client.CoreV1().Pods(ns).Watch(context.Background(), metav1.ListOptions{LabelSelector: v1alpha1.LabelJobName + "=mpiwait"})
	if err != nil {
		t.Fatal(err)
	}
	pods := watchPodEvents(w)
	log, record := recordLog()

	wait := startJob(t, c, ns, job.yaml(t), record)
	release := func(pod string) {
		t.Helper()
		patch := []byte(`{"metadata":{"annotations":{"` + waitReason + `":null}}}`)
		if _, err := c.Client.CoreV1().Pods(ns).Patch(context.Background(), pod, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatalf("releasing %s: %v", pod, err)
		}
	}
	// heldWhile waits for the progress line of the sync that saw the
	// workers as the test set them, failing at once if the launcher shows
	// up before. That sync's creates were sent before its line: a GET then
	// sees them.
	heldWhile := func(from int, when string, line ...string) int {
		t.Helper()
		next := -1
		testutil.Eventually(t, time.Minute, "trainstep to show the launcher held while "+when, func() bool {
			if added(pods.seen(), "mpiwait-launcher-0") {
				t.Fatalf("the launcher was created while %s", when)
			}
			next = log.find(from, line...)
			return next >= 0
		}, func() string { return "lines logged: " + log.messages(from) })
		if _, err := c.Client.CoreV1().Pods(ns).Get(context.Background(), "mpiwait-launcher-0", metav1.GetOptions{}); err == nil {
			t.Fatalf("the launcher was created while %s", when)
		}
		return next
	}
	at := heldWhile(0, "both workers were Pending", "worker 0/2 running", "launcher waits for workers Ready (0/2)")
	release("mpiwait-worker-0")
	heldWhile(at, "worker-1 was Pending", "worker 1/2 running", "launcher waits for workers Ready (1/2)")
	release("mpiwait-worker-1")
	out := wait()
	events := pods.stop()

	if out.res.Phase != result.PhaseSucceeded || out.output(t, "restarts") != "0" {
		t.Fatalf("phase %s (%s), restarts %s; stderr:\n%s", out.res.Phase, out.res.Message, out.output(t, "restarts"), out.stderr)
	}
	lastWorkerReady, launcherAdded := -1, -1
	readySeen := map[string]bool{}
	for i, e := range events {
		switch {
		case e.name == "mpiwait-launcher-0" && e.added && launcherAdded < 0:
			launcherAdded = i
		case e.name != "mpiwait-launcher-0" && e.ready && !readySeen[e.name]:
			readySeen[e.name] = true
			lastWorkerReady = i
		}
	}
	if len(readySeen) != 2 || launcherAdded < 0 || launcherAdded < lastWorkerReady {
		t.Errorf("watch order: workers Ready %v (last at event %d), launcher added at event %d; want the launcher after both workers Ready\n%+v",
			readySeen, lastWorkerReady, launcherAdded, events)
	}
}
