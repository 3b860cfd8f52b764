package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/trainstep/trainstep/hack/image/gobuild"
	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/test/cluster"
)

// Environment knobs for shorter runs while working on the bench itself; `make
// bench` uses the defaults.
const (
	runsEnv    = "TRAINSTEP_BENCH_RUNS"    // runs per figure (default 5, 3 from 256 workers, 2 from 2048)
	sizesEnv   = "TRAINSTEP_BENCH_SIZES"   // comma-separated worker counts (default 8,64,512,2048)
	binaryEnv  = "TRAINSTEP_BENCH_BINARY"  // a trainstep binary to measure instead of building cmd/trainstep
	versionEnv = "TRAINSTEP_BENCH_VERSION" // the version stamped into the built binary, as `make image` does
	renderEnv  = "TRAINSTEP_BENCH_RENDER"  // rewrite BENCHMARKS.md and the plots from the last run's results.json
	launchEnv  = "TRAINSTEP_BENCH_LAUNCH"  // only the warm-up and the launch rounds, logged; BENCHMARKS.md is left as it was
)

// Extra KWOK nodes so the largest job (MaxLaunchReplicas, 4096 workers)
// fits beside the cluster's default 4×110 pod slots, with room for the
// polling jobs.
const (
	extraNodes       = 2
	extraNodePodSlot = 2100
)

// pollingJob is the pair of job lengths compared for polling, at pollingReplicas workers.
var (
	pollingShort, pollingLong = 10 * time.Second, 60 * time.Second
	pollingReplicas           = 8
)

// rateLimits are the --kube-api-qps/--kube-api-burst settings compared at the
// largest size with the default, which the launch rounds measure: one that
// binds below the API server's own pace and one that never binds.
var rateLimits = []struct {
	qps   float32
	burst int
}{{100, 200}, {1000, 2000}}

