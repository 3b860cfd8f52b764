package bench

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/test/cluster"
)

// scenarioEnv picks what `make bench` measures: empty or "all" for
// everything, "sweep" for the sweep scenario alone (logged, BENCHMARKS.md
// left as it was). The other knobs narrow the sweep scenario while working
// on it: the sizes of its launch rounds, its parts (launch, quota,
// isolation), and environment variables given to every step
// ("KUBE_FEATURE_WatchListClient=true"), to see what a change would do.
const (
	scenarioEnv   = "TRAINSTEP_BENCH_SCENARIO"
	sweepSizesEnv = "TRAINSTEP_BENCH_SWEEP_SIZES"
	sweepPartsEnv = "TRAINSTEP_BENCH_SWEEP_PARTS"
	sweepStepEnv  = "TRAINSTEP_BENCH_STEP_ENV"
	// apiserverProfileEnv, a number of seconds, has each sweep side take a
	// CPU profile of kube-apiserver that long from its start, and log its top.
	apiserverProfileEnv = "TRAINSTEP_BENCH_APISERVER_PROFILE"
	// sweepDeadlineEnv shortens the time a sweep side's steps get before
	// they are stopped and reported lost (a Go duration).
	sweepDeadlineEnv = "TRAINSTEP_BENCH_SWEEP_DEADLINE"
)

// How long every trial's replicas run: in the launch rounds, longer than
// the launch itself, so that no trial's end and teardown fall into the
// others' launch; under the quota, short, so that its waves pass quickly;
// in the isolation check, long enough for a killed step's retry to take the
// job over (the Lease's 15 s) while its replicas still run.
const (
	sweepRunFor     = "20s"
	quotaRunFor     = "5s"
	isolationRunFor = "40s"
)

// sweepRounds is how many alternating rounds each sweep size gets (runsEnv
// overrides it).
const sweepRounds = 3

// The sweep pool: two KWOK nodes with room for every pod of the largest
// sweep, its step pods and GPUs, labelled and tainted so that nothing else
// lands there.
const (
	sweepNodes    = 2
	sweepNodePods = 1024
	sweepNodeGPUs = 1024
)

// measureSweepScenario measures the sweep scenario: the launch rounds at
// each size, the quota runs of every gang kind, and the isolation check.
func (h *harness) measureSweepScenario(t *testing.T, report *Report) {
	h.addSweepPool(t)
	if env := os.Getenv(sweepStepEnv); env != "" {
		h.stepEnv = strings.Split(env, ",")
	}
	rounds := sweepRounds
	if os.Getenv(runsEnv) != "" {
		rounds = benchRuns(t).small
	}
	parts := os.Getenv(sweepPartsEnv)
	part := func(name string) bool { return parts == "" || slices.Contains(strings.Split(parts, ","), name) }
	if part("launch") {
		for _, n := range sweepSizes(t) {
			report.Sweeps = append(report.Sweeps, h.measureSweep(t, n, rounds))
		}
	}
	if part("profile") {
		report.SweepProfile = h.measureSweepProfile(t, TargetSweepTrials)
	}
	if part("quota") {
		for _, g := range quotaGangs {
			report.Quotas = append(report.Quotas, h.measureQuota(t, g, TargetSweepTrials))
		}
	}
	if part("isolation") {
		report.Isolation = h.measureIsolation(t, TargetSweepTrials)
	}
}

// sweepSizes are SweepSizes, or those sweepSizesEnv names.
func sweepSizes(t *testing.T) []int {
	value := os.Getenv(sweepSizesEnv)
	if value == "" {
		return SweepSizes
	}
	var sizes []int
	for _, field := range strings.Split(value, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(field))
		if err != nil || n < 1 {
			t.Fatalf("%s: %q is not a list of trial counts", sweepSizesEnv, value)
		}
		sizes = append(sizes, n)
	}
	return sizes
}

func (h *harness) addSweepPool(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	for i := range sweepNodes {
		name := fmt.Sprintf("sweep-node-%d", i)
		err := h.c.AddNode(ctx, name, cluster.NodeCapacity("256", "1Ti", sweepNodePods, sweepNodeGPUs),
			cluster.WithNodeLabels(map[string]string{SweepPoolKey: SweepPool}),
			cluster.WithNodeTaints(corev1.Taint{Key: SweepPoolKey, Value: SweepPool, Effect: corev1.TaintEffectNoSchedule}))
		if err != nil {
			t.Fatalf("adding node %s: %v", name, err)
		}
	}
}

