package bench

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
)

// newTestSweepTracker is a tracker fed by the test instead of a watch.
func newTestSweepTracker(gangs bool, trials ...TrialSpec) *SweepTracker {
	s := &SweepTracker{gangs: gangs, pods: map[types.UID]*trialPod{}, trials: map[string]*trialPods{}, changed: make(chan struct{})}
	for _, t := range trials {
		s.trials[t.Name] = &trialPods{replicas: t.Workers}
	}
	return s
}

func trialPodOf(trial, name string, node string, phase corev1.PodPhase) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID(name + "-uid"), Labels: map[string]string{v1alpha1.LabelJobName: trial}},
		Spec:       corev1.PodSpec{NodeName: node},
		Status:     corev1.PodStatus{Phase: phase},
	}
}

func TestSweepTrackerFindsHalfAdmittedGangs(t *testing.T) {
	whole, half := TrialSpec{Name: "sweep-1", Workers: 2}, TrialSpec{Name: "sweep-10", Workers: 2}
	s := newTestSweepTracker(true, whole, half)
	at := time.Unix(100, 0)
	// sweep-1's pods both exist before either is bound.
	s.observe(watch.Added, trialPodOf("sweep-1", "sweep-1-worker-0", "", corev1.PodPending), at)
	s.observe(watch.Added, trialPodOf("sweep-1", "sweep-1-worker-1", "", corev1.PodPending), at)
	s.observe(watch.Modified, trialPodOf("sweep-1", "sweep-1-worker-0", "n", corev1.PodPending), at)
	s.observe(watch.Modified, trialPodOf("sweep-1", "sweep-1-worker-1", "n", corev1.PodPending), at)
	// sweep-10's first pod is bound while its second does not exist.
	s.observe(watch.Added, trialPodOf("sweep-10", "sweep-10-worker-0", "", corev1.PodPending), at)
	s.observe(watch.Modified, trialPodOf("sweep-10", "sweep-10-worker-0", "n", corev1.PodPending), at)
	s.observe(watch.Added, trialPodOf("sweep-10", "sweep-10-worker-1", "", corev1.PodPending), at)
	// A pod of no trial of the sweep is not counted.
	s.observe(watch.Added, trialPodOf("other", "other-worker-0", "n", corev1.PodRunning), at)
	checks := s.Checks()
	if c := checks["sweep-1"]; len(c.HalfAdmitted) != 0 || c.Duplicated() || c.Pods != 2 {
		t.Errorf("sweep-1: %+v, want 2 pods, neither half admitted nor duplicated", c)
	}
	if c := checks["sweep-10"]; len(c.HalfAdmitted) != 1 || c.HalfAdmitted[0] != "sweep-10-worker-0 bound while 1 of 2 pods existed" {
		t.Errorf("sweep-10: %+v, want worker 0 bound with half its gang", c)
	}
	if len(checks) != 2 {
		t.Errorf("checks for %d trials, want the sweep's 2", len(checks))
	}
}

func TestSweepTrackerSpansEveryReplicaRunning(t *testing.T) {
	trial := TrialSpec{Name: "sweep-0", Workers: 2}
	s := newTestSweepTracker(false, trial)
	start := time.Unix(100, 0)
	s.observe(watch.Added, trialPodOf("sweep-0", "sweep-0-worker-0", "n", corev1.PodRunning), start.Add(time.Second))
	if !s.AllRunningAt().IsZero() {
		t.Fatal("all running with one of two replicas running")
	}
	s.observe(watch.Added, trialPodOf("sweep-0", "sweep-0-worker-1", "n", corev1.PodRunning), start.Add(2*time.Second))
	s.observe(watch.Modified, trialPodOf("sweep-0", "sweep-0-worker-0", "n", corev1.PodSucceeded), start.Add(5*time.Second))
	deleted := trialPodOf("sweep-0", "sweep-0-worker-1", "n", corev1.PodRunning)
	s.observe(watch.Deleted, deleted, start.Add(6*time.Second))
	if got := s.AllRunningAt(); !got.Equal(start.Add(2 * time.Second)) {
		t.Errorf("all running at %v, want when the second replica ran", got)
	}
	spans := s.RunningSpans(start)
	if len(spans) != 1 || spans[0].From != 2*time.Second || spans[0].To != 5*time.Second {
		t.Errorf("spans %+v, want one from 2 s to 5 s, when worker 0 ended", spans)
	}
	if c := s.countsLocked(); c.LivePods != 1 || c.Ended != 1 || c.AllRunning != 1 {
		t.Errorf("counts %+v, want 1 live pod (worker 0, ended), 1 ended, 1 trial all running", c)
	}
}

func TestSweepTrackerFindsDuplicates(t *testing.T) {
	trial := TrialSpec{Name: "sweep-0", Workers: 1}
	s := newTestSweepTracker(false, trial)
	at := time.Unix(100, 0)
	first := trialPodOf("sweep-0", "sweep-0-worker-0", "", corev1.PodPending)
	second := trialPodOf("sweep-0", "sweep-0-worker-0", "", corev1.PodPending)
	second.UID = "another"
	s.observe(watch.Added, first, at)
	s.observe(watch.Deleted, first, at)
	s.observe(watch.Added, second, at)
	if c := s.Checks()["sweep-0"]; c.Duplicated() || c.Pods != 2 {
		t.Errorf("one pod replaced after it went: %+v, want 2 pods seen, never 2 at once", c)
	}
	third := trialPodOf("sweep-0", "sweep-0-worker-1", "", corev1.PodPending)
	s.observe(watch.Added, third, at)
	if c := s.Checks()["sweep-0"]; !c.Duplicated() {
		t.Errorf("two live pods for one replica: %+v, want a duplicate", c)
	}
}

func TestMostRunningAtOnce(t *testing.T) {
	spans := []TrialRunning{{From: 1, To: 5}, {From: 2, To: 3}, {From: 3, To: 9}, {From: 4}}
	if got := MostRunningAtOnce(spans); got != 3 {
		t.Errorf("MostRunningAtOnce = %d, want 3 (from 4 on: the first, the third and the fourth)", got)
	}
}

func TestSweepTrialsAreGangsOfFourToEight(t *testing.T) {
	trials := SweepTrials(64, "5s", v1alpha1.GangBuiltin, "", true)
	sizes := map[int]int{}
	for _, tr := range trials {
		sizes[tr.Workers]++
	}
	if len(sizes) != 5 || sizes[4] != 13 || sizes[8] != 12 || TotalWorkers(trials) != 382 {
		t.Errorf("sizes %v, %d workers in all; want 4 to 8, 382 in all", sizes, TotalWorkers(trials))
	}
	if q := QuarterQuota(trials); q != 96 {
		t.Errorf("a quarter of 382 GPUs: %d, want 96", q)
	}
	manifest, err := trials[10].Manifest()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"name: sweep-10", "replicas: 4", "gang: builtin", "nvidia.com/gpu: \"1\"", AnnotationExitAfter + ": 5s"} {
		if !containsLine(string(manifest), want) {
			t.Errorf("trial 10's manifest has no %q:\n%s", want, manifest)
		}
	}
}

func containsLine(text, want string) bool {
	for _, line := range strings.Split(text, "\n") {
		if strings.TrimSpace(line) == want {
			return true
		}
	}
	return false
}