func TestBench(t *testing.T) {
	if os.Getenv(benchEnv) == "" {
		t.Skipf("the benchmarks run with %s=1 (`make bench`)", benchEnv)
	}
	began := time.Now()
	scenario := os.Getenv(scenarioEnv)
	if scenario != "" && scenario != "all" && scenario != "sweep" {
		t.Fatalf("%s=%q: want all or sweep", scenarioEnv, scenario)
	}
	sizes, runs := benchSizes(t), benchRuns(t)
	c := cluster.Get(t)
	h := newHarness(t, c)
	root := repoRoot(t)
	report := Report{Generated: began, Machine: machine(), Cluster: clusterVersions(root),
		BinaryBuild: h.build, ServiceCollection: h.serviceCollection}
	report.DefaultQPS, report.DefaultBurst = trainstepDefaults(t, h.binary)
	if info, err := os.Stat(h.binary); err == nil {
		report.BinaryBytes = info.Size()
	}
	if scenario == "sweep" {
		// Logged, with the section BENCHMARKS.md would hold, and its plot
		// written: BENCHMARKS.md is the whole run's.
		h.measureSweepScenario(t, &report)
		t.Logf("sweep results:\n%s", report.SweepTable())
		section, err := report.SweepMarkdown()
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("BENCHMARKS.md's sweep section:\n%s", section)
		if err := report.WriteSweepPlot(root); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s", SweepPlotFile)
		return
	}
	reference, largest := referenceSize(sizes), sizes[len(sizes)-1]

	h.warmUp(t, reference)
	for _, n := range sizes {
		size := h.measureSize(t, n, runs.forSize(n))
		if n == TargetReplicas {
			size.LoopAgainstLoop = h.measureLoopAgainstLoop(t, n, runs.forSize(n))
		}
		report.Sizes = append(report.Sizes, size)
	}
	if os.Getenv(launchEnv) != "" {
		// Each round was logged as it ended.
		for _, s := range report.Sizes {
			t.Logf("%d workers: all created, ratio %s", s.Replicas, s.CreatedRatio().Format("%.2f"))
			if floor := s.LoopAgainstLoop.Spread(); floor.Runs > 0 {
				t.Logf("%d workers: loop against loop, ratio %s", s.Replicas, floor.Format("%.2f"))
			}
		}
		for _, l := range report.LayoutRows() {
			t.Logf("%d workers: all created per job %s, per replica %s, ratio %s; etcd writes per replica: per job %s (%s), per replica %s (%s), loop %s (%s)",
				l.Replicas, formatSeconds(l.PerJob.Created), formatSeconds(l.PerReplica.Created), l.CreatedRatio.Format("%.2f"),
				l.PerJobWrites.Format("%.2f"), l.PerJobByResource, l.PerReplicaWrites.Format("%.2f"), l.PerReplicaByResource,
				l.BaselineWrites.Format("%.2f"), l.BaselineByResource)
		}
		return
	}
	for _, n := range distinct(reference, largest) {
		report.Teardowns = append(report.Teardowns, h.measureTeardown(t, n, runs.forSize(n)))
	}
	if largest >= TargetLargeReplicas {
		report.MaxLaunch = h.measureMaxLaunch(t)
	}
	// The two small polling jobs mostly sit idle for a minute: they run beside
	// the rate-limit and profile runs instead of adding that minute.
	polling := make(chan PollingResult, 1)
	go func() { polling <- h.measurePolling(t) }()
	report.RateLimits = h.measureRateLimits(t, reference, min(runs.forSize(reference), 2), report.DefaultQPS, report.DefaultBurst)
	for _, n := range distinct(reference, largest) {
		report.Profiles = append(report.Profiles, h.measureProfile(t, n))
	}
	report.Polling = <-polling
	h.measureSweepScenario(t, &report)
	report.Took = time.Since(began)

	t.Logf("results:\n%s", report.Table())
	if t.Failed() {
		t.Fatal("some measurements failed; BENCHMARKS.md is left as it was")
	}
	if err := report.WriteFiles(root); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s and %s in %s", BenchmarksFile, PlotFile, time.Since(began).Round(time.Second))
	// A replica created twice with nothing deleting it is a bug, not a
	// figure: the report is written, and the bench fails.
	if all := report.AllAnomalies(); len(all) > 0 {
		t.Errorf("trainstep recreated objects that nothing deleted in %d runs:\n%s", len(all), strings.Join(all, "\n"))
	}
}

// referenceSize is where most targets are set, TargetReplicas, when
// measured; else the largest size.
func referenceSize(sizes []int) int {
	if slices.Contains(sizes, TargetReplicas) {
		return TargetReplicas
	}
	return sizes[len(sizes)-1]
}

func distinct(a, b int) []int {
	if a == b {
		return []int{a}
	}
	return []int{a, b}
}

// TestRenderBenchmarks rewrites BENCHMARKS.md and the plots from the
// figures of the last `make bench`, after a change to the report's template
// or plots, without measuring again.
func TestRenderBenchmarks(t *testing.T) {
	if os.Getenv(renderEnv) == "" {
		t.Skipf("rewrites BENCHMARKS.md from %s with %s=1", ResultsFile, renderEnv)
	}
	root := repoRoot(t)
	data, err := os.ReadFile(filepath.Join(root, ResultsFile))
	if err != nil {
		t.Fatal(err)
	}
	var report Report
	if err := json.Unmarshal(data, &report); err != nil {
		t.Fatalf("decoding %s: %v", ResultsFile, err)
	}
	if err := report.WriteFiles(root); err != nil {
		t.Fatal(err)
	}
}

