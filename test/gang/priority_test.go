package gang_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/trainstep/trainstep/internal/testutil"
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

// A higher-priority job preempts part of a running lower one: the lower
// job, which restarts as a whole, stops every replica and starts its next
// attempt, which waits for room and runs once the higher one ended. With
// the default failure rules a preemption is not the job's fault and costs
// no restart; with the rules removed, it counts.
func TestHigherPriorityJobPreemptsAndTheLowerJobRestartsAsAWhole(t *testing.T) {
	c := cluster.Get(t)
	priorityClass(t, c, "gang-test-low", 100)
	priorityClass(t, c, "gang-test-high", 1000)
	for _, tc := range []struct {
		name    string
		noRules bool
	}{{"default rules", false}, {"rules removed", true}} {
		t.Run(tc.name, func(t *testing.T) {
			ns := c.Namespace(t)
			pool := "prio-" + map[bool]string{false: "a", true: "b"}[tc.noRules]
			addPool(t, c, pool, 1, 4)
			lowJob := gpuJob("low", pool, 4, &v1alpha1.SchedulingPolicy{PriorityClass: "gang-test-low"})
			if tc.noRules {
				lowJob.Spec.RunPolicy.FailurePolicy = &v1alpha1.FailurePolicy{Rules: []v1alpha1.FailurePolicyRule{}}
			}
			low := startRun(t, c, ns, lowJob)
			testutil.Eventually(t, time.Minute, "4 running pods of the low job", func() bool { return countPods(jobPods(t, c, ns, "low"), running) == 4 })
			high := startRun(t, c, ns, gpuJob("high", pool, 2, &v1alpha1.SchedulingPolicy{PriorityClass: "gang-test-high"}))
			testutil.Eventually(t, time.Minute, "2 running pods of the high job", func() bool { return countPods(jobPods(t, c, ns, "high"), running) == 2 })
			for _, p := range jobPods(t, c, ns, "high") {
				if p.Spec.PriorityClassName != "gang-test-high" || p.Spec.Priority == nil || *p.Spec.Priority != 1000 {
					t.Errorf("%s priority %v/%s", p.Name, p.Spec.Priority, p.Spec.PriorityClassName)
				}
			}
			// Every replica of the low job is recreated at a later job
			// attempt; two of them wait for room.
			testutil.Eventually(t, time.Minute, "the low job's next attempt", func() bool {
				pods := jobPods(t, c, ns, "low")
				return len(pods) == 4 && countPods(pods, func(p *corev1.Pod) bool { return p.Labels[v1alpha1.LabelJobAttempt] == "0" }) == 0 &&
					countPods(pods, running) == 2
			})
			exitAll(t, c, ns, "high")
			if res := high.wait(t); res.Phase != result.PhaseSucceeded {
				t.Fatalf("high ended %s: %s", res.Phase, res.Message)
			}
			testutil.Eventually(t, time.Minute, "4 running pods of the low job again", func() bool { return countPods(jobPods(t, c, ns, "low"), running) == 4 })
			exitAll(t, c, ns, "low")
			res := low.wait(t)
			preempted, again := preemptions(t, c, ns, "low")
			t.Logf("low job: %d restarts, %d of its pods preempted, %d preempted again by name", res.Restarts, preempted, again)
			if preempted == 0 {
				t.Error("no pod of the low job was preempted: the test did not do what it claims")
			}
			switch {
			case res.Phase != result.PhaseSucceeded:
				t.Errorf("low ended %s/%s: %s", res.Phase, res.Reason, res.Message)
			case !tc.noRules && res.Restarts > int32(again):
				t.Errorf("low counted %d restarts for a preemption, want 0 under the default rule (%d pods preempted again by name)", res.Restarts, again)
			case tc.noRules && res.Restarts < 1:
				t.Errorf("low counted %d restarts with the rules removed, want at least 1", res.Restarts)
			}
		})
	}
}

func TestKueueKeysAndPodsDeletedFromOutsideAreRecreated(t *testing.T) {
	c := cluster.Get(t)
	ns := c.Namespace(t)
	addPool(t, c, "kueue", 1, 4)
	r := startRun(t, c, ns, gpuJob("queued", "kueue", 3, &v1alpha1.SchedulingPolicy{Gang: v1alpha1.GangKueue, Queue: "team-a"}))
	testutil.Eventually(t, time.Minute, "3 running pods", func() bool { return countPods(jobPods(t, c, ns, "queued"), running) == 3 })
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
	// A pod removed without a disruption condition is a counted failure; the
	// job restarts as a whole, every pod at job attempt 1, in that attempt's
	// pod group.
	testutil.Eventually(t, time.Minute, "the job's pods recreated at its next attempt and running", func() bool {
		pods := jobPods(t, c, ns, "queued")
		for i := range pods {
			p := &pods[i]
			if p.Labels[v1alpha1.LabelJobAttempt] != "1" || !running(p) ||
				p.Labels[gang.KueuePodGroupLabel] != "queued.1" || p.Labels[gang.KueueQueueLabel] != "team-a" {
				return false
			}
		}
		return len(pods) == 3
	})
	exitAll(t, c, ns, "queued")
	if res := r.wait(t); res.Phase != result.PhaseSucceeded || res.Restarts != 1 {
		t.Errorf("ended %s with %d restarts, want Succeeded with 1: %s", res.Phase, res.Restarts, res.Message)
	}
}
