package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
)

// sweepTimeout bounds one side of a sweep: generous, as a quota lets a
// quarter of the trials run at a time. Steps that have not ended at
// sweepDeadline are stopped, and the side reports them lost.
const (
	sweepTimeout  = 15 * time.Minute
	sweepDeadline = 10 * time.Minute
)

// sweepDeadline is sweepDeadline, or sweepDeadlineEnv's.
func (h *harness) sweepDeadline() time.Duration {
	if d, err := time.ParseDuration(os.Getenv(sweepDeadlineEnv)); err == nil && d > 0 {
		return d
	}
	return sweepDeadline
}

// stepsEnded says every step ended.
func stepsEnded(steps []*trialStep) bool {
	for _, s := range steps {
		select {
		case <-s.done:
		default:
			return false
		}
	}
	return true
}

// sweepSide is what one side of a sweep is given.
type sweepSide struct {
	trials []TrialSpec
	// gangs: the trials run under a gang; every bind is checked against its
	// trial's live pods.
	gangs bool
	// prepare, when set, readies the side's namespace (a quota, a queue).
	prepare func(t *testing.T, ns string)
	// profile: every step runs with --cpu-profile, and the run keeps their
	// profiles' top, merged.
	profile bool
	// during, when set, runs beside the trials (the isolation check's kills).
	during func(ctx context.Context, steps map[string]*trialStep, tracker *SweepTracker) error
}

// sweepMeter measures what the API server did during a side's run.
type sweepMeter struct {
	h      *harness
	launch *LaunchMeter
	load   APIServerLoad
	// cpu is this cluster's kube-apiserver's and etcd's CPU time at the
	// start, read by their process IDs: other clusters on the machine run
	// programs of the same names.
	cpu map[string]time.Duration
}

// sweepMetered are the components whose CPU a sweep side reports.
var sweepMetered = []string{"kube-apiserver", "etcd"}

func (m *sweepMeter) componentCPU() (map[string]time.Duration, error) {
	pids := m.h.c.ComponentPIDs()
	out := map[string]time.Duration{}
	for _, name := range sweepMetered {
		cpu, err := processCPU(pids[name])
		if err != nil {
			return nil, err
		}
		out[name] = cpu
	}
	return out, nil
}

// profileAPIServer, when apiserverProfileEnv asks for it, takes a CPU
// profile of kube-apiserver from now on, in the background, and returns
// what logs its top once it is taken.
func (h *harness) profileAPIServer(t *testing.T, ctx context.Context) func() {
	seconds := os.Getenv(apiserverProfileEnv)
	if seconds == "" {
		return func() {}
	}
	done := make(chan []byte, 1)
	go func() {
		data, err := h.admin.CoreV1().RESTClient().Get().AbsPath("/debug/pprof/profile").Param("seconds", seconds).DoRaw(ctx)
		if err != nil {
			t.Logf("profiling kube-apiserver: %v", err)
		}
		done <- data
	}()
	return func() {
		data := <-done
		if len(data) == 0 {
			return
		}
		path := filepath.Join(t.TempDir(), "apiserver.pprof")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		for _, opts := range [][]string{{"-nodecount=25"}, {"-cum", "-nodecount=60"}} {
			out, err := exec.Command("go", append(append([]string{"tool", "pprof", "-top"}, opts...), path)...).CombinedOutput()
			t.Logf("kube-apiserver's CPU profile (%v): %v\n%s", opts, err, out)
		}
	}
}

// startSweepMeter waits for a quiet cluster (Quiesce), as every launch of
// the bench starts from, then reads kube-apiserver's metrics.
func (h *harness) startSweepMeter(ctx context.Context) (*sweepMeter, IdleWait, error) {
	client := h.admin.CoreV1().RESTClient()
	launch, idle, err := Quiesce(ctx, client)
	if err != nil {
		return nil, idle, err
	}
	m := &sweepMeter{h: h, launch: launch}
	if m.load, err = ReadAPIServerLoad(ctx, client); err != nil {
		return nil, idle, err
	}
	if m.cpu, err = m.componentCPU(); err != nil {
		return nil, idle, err
	}
	return m, idle, m.launch.Start()
}