func newHarness(t *testing.T, c *cluster.Cluster) *harness {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	for i := range extraNodes {
		name := fmt.Sprintf("bench-node-%d", i)
		if err := c.AddNode(ctx, name, cluster.NodeCapacity("64", "256Gi", extraNodePodSlot, 0)); err != nil {
			t.Fatalf("adding node %s: %v", name, err)
		}
	}
	admin, err := UnlimitedClient(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	serviceCollection, err := CanDeleteServiceCollection(admin)
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{c: c, admin: admin, serviceCollection: serviceCollection, binary: os.Getenv(binaryEnv)}
	watcher := filepath.Join(t.TempDir(), "launchcompare")
	build := exec.CommandContext(ctx, "go", "build", "-o", watcher, "./test/bench/cmd/launchcompare")
	build.Dir = repoRoot(t)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the watcher: %v\n%s", err, out)
	}
	h.watcher = []string{watcher, "watch"}
	if h.binary != "" {
		h.build = "given by " + binaryEnv
		return h
	}
	version := os.Getenv(versionEnv)
	if h.binary, err = BuildTrainstep(ctx, repoRoot(t), t.TempDir(), version); err != nil {
		t.Fatal(err)
	}
	h.build = fmt.Sprintf("`go build -trimpath -ldflags=%q` with CGO_ENABLED=0, as `make image` builds it", gobuild.LDFlags(version))
	return h
}

// warmUp runs each side once at n workers, unrecorded, so connection set-up
// and the API server's first-use caches are not in the figures. n is the
// reference size: on a fresh cluster the first burst of that size has its
// watch events delivered seconds late, whichever side makes it (in one
// warm-up the baseline's last create was at 4.4 s and the watcher saw it at
// 6.5 s), and that would land on round 1's first side.
func (h *harness) warmUp(t *testing.T, n int) {
	t.Run("warm-up", func(t *testing.T) {
		spec := jobSpec(n, v1alpha1.CleanPodPolicyNone, "")
		j := h.prepare(t, spec)
		j.fromIdle = true
		_, err := h.runBaseline(context.Background(), j, "")
		check(t, "baseline", err)
		j = h.prepare(t, spec)
		j.fromIdle = true
		_, err = h.runTrainstep(context.Background(), j, 0, 0, nil)
		check(t, "trainstep", err)
	})
}

