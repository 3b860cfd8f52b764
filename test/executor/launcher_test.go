package executor_test

import (
	"context"
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

// watchPodEvents records, in the API server's order, every add of the
// job's pods and whether each pod was Ready.
func watchPodEvents(w watch.Interface) (stop func() []podEvent) {
	var mu sync.Mutex
	var events []podEvent
	done := make(chan struct{})
	go func() {
		defer close(done)
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
			mu.Lock()
			events = append(events, podEvent{name: pod.Name, added: ev.Type == watch.Added, ready: ready && pod.Status.Phase == corev1.PodRunning})
			mu.Unlock()
		}
	}()
	return func() []podEvent {
		w.Stop()
		<-done
		mu.Lock()
		defer mu.Unlock()
		return events
	}
}

// With launcherCreationPolicy WaitForWorkersReady the launcher pod is
// created only after every worker pod is Running and Ready: while one
// worker is held Pending (its container waiting), no launcher exists; the
// launcher's create comes after the last worker's Ready in the API
// server's order, and the job then succeeds with no restart.
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
	stop := watchPodEvents(w)

	wait := startJob(t, c, ns, job.yaml(t))
	release := func(pod string) {
		t.Helper()
		patch := []byte(`{"metadata":{"annotations":{"` + waitReason + `":null}}}`)
		if _, err := c.Client.CoreV1().Pods(ns).Patch(context.Background(), pod, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatalf("releasing %s: %v", pod, err)
		}
	}
	launcherExists := func() bool {
		_, err := c.Client.CoreV1().Pods(ns).Get(context.Background(), "mpiwait-launcher-0", metav1.GetOptions{})
		return err == nil
	}
	testutil.Eventually(t, time.Minute, "both workers created", func() (bool, error) {
		pods := livePods(t, c, ns, "mpiwait")
		_, w0 := pods["mpiwait-worker-0"]
		_, w1 := pods["mpiwait-worker-1"]
		return w0 && w1, nil
	})
	time.Sleep(2 * time.Second)
	if launcherExists() {
		t.Fatal("the launcher was created while both workers were Pending")
	}
	release("mpiwait-worker-0")
	testutil.Eventually(t, time.Minute, "worker-0 Ready", func() (bool, error) {
		p, err := c.Client.CoreV1().Pods(ns).Get(context.Background(), "mpiwait-worker-0", metav1.GetOptions{})
		return err == nil && p.Status.Phase == corev1.PodRunning, err
	})
	time.Sleep(2 * time.Second)
	if launcherExists() {
		t.Fatal("the launcher was created while worker-1 was Pending")
	}
	release("mpiwait-worker-1")
	out := wait()
	events := stop()

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