// stop fills what the API server did since start into run.
func (m *sweepMeter) stop(ctx context.Context, run *SweepRun) error {
	cost, err := m.launch.Stop(ctx)
	if err != nil {
		return err
	}
	load, err := ReadAPIServerLoad(ctx, m.h.admin.CoreV1().RESTClient())
	if err != nil {
		return err
	}
	load = load.Since(m.load)
	cpu, err := m.componentCPU()
	if err != nil {
		return err
	}
	run.APIServerCPU, run.EtcdCPU = cpu["kube-apiserver"]-m.cpu["kube-apiserver"], cpu["etcd"]-m.cpu["etcd"]
	run.P50, run.P99, run.ServerRequests, run.Throttled = load.Quantile(0.5), load.Quantile(0.99), load.Requests(), load.Throttled
	run.StoreWrites = cost.Writes.Total()
	run.ServerRequestsBy = mostFirst(load.ByRequest, 20)
	run.Cost = cost.String()
	return nil
}

// sweepSteps are a trainstep side's steps, by trial, and its tracker.
type sweepSteps struct {
	steps   map[string]*trialStep
	tracker *SweepTracker
}

// runSweepTrainstep starts every trial's step at once, as Argo starts a
// sweep's steps, each in a step pod created before, and follows them to
// their end.
func (h *harness) runSweepTrainstep(t *testing.T, side sweepSide) (SweepRun, sweepSteps, error) {
	run := SweepRun{Load: LoadAverage()}
	ctx, cancel := context.WithTimeout(context.Background(), sweepTimeout)
	defer cancel()
	steps, all, stepPods, sn, err := h.prepareSteps(t, ctx, side)
	if err != nil {
		return run, sweepSteps{}, err
	}
	tracker, err := TrackSweep(ctx, h.c.Config, sn.ns, side.trials, side.gangs)
	if err != nil {
		return run, sweepSteps{}, err
	}
	out := sweepSteps{steps, tracker}
	meter, idle, err := h.startSweepMeter(ctx)
	if err != nil {
		return run, out, err
	}
	t.Logf("trainstep, %d trials: started %s", len(side.trials), idle)
	defer h.profileAPIServer(t, ctx)()
	start := time.Now()
	for i, s := range all {
		s.start(ctx, stepPods[i])
	}
	duringErr := make(chan error, 1)
	if side.during != nil {
		go func() { duringErr <- side.during(ctx, steps, tracker) }()
	} else {
		duringErr <- nil
	}
	deadline, cancelDeadline := context.WithTimeout(ctx, h.sweepDeadline())
	defer cancelDeadline()
	go func() {
		// What the sweep holds when its time runs out: trials waiting with part of their pods.
		<-deadline.Done()
		if ctx.Err() == nil && deadline.Err() == context.DeadlineExceeded && !stepsEnded(all) {
			t.Logf("the sweep's time ran out: %s", tracker.Unfinished())
		}
	}()
	abandoned, err := waitSteps(ctx, deadline, all)
	if err != nil {
		return run, out, err
	}
	if abandoned > 0 {
		run.Problems = append(run.Problems, fmt.Sprintf("%d trials had not ended after %s", abandoned, h.sweepDeadline()))
	}
	run.AllDone = lastExit(all).Sub(start)
	if at := tracker.AllRunningAt(); !at.IsZero() {
		run.AllRunning = at.Sub(start)
	}
	if err := meter.stop(ctx, &run); err != nil {
		return run, out, err
	}
	if err := <-duringErr; err != nil {
		run.Problems = append(run.Problems, err.Error())
	}
	h.summarizeTrainstepRun(t, &run, side, all, tracker, start)
	return run, out, nil
}

// prepareSteps makes a side's namespace and its trials' steps, each with
// its first step pod running; all are the steps in the trials' order.
func (h *harness) prepareSteps(t *testing.T, ctx context.Context, side sweepSide) (map[string]*trialStep, []*trialStep, []*corev1.Pod, sweepNamespace, error) {
	sn := h.newSweepNamespace(t)
	if side.prepare != nil {
		side.prepare(t, sn.ns)
	}
	steps := map[string]*trialStep{}
	all := make([]*trialStep, len(side.trials))
	for i, trial := range side.trials {
		all[i] = newTrialStep(t, h, sn, trial)
		all[i].profiled = side.profile
		steps[trial.Name] = all[i]
	}
	stepPods := make([]*corev1.Pod, len(all))
	err := forEach(len(all), func(i int) (err error) {
		stepPods[i], err = all[i].createStepPod(ctx, 0)
		return err
	})
	return steps, all, stepPods, sn, err
}