// measureSize alternates trainstep and baseline runs at n workers, in fresh
// namespaces, swapping which goes first each round so drift hits both; each
// round ends with a clean run (cleanPodPolicy Running) for the API cost.
// The job has the per-job Service layout, a TrainJob's default; where
// LayoutsCompared, each round also launches it under the per-replica layout,
// before the per-job launch in even rounds and after it in odd ones, and
// runs it clean under that layout too.
func (h *harness) measureSize(t *testing.T, n, runs int) SizeResult {
	res := SizeResult{Replicas: n}
	for round := 1; round <= runs; round++ {
		trainstep := func(t *testing.T) {
			j := h.prepare(t, jobSpec(n, v1alpha1.CleanPodPolicyNone, ""))
			j.fromIdle = true
			run, err := h.runTrainstep(context.Background(), j, 0, 0, nil)
			check(t, "trainstep", err)
			if run.anomaly != "" {
				res.Anomalies = append(res.Anomalies, fmt.Sprintf("%d workers, round %d: %s", n, round, run.anomaly))
				t.Logf("anomaly: %s", run.anomaly)
			}
			res.Trainstep.First = append(res.Trainstep.First, run.first)
			res.Trainstep.Created = append(res.Trainstep.Created, run.created)
			res.Trainstep.LastCreate = append(res.Trainstep.LastCreate, run.lastCreate)
			res.StartWaits = append(res.StartWaits, run.idle)
			res.CPUToCreated = append(res.CPUToCreated, run.cpuToCreated)
			res.Trainstep.Running = append(res.Trainstep.Running, run.running)
			res.Detection = append(res.Detection, run.detection)
			res.PeakRSSBytes = append(res.PeakRSSBytes, float64(run.exit.PeakRSS))
			res.PeakAnonBytes = append(res.PeakAnonBytes, float64(run.exit.PeakAnon))
			res.PeakFileBytes = append(res.PeakFileBytes, float64(run.exit.PeakFile))
			res.CPU = append(res.CPU, run.exit.CPU)
			res.TrainstepWrites = append(res.TrainstepWrites, run.launch.Writes)
			t.Logf("trainstep: started %s; first %s, own last create %s, created %s (CPU %s), running %s, detection %s, peak RSS %.1f MiB, CPU %s",
				run.idle, ms(run.first), ms(run.lastCreate), ms(run.created), ms(run.cpuToCreated), ms(run.running), ms(run.detection),
				float64(run.exit.PeakRSS)/(1<<20), ms(run.exit.CPU))
			t.Logf("CPU by program from trainstep's start until the watcher saw every object: %s", run.launch)
			t.Logf("trainstep's timeline of the launch:\n%s", run.timeline)
		}
		baseline := func(t *testing.T) {
			run := h.launchBaseline(t, n)
			res.Baseline.First = append(res.Baseline.First, run.first)
			res.Baseline.Created = append(res.Baseline.Created, run.created)
			res.Baseline.LastCreate = append(res.Baseline.LastCreate, run.lastCreate)
			res.StartWaits = append(res.StartWaits, run.idle)
			res.Baseline.Running = append(res.Baseline.Running, run.running)
			res.BaselineWrites = append(res.BaselineWrites, run.launch.Writes)
			t.Logf("baseline: started %s; first %s, own last create %s, created %s, running %s", run.idle, ms(run.first), ms(run.lastCreate), ms(run.created), ms(run.running))
			t.Logf("CPU by program from the loop's start until the watcher saw every object (the loop is the test's process): %s", run.launch)
			t.Logf("the loop's timeline:\n%s", run.timeline)
		}
		load := LoadAverage()
		res.Loads = append(res.Loads, load)
		first, second := trainstep, baseline
		firstName, secondName := "trainstep", "baseline"
		if round%2 == 0 {
			first, second, firstName, secondName = baseline, trainstep, secondName, firstName
		}
		perReplica := func(t *testing.T) {
			j := h.prepare(t, jobSpecIn(v1alpha1.ServiceLayoutPerReplica, n, v1alpha1.CleanPodPolicyNone, ""))
			j.fromIdle = true
			run, err := h.runTrainstep(context.Background(), j, 0, 0, nil)
			check(t, "trainstep per replica", err)
			if run.anomaly != "" {
				res.Anomalies = append(res.Anomalies, fmt.Sprintf("%d workers per replica, round %d: %s", n, round, run.anomaly))
				t.Logf("anomaly: %s", run.anomaly)
			}
			res.PerReplica.First = append(res.PerReplica.First, run.first)
			res.PerReplica.Created = append(res.PerReplica.Created, run.created)
			res.PerReplica.LastCreate = append(res.PerReplica.LastCreate, run.lastCreate)
			res.PerReplica.Running = append(res.PerReplica.Running, run.running)
			res.PerReplicaWrites = append(res.PerReplicaWrites, run.launch.Writes)
			t.Logf("trainstep, per-replica layout: started %s; own last create %s, created %s, running %s", run.idle, ms(run.lastCreate), ms(run.created), ms(run.running))
			t.Logf("CPU by program from trainstep's start until the watcher saw every object: %s", run.launch)
		}
		if LayoutsCompared(n) && round%2 == 0 {
			t.Run(fmt.Sprintf("%d/run-%d/trainstep-per-replica", n, round), perReplica)
		}
		t.Run(fmt.Sprintf("%d/run-%d/%s", n, round, firstName), first)
		t.Run(fmt.Sprintf("%d/run-%d/%s", n, round, secondName), second)
		if LayoutsCompared(n) && round%2 == 1 {
			t.Run(fmt.Sprintf("%d/run-%d/trainstep-per-replica", n, round), perReplica)
		}
		if rounds := res.Rounds(); len(rounds) == round {
			r := rounds[round-1]
			t.Logf("%d workers, round %d (%s first, load %s): all created: trainstep %s (its last create %s), baseline %s (%s), ratio %.2f",
				n, r.Number, r.First, r.Load, ms(r.Trainstep), ms(r.TrainstepLastCreate), ms(r.Baseline), ms(r.BaselineLastCreate), r.Ratio)
		}
		t.Run(fmt.Sprintf("%d/run-%d/clean", n, round), func(t *testing.T) {
			j := h.prepare(t, jobSpec(n, "", ""))
			run, err := h.runTrainstep(context.Background(), j, 0, 0, nil)
			check(t, "trainstep", err)
			if run.anomaly != "" {
				res.Anomalies = append(res.Anomalies, fmt.Sprintf("%d workers, round %d, clean run: %s", n, round, run.anomaly))
				t.Logf("anomaly: %s", run.anomaly)
			}
			res.EndToOutputs = append(res.EndToOutputs, run.detection)
			res.CleanRequests = append(res.CleanRequests, run.requests)
			t.Logf("clean run: end → outputs %s, requests %v", ms(run.detection), run.requests)
		})
		if LayoutsCompared(n) {
			t.Run(fmt.Sprintf("%d/run-%d/clean-per-replica", n, round), func(t *testing.T) {
				j := h.prepare(t, jobSpecIn(v1alpha1.ServiceLayoutPerReplica, n, "", ""))
				run, err := h.runTrainstep(context.Background(), j, 0, 0, nil)
				check(t, "trainstep per replica", err)
				res.PerReplicaEndToOutputs = append(res.PerReplicaEndToOutputs, run.detection)
				t.Logf("clean run, per-replica layout: end → outputs %s, requests %v", ms(run.detection), run.requests)
			})
		}
	}
	return res
}

