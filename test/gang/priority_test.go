package gang_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/gang"
	"github.com/trainstep/trainstep/pkg/result"
	"github.com/trainstep/trainstep/test/cluster"
)

func priorityClass(t *testing.T, c *cluster.Cluster, name string, value int32) {
	t.Helper()
	_, err := c.Client.SchedulingV1().PriorityClasses().Create(context.Background(),
		&schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Value: value}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.Client.SchedulingV1().PriorityClasses().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
}

func TestHigherPriorityJobPreemptsAndTheLowerJobRecreatesItsReplicas(t *testing.T) {
	c := cluster.Get(t)
	ns := c.Namespace(t)
	addPool(t, c, "prio", 1, 4)
	priorityClass(t, c, "gang-test-low", 100)
	priorityClass(t, c, "gang-test-high", 1000)

	low := startRun(t, c, ns, gpuJob("low", "prio", 4, &v1alpha1.SchedulingPolicy{PriorityClass: "gang-test-low"}))
	eventually(t, time.Minute, "4 running pods of the low job", func() bool { return countPods(jobPods(t, c, ns, "low"), running) == 4 })
	high := startRun(t, c, ns, gpuJob("high", "prio", 2, &v1alpha1.SchedulingPolicy{PriorityClass: "gang-test-high"}))
	eventually(t, time.Minute, "2 running pods of the high job", func() bool { return countPods(jobPods(t, c, ns, "high"), running) == 2 })
	for _, p := range jobPods(t, c, ns, "high") {
		if p.Spec.PriorityClassName != "gang-test-high" || p.Spec.Priority == nil || *p.Spec.Priority != 1000 {
			t.Errorf("%s priority %v/%s", p.Name, p.Spec.Priority, p.Spec.PriorityClassName)
		}
	}
	// The preempted replicas come back (attempt 1, or later when a
	// replacement was itself preempted) and wait for room.
	eventually(t, time.Minute, "the low job's replacements", func() bool {
		pods := jobPods(t, c, ns, "low")
		return countPods(pods, func(p *corev1.Pod) bool { return p.Labels[v1alpha1.LabelAttempt] != "0" && !bound(p) }) == 2 &&
			countPods(pods, running) == 2
	})
	exitAll(t, c, ns, "high")
	if res := high.wait(t); res.Phase != result.PhaseSucceeded {
		t.Fatalf("high ended %s: %s", res.Phase, res.Message)
	}
	eventually(t, time.Minute, "4 running pods of the low job again", func() bool { return countPods(jobPods(t, c, ns, "low"), running) == 4 })
	exitAll(t, c, ns, "low")
	res := low.wait(t)
	// Every preempted replica counts toward backoffLimit: at least the two
	// the high job needed room for.
	if res.Phase != result.PhaseSucceeded || res.Restarts < 2 {
		t.Errorf("low ended %s with %d restarts (want Succeeded, at least 2): %s", res.Phase, res.Restarts, res.Message)
	}
	// Every pod the scheduler preempted is one restart. (A replacement still
	// pending can be removed too while the scheduler makes room; that is
	// counted as well, so the count may be higher.)
	events, err := c.Client.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{FieldSelector: "reason=Preempted"})
	if err != nil {
		t.Fatal(err)
	}
	preempted := map[string]bool{}
	for _, e := range events.Items {
		if strings.HasPrefix(e.InvolvedObject.Name, "low-") {
			preempted[string(e.InvolvedObject.UID)] = true
		}
	}
	t.Logf("low job: %d restarts, %d of its pods preempted", res.Restarts, len(preempted))
	if int(res.Restarts) < len(preempted) {
		t.Errorf("low counted %d restarts for %d preempted pods", res.Restarts, len(preempted))
	}
}

func TestKueueKeysAndPodsDeletedFromOutsideAreRecreated(t *testing.T) {
	c := cluster.Get(t)
	ns := c.Namespace(t)
	addPool(t, c, "kueue", 1, 4)
	r := startRun(t, c, ns, gpuJob("queued", "kueue", 3, &v1alpha1.SchedulingPolicy{Gang: v1alpha1.GangKueue, Queue: "team-a"}))
	eventually(t, time.Minute, "3 running pods", func() bool { return countPods(jobPods(t, c, ns, "queued"), running) == 3 })
	for _, p := range jobPods(t, c, ns, "queued") {
		// sigs.k8s.io/kueue pkg/controller/jobs/pod: QueueNameLabel, GroupNameLabel, GroupTotalCountAnnotation.
		if p.Labels["kueue.x-k8s.io/queue-name"] != "team-a" || p.Labels["kueue.x-k8s.io/pod-group-name"] != "queued" ||
			p.Annotations["kueue.x-k8s.io/pod-group-total-count"] != "3" {
			t.Errorf("%s labels %v annotations %v", p.Name, p.Labels, p.Annotations)
		}
	}
	// Kueue preempts a pod group by deleting its pods; trainstep must bring them back.
	victim := "queued-worker-1"
	if err := c.Client.CoreV1().Pods(ns).Delete(context.Background(), victim, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, "the deleted pod recreated and running", func() bool {
		p, err := c.Client.CoreV1().Pods(ns).Get(context.Background(), victim, metav1.GetOptions{})
		return err == nil && p.Labels[v1alpha1.LabelAttempt] == "1" && running(p) &&
			p.Labels[gang.KueuePodGroupLabel] == "queued" && p.Labels[gang.KueueQueueLabel] == "team-a"
	})
	exitAll(t, c, ns, "queued")
	if res := r.wait(t); res.Phase != result.PhaseSucceeded || res.Restarts != 1 {
		t.Errorf("ended %s with %d restarts, want Succeeded with 1: %s", res.Phase, res.Restarts, res.Message)
	}
}