// summarizeTrainstepRun fills what the steps and the tracker say into run.
func (h *harness) summarizeTrainstepRun(t *testing.T, run *SweepRun, side sweepSide, all []*trialStep, tracker *SweepTracker, start time.Time) {
	run.Spans = tracker.RunningSpans(start)
	run.Steps, run.TypicalRequests, run.ThrottledRequests = summarizeSteps(all)
	run.TypicalTimeline = typicalTimeline(all)
	run.ClientLog = clientLogLines(all)
	if side.profile {
		run.StepProfile = stepsProfile(t, h.binary, all)
	}
	for _, s := range all {
		run.Retried += len(s.attempts) - 1
		run.Problems = append(run.Problems, s.problems()...)
	}
	run.Problems = append(run.Problems, trackerProblems(tracker, side)...)
	if run.AllRunning == 0 {
		run.Problems = append(run.Problems, "not every trial had all its replicas running at once")
	}
}

// trackerProblems are the trials the tracker saw duplicated or admitted
// with half a gang; without a gang (nothing is given back), also those
// with a pod made twice.
func trackerProblems(tracker *SweepTracker, side sweepSide) []string {
	var out []string
	checks := tracker.Checks()
	for _, trial := range side.trials {
		c := checks[trial.Name]
		switch {
		case c.Duplicated():
			out = append(out, fmt.Sprintf("%s duplicated: %d pods lived at once for %d replicas", trial.Name, c.MostLive, c.Replicas))
		case !side.gangs && c.Pods != c.Replicas:
			out = append(out, fmt.Sprintf("%s: %d pods made for %d replicas", trial.Name, c.Pods, c.Replicas))
		}
		for _, h := range c.HalfAdmitted {
			out = append(out, fmt.Sprintf("%s half admitted: %s", trial.Name, h))
		}
	}
	return out
}

// summarizeSteps sums each step's attempts, and returns the request counts
// of the step with the median number of requests, and the requests turned
// away with 429 over every step.
func summarizeSteps(steps []*trialStep) ([]StepSummary, map[string]int, map[string]int) {
	out := make([]StepSummary, 0, len(steps))
	byTotal := map[string]map[string]int{}
	throttled := map[string]int{}
	for _, s := range steps {
		sum := StepSummary{Trial: s.trial.Name, Attempts: len(s.attempts)}
		all := map[string]int{}
		for _, a := range s.attempts {
			sum.Exit, sum.Stages = a.exit.Code, a.stages
			sum.PeakRSSBytes = max(sum.PeakRSSBytes, a.exit.PeakRSS)
			sum.CPU += a.exit.CPU
			for k, n := range a.requests {
				all[k] += n
			}
			for k, n := range a.throttled {
				sum.Throttled += n
				throttled[k] += n
			}
		}
		sum.count(all)
		byTotal[s.trial.Name] = all
		out = append(out, sum)
	}
	sorted := append([]StepSummary(nil), out...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Requests < sorted[j].Requests })
	if len(sorted) == 0 {
		return out, nil, throttled
	}
	return out, byTotal[sorted[len(sorted)/2].Trial], throttled
}