// measureMaxLaunch launches one job of MaxLaunchReplicas workers, the
// documented maximum, from a quiet cluster, and runs it to its end
// (cleanPodPolicy None). Its name is short: TF_CONFIG, which lists every
// worker, must fit one environment variable.
func (h *harness) measureMaxLaunch(t *testing.T) MaxLaunchResult {
	res := MaxLaunchResult{Replicas: MaxLaunchReplicas}
	t.Run(fmt.Sprintf("launch/%d", MaxLaunchReplicas), func(t *testing.T) {
		spec := jobSpec(MaxLaunchReplicas, v1alpha1.CleanPodPolicyNone, "")
		spec.Name = maxLaunchJobName
		j := h.prepare(t, spec)
		j.fromIdle = true
		run, err := h.runTrainstep(context.Background(), j, 0, 0, nil)
		check(t, "trainstep", err)
		res.Created, res.Running, res.Detection = run.created, run.running, run.detection
		res.Writes, res.PeakRSSBytes = run.launch.Writes, float64(run.exit.PeakRSS)
		t.Logf("%d workers: created %s, running %s, detection %s, peak RSS %.1f MiB; %s", MaxLaunchReplicas,
			ms(run.created), ms(run.running), ms(run.detection), float64(run.exit.PeakRSS)/(1<<20), run.launch)
	})
	return res
}

// launchBaseline launches a job of n workers from the loop, in a fresh
// namespace, once the cluster is quiet.
func (h *harness) launchBaseline(t *testing.T, n int) baselineRun {
	j := h.prepare(t, jobSpec(n, v1alpha1.CleanPodPolicyNone, ""))
	j.fromIdle = true
	run, err := h.runBaseline(context.Background(), j, "")
	check(t, "baseline", err)
	return run
}

// measureLoopAgainstLoop runs the launch rounds with the loop on both sides,
// A and B, which goes first alternating: the ratios show how far apart two
// launches of the same client land on this cluster, the floor under the
// trainstep/baseline ratio's spread.
func (h *harness) measureLoopAgainstLoop(t *testing.T, n, runs int) LoopRounds {
	var res LoopRounds
	side := func(times *[]time.Duration) func(t *testing.T) {
		return func(t *testing.T) {
			run := h.launchBaseline(t, n)
			*times = append(*times, run.created)
			t.Logf("loop: started %s; own last create %s, created %s", run.idle, ms(run.lastCreate), ms(run.created))
		}
	}
	for round := 1; round <= runs; round++ {
		first, second, firstName, secondName := side(&res.A), side(&res.B), "A", "B"
		if round%2 == 0 {
			first, second, firstName, secondName = second, first, secondName, firstName
		}
		t.Run(fmt.Sprintf("%d/loop-against-loop-%d/%s", n, round, firstName), first)
		t.Run(fmt.Sprintf("%d/loop-against-loop-%d/%s", n, round, secondName), second)
		if ratios := res.Ratios(); len(ratios) == round {
			t.Logf("%d workers, loop against loop, round %d (%s first): all created: A %s, B %s, ratio %.2f",
				n, round, firstName, ms(res.A[round-1]), ms(res.B[round-1]), ratios[round-1])
		}
	}
	return res
}