// measureSweep runs n trials at once, trainstep's steps and the loop taking
// turns at going first, round by round.
func (h *harness) measureSweep(t *testing.T, n, rounds int) SweepResult {
	trials := SweepTrials(n, sweepRunFor, "", "", false)
	res := SweepResult{Trials: n, Pods: TotalWorkers(trials)}
	trainstep := func(t *testing.T) {
		run, _, err := h.runSweepTrainstep(t, sweepSide{trials: trials})
		check(t, "trainstep", err)
		res.Trainstep = append(res.Trainstep, run)
		logSweepRun(t, "trainstep", run)
	}
	baseline := func(t *testing.T) {
		run, err := h.runSweepBaseline(t, sweepSide{trials: trials})
		check(t, "baseline", err)
		res.Baseline = append(res.Baseline, run)
		logSweepRun(t, "baseline", run)
	}
	for round := 1; round <= rounds; round++ {
		first, second, firstName, secondName := trainstep, baseline, "trainstep", "baseline"
		if round%2 == 0 {
			first, second, firstName, secondName = second, first, secondName, firstName
		}
		t.Run(fmt.Sprintf("sweep/%d/run-%d/%s", n, round, firstName), first)
		t.Run(fmt.Sprintf("sweep/%d/run-%d/%s", n, round, secondName), second)
		if ratios := Ratios(res.times(res.Trainstep, allRunning), res.times(res.Baseline, allRunning)); len(ratios) == round {
			t.Logf("%d trials (%d pods), round %d (%s first): all running: trainstep %s, baseline %s, ratio %.2f", n, res.Pods, round, firstName,
				ms(res.Trainstep[round-1].AllRunning), ms(res.Baseline[round-1].AllRunning), ratios[round-1])
		}
	}
	return res
}

// measureSweepProfile runs n trials at once once more, every step under
// --cpu-profile: where the steps' CPU goes.
func (h *harness) measureSweepProfile(t *testing.T, n int) *SweepRun {
	var res *SweepRun
	t.Run(fmt.Sprintf("sweep/%d/profile", n), func(t *testing.T) {
		run, _, err := h.runSweepTrainstep(t, sweepSide{trials: SweepTrials(n, sweepRunFor, "", "", false), profile: true})
		check(t, "trainstep", err)
		res = &run
		logSweepRun(t, "trainstep, every step profiled", run)
	})
	return res
}

func logSweepRun(t *testing.T, side string, run SweepRun) {
	t.Logf("%s: all running %s, all done %s; kube-apiserver CPU %s, etcd %s, p50 %s, p99 %s, %d requests, %d answered 429, %d etcd writes (load %s)",
		side, ms(run.AllRunning), ms(run.AllDone), ms(run.APIServerCPU), ms(run.EtcdCPU), ms(run.P50), ms(run.P99),
		run.ServerRequests, run.Throttled, run.StoreWrites, run.Load)
	if len(run.Steps) > 0 {
		t.Logf("%s steps: peak RSS %s MiB, requests %s (writes %s, watches %s, lists %s), CPU %s s, %d throttled, %d retried; the median step's requests: %v",
			side, run.PeakRSS().Format("%.1f"),
			run.StepSpread(func(s StepSummary) float64 { return float64(s.Requests) }).Format("%.0f"),
			run.StepSpread(func(s StepSummary) float64 { return float64(s.Writes) }).Format("%.0f"),
			run.StepSpread(func(s StepSummary) float64 { return float64(s.Watches) }).Format("%.0f"),
			run.StepSpread(func(s StepSummary) float64 { return float64(s.Lists) }).Format("%.0f"),
			run.StepSpread(func(s StepSummary) float64 { return s.CPU.Seconds() }).Format("%.3f"),
			run.StepsThrottled(), run.Retried, run.TypicalRequests)
		t.Logf("%s steps' requests turned away with 429: %v", side, run.ThrottledRequests)
		t.Logf("%s steps' client-go log lines: %v", side, run.ClientLog)
	}
	if len(run.Steps) > 0 {
		t.Logf("%s steps reached, from their start: %s", side, run.StageMedians())
		t.Logf("the timeline of the step with the median last create:\n%s", run.TypicalTimeline)
		if run.StepProfile != "" {
			t.Logf("the steps' CPU profiles, merged:\n%s", run.StepProfile)
		}
	}
	t.Logf("%s: %s", side, run.Cost)
	t.Logf("%s: kube-apiserver answered %s", side, run.ServerRequestsBy)
	for _, p := range run.Problems {
		t.Errorf("%s: %s", side, p)
	}
}

// quotaGang is a gang kind the quota runs use, and what it needs.
type quotaGang struct {
	kind v1alpha1.GangKind
	// start starts its scheduler or admission (Kueue) for the run.
	start func(t *testing.T, c *cluster.Cluster)
	// queue names the LocalQueue every trial names; prepare makes it.
	queue   string
	prepare func(t *testing.T, h *harness, ns string)
}

