package gang_test

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/trainstep/trainstep/internal/testutil"
	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/result"
	"github.com/trainstep/trainstep/test/cluster"
)

// Two nodes with room for 8 one-GPU replicas; two jobs of 6 replicas each.
const (
	deadlockNodes, deadlockGPUs, deadlockReplicas = 2, 4, 6
)

func TestWithoutGangTwoJobsDeadlockEachOther(t *testing.T) {
	c := cluster.Get(t)
	ns := c.Namespace(t)
	addPool(t, c, "nogang", deadlockNodes, deadlockGPUs)
	a := startRun(t, c, ns, gpuJob("job-a", "nogang", deadlockReplicas, nil), slowCreates)
	b := startRun(t, c, ns, gpuJob("job-b", "nogang", deadlockReplicas, nil), slowCreates)

	// The deadlock is there once the scheduler has placed 8 pods and found
	// no room for the other 4: nothing more can happen, the nodes are full.
	var boundA, boundB int
	testutil.Eventually(t, time.Minute, "8 bound pods across both jobs and the other 4 unschedulable", func() bool {
		podsA, podsB := jobPods(t, c, ns, "job-a"), jobPods(t, c, ns, "job-b")
		boundA, boundB = countPods(podsA, bound), countPods(podsB, bound)
		return boundA+boundB == 8 && countPods(podsA, unschedulable)+countPods(podsB, unschedulable) == 2*deadlockReplicas-8
	})
	t.Logf("snapshot without gang: job-a %d/6 bound, job-b %d/6 bound", boundA, boundB)
	if boundA >= deadlockReplicas || boundB >= deadlockReplicas {
		t.Fatalf("one job got all its pods (a=%d, b=%d): the creates did not interleave", boundA, boundB)
	}
	a.terminate()
	b.terminate()
	if res := a.wait(t); res.Phase != result.PhaseTerminated {
		t.Errorf("job-a ended %s (%s)", res.Phase, res.Message)
	}
	b.wait(t)
}

func TestBuiltinGangStartsOneJobAllTogetherThenTheOther(t *testing.T) {
	c := cluster.Get(t)
	ns := c.Namespace(t)
	addPool(t, c, "builtin", deadlockNodes, deadlockGPUs)
	const timeout = 6
	policy := func() *v1alpha1.SchedulingPolicy {
		return &v1alpha1.SchedulingPolicy{Gang: v1alpha1.GangBuiltin, ScheduleTimeoutSeconds: ptr.To[int32](timeout), MaxScheduleAttempts: ptr.To[int32](10)}
	}
	jobs := []string{"job-a", "job-b"}
	runs := map[string]*run{
		"job-a": startRun(t, c, ns, gpuJob("job-a", "builtin", deadlockReplicas, policy()), slowCreates),
		"job-b": startRun(t, c, ns, gpuJob("job-b", "builtin", deadlockReplicas, policy()), slowCreates),
	}
	holds := &holdTracker{since: map[string]time.Time{}, longest: map[string]time.Duration{}}
	var order []string
	deadline := time.Now().Add(3 * time.Minute)
	for len(order) < 2 && time.Now().Before(deadline) {
		now := time.Now()
		for _, job := range jobs {
			pods := jobPods(t, c, ns, job)
			n := countPods(pods, bound)
			holds.observe(job, n, deadlockReplicas, now)
			// Admitted by the step too: a sixth bind seen here may reach the
			// step's cache only after its gang's timeout, and that attempt
			// is released and followed by another.
			admitted := runs[job].log.FilterMessage("gang admitted").Len() > 0
			if n == deadlockReplicas && countPods(pods, running) == deadlockReplicas && admitted && !contains(order, job) {
				t.Logf("%s has all %d pods bound: %s", job, n, names(pods))
				order = append(order, job)
				other := jobs[0]
				if other == job {
					other = jobs[1]
				}
				if len(order) == 1 && countPods(jobPods(t, c, ns, other), bound) == deadlockReplicas {
					t.Fatalf("both jobs bound together on room for 8")
				}
				exitAll(t, c, ns, job)
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	if len(order) != 2 {
		t.Fatalf("only %v got all their pods bound", order)
	}
	for _, job := range jobs {
		res := runs[job].wait(t)
		if res.Phase != result.PhaseSucceeded {
			t.Errorf("%s ended %s/%s: %s", job, res.Phase, res.Reason, res.Message)
		}
		if res.Restarts != 0 {
			t.Errorf("%s counted %d restarts; gang retries are not restarts", job, res.Restarts)
		}
		// One attempt is the timeout; the scheduler, the deletions and the
		// 100 ms sampling need a little more.
		if got := holds.longest[job]; got > timeout*time.Second+3*time.Second {
			t.Errorf("%s held a partial set of pods for %s, past its %ds timeout", job, got.Round(time.Millisecond), timeout)
		}
		t.Logf("%s: longest partial hold %s", job, holds.longest[job].Round(time.Millisecond))
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func TestBuiltinGangThatCanNeverFitEndsUnschedulableAndLeavesNothing(t *testing.T) {
	c := cluster.Get(t)
	ns := c.Namespace(t)
	addPool(t, c, "toosmall", 1, 2)
	job := gpuJob("big", "toosmall", 3, &v1alpha1.SchedulingPolicy{Gang: v1alpha1.GangBuiltin,
		ScheduleTimeoutSeconds: ptr.To[int32](2), MaxScheduleAttempts: ptr.To[int32](2)})
	started := time.Now()
	res := startRun(t, c, ns, job).wait(t)
	t.Logf("ended after %s: %s/%s: %s", time.Since(started).Round(time.Millisecond), res.Phase, res.Reason, res.Message)
	if res.Phase != result.PhaseTransient || res.Reason != result.ReasonUnschedulable || res.Phase.ExitCode() != 12 {
		t.Fatalf("got %s/%s (exit %d), want Transient/Unschedulable (exit 12)", res.Phase, res.Reason, res.Phase.ExitCode())
	}
	list, err := c.Client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	svcs, err := c.Client.CoreV1().Services(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 0 || len(svcs.Items) != 0 {
		t.Errorf("left behind %d pods and %d services", len(list.Items), len(svcs.Items))
	}
}