// measureTeardown sends SIGTERM to running jobs of n workers and, in the
// same rounds, lets the baseline delete a running job of its own each way,
// the three taking turns at going first.
func (h *harness) measureTeardown(t *testing.T, n, runs int) TeardownResult {
	res := TeardownResult{Replicas: n}
	trainstep := func(round int, layout v1alpha1.ServiceLayout) func(t *testing.T) {
		return func(t *testing.T) {
			j := h.prepare(t, jobSpecIn(layout, n, "", ""))
			run, err := h.runTeardown(context.Background(), j)
			check(t, "teardown", err)
			if layout == v1alpha1.ServiceLayoutPerReplica {
				res.PerReplicaGone = append(res.PerReplicaGone, run.gone)
				t.Logf("teardown, per-replica layout: gone %s, exited %s, requests %v", ms(run.gone), ms(run.exited), run.requests)
				return
			}
			res.Gone = append(res.Gone, run.gone)
			res.Exited = append(res.Exited, run.exited)
			res.Requests = append(res.Requests, run.requests)
			if run.anomaly != "" {
				res.Anomalies = append(res.Anomalies, fmt.Sprintf("%d workers stopped by SIGTERM, round %d: %s", n, round, run.anomaly))
				t.Logf("anomaly: %s", run.anomaly)
			}
			t.Logf("teardown: gone %s, exited %s, requests %v", ms(run.gone), ms(run.exited), run.requests)
		}
	}
	baseline := func(way DeleteWay, into *[]time.Duration) func(t *testing.T) {
		return func(t *testing.T) {
			j := h.prepare(t, jobSpec(n, "", ""))
			run, err := h.runBaseline(context.Background(), j, way)
			check(t, "baseline", err)
			*into = append(*into, run.deleted)
			if way == DeleteByLabel {
				res.CollectionRequests = append(res.CollectionRequests, run.collectionRequests)
			}
			t.Logf("baseline %s: gone %s (%d DeleteCollection requests)", way, ms(run.deleted), run.collectionRequests)
		}
	}
	for round := 1; round <= runs; round++ {
		turns := []struct {
			name string
			run  func(t *testing.T)
		}{
			{"trainstep", trainstep(round, "")},
			{"baseline-loop", baseline(DeleteLoop, &res.BaselineLoop)},
			{"baseline-collection", baseline(DeleteByLabel, &res.BaselineCollection)},
		}
		if LayoutsCompared(n) {
			turns = append(turns, struct {
				name string
				run  func(t *testing.T)
			}{"trainstep-per-replica", trainstep(round, v1alpha1.ServiceLayoutPerReplica)})
		}
		for i := range turns {
			turn := turns[(i+round-1)%len(turns)]
			t.Run(fmt.Sprintf("teardown/%d/run-%d/%s", n, round, turn.name), turn.run)
		}
	}
	return res
}

// measurePolling runs a short and a long job side by side and compares their requests.
func (h *harness) measurePolling(t *testing.T) PollingResult {
	res := PollingResult{Replicas: pollingReplicas, Short: pollingShort, Long: pollingLong}
	t.Run("polling", func(t *testing.T) {
		var wg sync.WaitGroup
		var errs [2]error
		var anomalies [2]string
		for i, length := range []time.Duration{pollingShort, pollingLong} {
			// cleanPodPolicy None: which workers are still running when worker-0
			// ends (and would be deleted) depends on timing, not on the length.
			j := h.prepare(t, jobSpec(pollingReplicas, v1alpha1.CleanPodPolicyNone, length.String()))
			wg.Add(1)
			go func() {
				defer wg.Done()
				requests, took, anomaly, err := h.runToEnd(context.Background(), j, length)
				errs[i] = err
				if anomaly != "" {
					anomalies[i] = fmt.Sprintf("%d workers running %s: %s", pollingReplicas, length, anomaly)
				}
				if i == 0 {
					res.ShortRequests = requests
				} else {
					res.LongRequests, res.LongRun = requests, took
				}
			}()
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Fatal(err)
			}
			if anomalies[i] != "" {
				res.Anomalies = append(res.Anomalies, anomalies[i])
				t.Logf("anomaly: %s", anomalies[i])
			}
		}
		t.Logf("requests: %s job %d, %s job %d", pollingShort, sum(res.ShortRequests), pollingLong, sum(res.LongRequests))
	})
	return res
}