var quotaGangs = []quotaGang{
	{kind: v1alpha1.GangBuiltin},
	{kind: v1alpha1.GangKueue, start: func(t *testing.T, c *cluster.Cluster) { c.StartKueue(t) }, queue: kueueQueue, prepare: kueueQueueIn},
	{kind: v1alpha1.GangKubernetes},
}

// measureQuota runs n trials at once under a gang kind, in a namespace whose
// ResourceQuota fits a quarter of their replicas' GPUs: every trial must
// complete, no gang may be admitted by halves, none may wait for ever.
func (h *harness) measureQuota(t *testing.T, g quotaGang, n int) QuotaResult {
	trials := SweepTrials(n, quotaRunFor, g.kind, g.queue, true)
	res := QuotaResult{Gang: string(g.kind), Trials: n, Pods: TotalWorkers(trials), QuotaGPUs: QuarterQuota(trials)}
	t.Run(fmt.Sprintf("quota/%d/%s", n, g.kind), func(t *testing.T) {
		if g.start != nil {
			g.start(t, h.c)
		}
		side := sweepSide{trials: trials, gangs: true, prepare: func(t *testing.T, ns string) {
			h.quotaNamespace(t, ns, res.QuotaGPUs)
			if g.prepare != nil {
				g.prepare(t, h, ns)
			}
		}}
		run, out, err := h.runSweepTrainstep(t, side)
		res.Run = run
		check(t, "trainstep", err)
		for _, s := range out.steps {
			for _, a := range s.attempts {
				res.Releases += strings.Count(a.exit.Stderr, quotaReleaseLog)
			}
		}
		for _, s := range run.Spans {
			res.LongestWait = max(res.LongestWait, s.From)
		}
		res.MostRunning = MostRunningAtOnce(run.Spans)
		t.Logf("%d trials (%d GPUs) under a quota of %d GPUs, gang %s: %d completed, all done %s, the longest wait %s, at most %d trials running at once, %d gangs given back",
			n, res.Pods, res.QuotaGPUs, g.kind, res.Completed(), ms(run.AllDone), ms(res.LongestWait), res.MostRunning, res.Releases)
		logSweepRun(t, "trainstep", run)
	})
	return res
}

// quotaReleaseLog is what a step logs when it gives back a gang the quota
// refused in part.
const quotaReleaseLog = "a ResourceQuota refused part of the gang; released its pods"

// kueueQueue is the LocalQueue the Kueue quota run's trials name.
const kueueQueue = "sweep"