// stepsProfile is `go tool pprof -top` of every step's first CPU profile
// merged, by the functions' own CPU and by trainstep's own functions'
// cumulative CPU.
func stepsProfile(t *testing.T, binary string, steps []*trialStep) string {
	var profiles []string
	for _, s := range steps {
		if p := s.attempts[0].cpuProfile; p != "" {
			profiles = append(profiles, p)
		}
	}
	if len(profiles) == 0 {
		return ""
	}
	top := func(options ...string) string {
		args := append(append([]string{"tool", "pprof", "-top"}, options...), binary)
		out, err := exec.Command("go", append(args, profiles...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("go tool pprof: %v\n%s", err, out)
		}
		return strings.TrimSpace(string(out))
	}
	return top("-nodecount=25") + "\n\n" + top("-cum", "-nodecount=40", "-show=^github.com/trainstep/|^main\\.|^k8s.io/client-go/(tools|rest)")
}

// clientLogLines counts the lines client-go logged in the steps (through
// trainstep's "klog" logger: a watch ended, a request retried), by message.
func clientLogLines(steps []*trialStep) map[string]int {
	lines := map[string]int{}
	for _, s := range steps {
		for _, a := range s.attempts {
			for _, line := range strings.Split(a.exit.Stderr, "\n") {
				if !strings.Contains(line, `"logger":"klog`) {
					continue
				}
				var entry struct{ Msg string }
				if json.Unmarshal([]byte(line), &entry) == nil {
					lines[tail(entry.Msg, 160)]++
				}
			}
		}
	}
	return lines
}

// typicalTimeline is the --timeline of the step whose last create came
// with the median one's.
func typicalTimeline(steps []*trialStep) string {
	var firsts []stepAttempt
	for _, s := range steps {
		if a := s.attempts[0]; a.stages["last create"] > 0 {
			firsts = append(firsts, a)
		}
	}
	if len(firsts) == 0 {
		return ""
	}
	sort.Slice(firsts, func(i, j int) bool { return firsts[i].stages["last create"] < firsts[j].stages["last create"] })
	return firsts[len(firsts)/2].timeline
}

// runSweepBaseline creates the objects `trainstep render` prints for every
// trial from the plain client-go loop, as the trainstep ServiceAccount, and
// waits until every trial's pods ran and ended.
func (h *harness) runSweepBaseline(t *testing.T, side sweepSide) (SweepRun, error) {
	run := SweepRun{Load: LoadAverage()}
	sn := h.newSweepNamespace(t)
	ctx, cancel := context.WithTimeout(context.Background(), sweepTimeout)
	defer cancel()
	var all Objects
	for _, trial := range side.trials {
		objs, err := Render(ctx, h.binary, newTrialStep(t, h, sn, trial).file, sn.ns)
		if err != nil {
			return run, err
		}
		all.NetworkPolicies = append(all.NetworkPolicies, objs.NetworkPolicies...)
		all.Budgets = append(all.Budgets, objs.Budgets...)
		all.ConfigMaps = append(all.ConfigMaps, objs.ConfigMaps...)
		all.Services = append(all.Services, objs.Services...)
		all.Pods = append(all.Pods, objs.Pods...)
	}
	client, err := UnlimitedClient(sn.config)
	if err != nil {
		return run, err
	}
	tracker, err := TrackSweep(ctx, h.c.Config, sn.ns, side.trials, false)
	if err != nil {
		return run, err
	}
	meter, idle, err := h.startSweepMeter(ctx)
	if err != nil {
		return run, err
	}
	t.Logf("baseline, %d trials: started %s", len(side.trials), idle)
	defer h.profileAPIServer(t, ctx)()
	start := time.Now()
	if err := createBaseline(ctx, client, all, func() {}); err != nil {
		return run, fmt.Errorf("baseline creates: %w", err)
	}
	if err := tracker.WaitFor(ctx, "every trial running", func(c SweepCounts) bool { return c.AllRunning == len(side.trials) }); err != nil {
		return run, err
	}
	run.AllRunning = tracker.AllRunningAt().Sub(start)
	if err := tracker.WaitFor(ctx, "every pod ended", func(c SweepCounts) bool { return c.Ended == len(all.Pods) }); err != nil {
		return run, err
	}
	run.AllDone = time.Since(start)
	if err := meter.stop(ctx, &run); err != nil {
		return run, err
	}
	run.Spans = tracker.RunningSpans(start)
	run.Problems = trackerProblems(tracker, sweepSide{trials: side.trials})
	return run, nil
}

// quotaNamespace puts a ResourceQuota of gpus GPUs on namespace ns.
func (h *harness) quotaNamespace(t *testing.T, ns string, gpus int64) {
	t.Helper()
	quota := &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Name: "gpus"},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{
			corev1.ResourceName("requests." + string(ResourceGPU)): *resource.NewQuantity(gpus, resource.DecimalSI),
		}},
	}
	if _, err := h.admin.CoreV1().ResourceQuotas(ns).Create(context.Background(), quota, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating the ResourceQuota: %v", err)
	}
	// The quota admits nothing until the controller manager counted it.
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		q, err := h.admin.CoreV1().ResourceQuotas(ns).Get(ctx, quota.Name, metav1.GetOptions{})
		return err == nil && q.Status.Hard != nil, nil
	})
	if err != nil {
		t.Fatalf("waiting for the ResourceQuota's status: %v", err)
	}
}