// measureRateLimits launches the largest job at each client rate limit, the
// default among them, the settings taking turns round by round.
func (h *harness) measureRateLimits(t *testing.T, n, runs int, defaultQPS float32, defaultBurst int) []RateLimitResult {
	results := []RateLimitResult{{Replicas: n, QPS: defaultQPS, Burst: defaultBurst}}
	for _, rl := range rateLimits {
		if rl.qps != defaultQPS {
			results = append(results, RateLimitResult{Replicas: n, QPS: rl.qps, Burst: rl.burst})
		}
	}
	sort.Slice(results, func(i, j int) bool { return results[i].plotQPS() < results[j].plotQPS() })
	for round := 1; round <= runs; round++ {
		for i := range results {
			r := &results[i]
			t.Run(fmt.Sprintf("rate-limit/%d/%s/run-%d", n, r.Label(), round), func(t *testing.T) {
				j := h.prepare(t, jobSpec(n, v1alpha1.CleanPodPolicyNone, ""))
				created, err := h.runLaunchOnly(context.Background(), j, r.QPS, r.Burst)
				check(t, "trainstep", err)
				r.Created = append(r.Created, created)
				t.Logf("created %s", ms(created))
			})
		}
	}
	return results
}

// measureProfile runs a job of n workers once more under --cpu-profile and
// --mem-profile with the runtime's GC trace, and keeps pprof's top functions.
func (h *harness) measureProfile(t *testing.T, n int) ProfileResult {
	p := ProfileResult{Replicas: n}
	t.Run(fmt.Sprintf("profile/%d", n), func(t *testing.T) {
		j := h.prepare(t, jobSpec(n, v1alpha1.CleanPodPolicyNone, ""))
		cpuProfile, memProfile := filepath.Join(j.dir, "cpu.pprof"), filepath.Join(j.dir, "heap.pprof")
		run, err := h.runTrainstep(context.Background(), j, 0, 0, []string{"GODEBUG=gctrace=1"},
			"--cpu-profile", cpuProfile, "--mem-profile", memProfile)
		check(t, "trainstep", err)
		p.CPUTop = pprofTop(t, h.binary, cpuProfile)
		p.CPUOwn = pprofTop(t, h.binary, cpuProfile, "-cum", "-show=^github.com/trainstep/")
		p.AllocTop = pprofTop(t, h.binary, memProfile, "-sample_index=alloc_space")
		p.CPU, p.Wall, p.GC = run.exit.CPU, run.wall, ParseGCTrace(run.exit.Stderr)
		p.PeakRSS, p.PeakAnon, p.PeakFile = run.exit.PeakRSS, run.exit.PeakAnon, run.exit.PeakFile
		t.Logf("profile: CPU %s over %s; GC %+v", ms(run.exit.CPU), ms(run.wall), p.GC)
	})
	return p
}

// pprofTop is `go tool pprof -top` of a profile, its top 12 entries, without
// the header lines that change from build to build.
func pprofTop(t *testing.T, binary, profile string, options ...string) string {
	args := append([]string{"tool", "pprof", "-top", "-nodecount=12"}, options...)
	out, err := exec.Command("go", append(args, binary, profile)...).CombinedOutput()
	if err != nil {
		t.Fatalf("go tool pprof %s: %v\n%s", profile, err, out)
	}
	var kept []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if !strings.HasPrefix(line, "File:") && !strings.HasPrefix(line, "Build ID:") && !strings.HasPrefix(line, "Time:") &&
			!strings.HasPrefix(line, "Active filters:") && !strings.HasPrefix(line, "   show=") {
			kept = append(kept, line)
		}
	}
	return strings.Join(kept, "\n")
}