// kueueQueueIn puts namespace ns under Kueue with a LocalQueue kueueQueue of
// a ClusterQueue of its own whose quota holds every trial: only the
// namespace's ResourceQuota binds.
func kueueQueueIn(t *testing.T, h *harness, ns string) {
	t.Helper()
	h.c.KueueManage(t, ns)
	dyn, err := dynamic.NewForConfig(h.c.Config)
	if err != nil {
		t.Fatal(err)
	}
	flavor := "flavor-" + ns
	objects := []struct {
		gvr   schema.GroupVersionResource
		obj   map[string]any
		clean bool
	}{
		{cluster.KueueResourceFlavors, map[string]any{"kind": "ResourceFlavor", "metadata": map[string]any{"name": flavor}}, true},
		{cluster.KueueClusterQueues, map[string]any{
			"kind": "ClusterQueue", "metadata": map[string]any{"name": ns},
			"spec": map[string]any{
				"namespaceSelector": map[string]any{"matchLabels": map[string]any{"kubernetes.io/metadata.name": ns}},
				"resourceGroups": []any{map[string]any{
					"coveredResources": []any{"cpu", string(ResourceGPU)},
					"flavors": []any{map[string]any{"name": flavor, "resources": []any{
						map[string]any{"name": "cpu", "nominalQuota": "1000"},
						map[string]any{"name": string(ResourceGPU), "nominalQuota": fmt.Sprint(sweepNodeGPUs)},
					}}},
				}},
			},
		}, true},
		{cluster.KueueLocalQueues, map[string]any{
			"kind": "LocalQueue", "metadata": map[string]any{"name": kueueQueue, "namespace": ns},
			"spec": map[string]any{"clusterQueue": ns},
		}, false},
	}
	ctx := context.Background()
	for _, o := range objects {
		u := &unstructured.Unstructured{Object: o.obj}
		u.SetAPIVersion(o.gvr.GroupVersion().String())
		if _, err := dyn.Resource(o.gvr).Namespace(u.GetNamespace()).Create(ctx, u, metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating %s %s: %v", u.GetKind(), u.GetName(), err)
		}
		if o.clean {
			t.Cleanup(func() { _ = dyn.Resource(o.gvr).Delete(context.Background(), u.GetName(), metav1.DeleteOptions{}) })
		}
	}
	// Kueue admits nothing to a ClusterQueue until it is active.
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		cq, err := dyn.Resource(cluster.KueueClusterQueues).Get(ctx, ns, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		conds, _, _ := unstructured.NestedSlice(cq.Object, "status", "conditions")
		for _, c := range conds {
			if m, ok := c.(map[string]any); ok && m["type"] == "Active" && m["status"] == "True" {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("ClusterQueue %s never active: %v", ns, err)
	}
}

// isolationVictims are the two trials whose steps are killed at once: the
// name of one starts the other's.
var isolationVictims = []string{"sweep-1", "sweep-10"}

// measureIsolation runs n trials at once, kills two trials' steps at the
// same moment once their replicas all run, and starts them again in new
// step pods with the same arguments, as Argo retries two steps; then it
// checks every trial's pods: each made once, owned by its own trial's step
// pod (the killed trials' by their new ones: re-attached, not recreated),
// and every step's outputs and log its own.
func (h *harness) measureIsolation(t *testing.T, n int) *IsolationResult {
	trials := SweepTrials(n, isolationRunFor, "", "", false)
	res := &IsolationResult{Trials: n, Killed: isolationVictims}
	t.Run(fmt.Sprintf("isolation/%d", n), func(t *testing.T) {
		atKill := map[string][]TrialPod{}
		during := func(ctx context.Context, steps map[string]*trialStep, tracker *SweepTracker) error {
			for _, v := range isolationVictims {
				if err := tracker.WaitTrialRunning(ctx, v); err != nil {
					return err
				}
			}
			for _, v := range isolationVictims {
				atKill[v] = tracker.PodsOf(v)
			}
			for _, v := range isolationVictims {
				if err := steps[v].kill(); err != nil {
					return err
				}
			}
			return nil
		}
		run, out, err := h.runSweepTrainstep(t, sweepSide{trials: trials, during: during})
		check(t, "trainstep", err)
		res.Checked = isolationChecks(trials, out, atKill, &run)
		res.Run = run
		logSweepRun(t, "trainstep", run)
		for _, c := range res.Checked {
			t.Logf("isolation: %s", c)
		}
	})
	return res
}

// isolationChecks checks, after the isolation run, that every trial's pods
// were made once and are owned by its own step's last pod, and that the
// killed trials' pods were taken over, not made again; what fails goes into
// run's problems. It returns what was checked, with what was seen.
func isolationChecks(trials []TrialSpec, out sweepSteps, atKill map[string][]TrialPod, run *SweepRun) []string {
	problem := func(format string, args ...any) { run.Problems = append(run.Problems, fmt.Sprintf(format, args...)) }
	pods, owned := 0, 0
	for _, trial := range trials {
		s := out.steps[trial.Name]
		ownSteps := map[types.UID]string{}
		for _, a := range s.attempts {
			ownSteps[a.stepUID] = a.stepPod
		}
		last := s.last()
		for _, p := range out.tracker.PodsOf(trial.Name) {
			pods++
			owner := metav1.GetControllerOfNoCopy(&metav1.ObjectMeta{OwnerReferences: p.Owners})
			switch {
			case owner == nil:
				problem("%s: pod %s has no controller", trial.Name, p.Name)
			case ownSteps[owner.UID] == "":
				problem("%s: pod %s is controlled by %s %s, no step pod of its trial", trial.Name, p.Name, owner.Kind, owner.Name)
			case owner.UID != last.stepUID:
				problem("%s: pod %s is still controlled by %s, not by its step's last pod %s", trial.Name, p.Name, owner.Name, last.stepPod)
			default:
				owned++
			}
		}
	}
	checked := []string{fmt.Sprintf("%d of %d pods of the %d trials controlled by their own trial's last step pod", owned, pods, len(trials))}
	for _, v := range isolationVictims {
		before, after := atKill[v], out.tracker.PodsOf(v)
		kept := 0
		for _, b := range before {
			for _, a := range after {
				if a.UID == b.UID {
					kept++
				}
			}
		}
		s := out.steps[v]
		if len(s.attempts) != 2 {
			problem("%s: its step ran %d times, want twice (killed once)", v, len(s.attempts))
		}
		if kept != len(before) || len(after) != len(before) {
			problem("%s: %d pods at the kill, %d seen in all, %d of them the same pods: want every one taken over, none made again", v, len(before), len(after), kept)
		}
		checked = append(checked, fmt.Sprintf("%s: killed with %d pods, its step started again in %s: %d pods in all, %d taken over; outputs %s, %s restarts",
			v, len(before), s.last().stepPod, len(after), kept, s.last().phase, s.last().restarts))
	}
	checked = append(checked, fmt.Sprintf("every step's outputs list its own replicas and no restart, and no step's log names another trial's pod: %d problems in all", len(run.Problems)))
	return checked
}