func benchSizes(t *testing.T) []int {
	value := os.Getenv(sizesEnv)
	if value == "" {
		return []int{8, 64, TargetReplicas, TargetLargeReplicas}
	}
	var sizes []int
	for _, field := range strings.Split(value, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(field))
		if err != nil || n < 1 {
			t.Fatalf("%s: %q is not a list of worker counts", sizesEnv, value)
		}
		sizes = append(sizes, n)
	}
	return sizes
}

// runCounts says how many runs each figure gets.
type runCounts struct {
	small, large, huge int // below largeJob workers, from largeJob, from hugeJob
}

// largeJob is the size from which a run takes tens of seconds, hugeJob the
// one from which it takes about a minute: they get fewer runs to keep `make
// bench` within its time budget.
const (
	largeJob = 256
	hugeJob  = 2048
)

func (r runCounts) forSize(n int) int {
	switch {
	case n >= hugeJob:
		return r.huge
	case n >= largeJob:
		return r.large
	}
	return r.small
}

func benchRuns(t *testing.T) runCounts {
	value := os.Getenv(runsEnv)
	if value == "" {
		return runCounts{small: 5, large: 5, huge: 2}
	}
	n, err := strconv.Atoi(value)
	if err != nil || n < 1 {
		t.Fatalf("%s: %q is not a positive number", runsEnv, value)
	}
	return runCounts{small: n, large: n, huge: n}
}

// repoRoot is the module root, two directories above this package.
func repoRoot(t testing.TB) string {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("cannot locate the bench package")
	}
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// trainstepDefaults reads the --kube-api-qps/--kube-api-burst defaults from
// the binary's help, so the report names what the measured binary does.
func trainstepDefaults(t testing.TB, binary string) (float32, int) {
	out, err := exec.Command(binary, "run", "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("trainstep run --help: %v\n%s", err, out)
	}
	qps := regexp.MustCompile(`--kube-api-qps float32 .*\(default ([0-9.]+)\)`).FindSubmatch(out)
	burst := regexp.MustCompile(`--kube-api-burst int .*\(default ([0-9]+)\)`).FindSubmatch(out)
	if burst == nil || !strings.Contains(string(out), "--kube-api-qps") {
		t.Fatalf("trainstep run --help names no --kube-api-qps/--kube-api-burst defaults:\n%s", out)
	}
	// pflag prints no default for zero: no client-side limit.
	var q float64
	if qps != nil {
		q, _ = strconv.ParseFloat(string(qps[1]), 32)
	}
	b, _ := strconv.Atoi(string(burst[1]))
	return float32(q), b
}

// machine describes the host: CPU model, cores, OS and Go version.
func machine() string {
	model := "unknown CPU"
	if data, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		if m := regexp.MustCompile(`(?m)^model name\s*:\s*(.+)$`).FindSubmatch(data); m != nil {
			model = strings.TrimSpace(string(m[1]))
		}
	}
	return fmt.Sprintf("%s, %d cores, %s/%s, %s", model, runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, runtime.Version())
}

// clusterVersions names the test cluster's component versions from hack/cluster/versions.env.
func clusterVersions(root string) string {
	data, err := os.ReadFile(filepath.Join(root, "hack", "cluster", "versions.env"))
	if err != nil {
		return "unknown versions"
	}
	versions := map[string]string{}
	for _, line := range strings.Split(string(data), "\n") {
		if key, value, ok := strings.Cut(strings.TrimSpace(line), "="); ok && !strings.HasPrefix(key, "#") {
			versions[key] = value
		}
	}
	return fmt.Sprintf("Kubernetes %s, etcd %s, KWOK %s", versions["KUBERNETES_VERSION"], versions["ETCD_VERSION"], versions["KWOK_VERSION"])
}
