package bench

import (
	"fmt"
	"strings"
	"time"

	"github.com/trainstep/trainstep/executor"

	"github.com/trainstep/trainstep/pkg/apistats"
)

// Targets the issue sets for trainstep, checked by Report.Targets. Most are
// set at TargetReplicas workers; the scale targets at TargetLargeReplicas.
const (
	TargetReplicas      = 512
	TargetLargeReplicas = 2048

	TargetCreatedRatio  = 1.05                    // trainstep/baseline time to all objects created
	TargetRoundRatio    = 1.25                    // the same, in every round at TargetReplicas
	TargetRunningRatio  = 1.10                    // trainstep/baseline time to all pods Running
	TargetFirstObject   = 300 * time.Millisecond  // trainstep's start → its first object, median
	TargetCPUToCreated  = 1135 * time.Millisecond // trainstep's CPU until all created, median: half of an earlier 2.27 s
	TargetTeardownRatio = 1.2                     // SIGTERM → all gone, over the faster of the baseline's delete ways
	TargetDetection     = 200 * time.Millisecond  // median, at every size

	TargetPeakRSSBytes      = 64 << 20  // at TargetReplicas
	TargetLargePeakRSSBytes = 128 << 20 // at TargetLargeReplicas
	// TargetSlopeGrowth bounds "RSS per replica flat": the resident memory
	// each replica adds from TargetReplicas to TargetLargeReplicas may be at
	// most this many times what each added below TargetReplicas.
	TargetSlopeGrowth = 1.25

	// TargetRequestsSlack: a job six times longer may cost at most this many
	// more requests (a watch that the server happened to close and trainstep
	// re-opened), else trainstep polls.
	TargetRequestsSlack = 2
)

// Report is everything one benchmark run measured.
type Report struct {
	Generated time.Time
	Took      time.Duration
	Machine   string
	Cluster   string
	// DefaultQPS and DefaultBurst are trainstep's --kube-api-qps/--kube-api-burst defaults.
	DefaultQPS   float32
	DefaultBurst int
	// BinaryBytes is the size of the measured trainstep binary, BinaryBuild
	// how it was built.
	BinaryBytes int64
	BinaryBuild string
	// ServiceCollection: the API server offers deletecollection on Services,
	// so the baseline's DeleteCollection way deletes them with one request too.
	ServiceCollection bool

	Sizes      []SizeResult
	Teardowns  []TeardownResult
	Polling    PollingResult
	RateLimits []RateLimitResult
	Profiles   []ProfileResult
	// MaxLaunch is the one launch at the documented maximum.
	MaxLaunch MaxLaunchResult `json:",omitzero"`
	// Sweeps are the sweep scenario's rounds, by size; Quotas its runs
	// under a quota that fits a quarter of the trials, by gang kind;
	// Isolation its check that no step takes another trial's objects.
	Sweeps    []SweepResult    `json:",omitempty"`
	Quotas    []QuotaResult    `json:",omitempty"`
	Isolation *IsolationResult `json:",omitempty"`
	// SweepProfile is one more run of the largest sweep, every step under
	// --cpu-profile.
	SweepProfile *SweepRun `json:",omitempty"`
}

// ProfileResult is one more trainstep run of a job of Replicas workers, profiled.
type ProfileResult struct {
	Replicas int
	// CPUTop and AllocTop are `go tool pprof -top` of the CPU profile and of
	// the heap profile's allocated bytes; CPUOwn is trainstep's own functions
	// by cumulative CPU.
	CPUTop, CPUOwn, AllocTop string
	// CPU and Wall are the run's CPU time and its time from start to exit.
	CPU, Wall time.Duration
	// PeakRSS, PeakAnon and PeakFile are as in Exit, in bytes.
	PeakRSS, PeakAnon, PeakFile int64
	GC                          GCTrace
}

// SizeResult is every figure for one job size.
type SizeResult struct {
	Replicas            int
	Trainstep, Baseline LaunchTimes
	// Detection: the bench's watch sees worker-0 end → trainstep's outputs
	// exist (cleanPodPolicy None, so nothing is deleted in between).
	Detection []time.Duration
	// EndToOutputs is the same with the default cleanPodPolicy Running:
	// trainstep first deletes the other workers and waits until they are gone.
	EndToOutputs []time.Duration
	PeakRSSBytes []float64
	// PeakAnonBytes and PeakFileBytes split the resident set: heap and
	// stacks, and the binary's pages.
	PeakAnonBytes, PeakFileBytes []float64
	// CPU is trainstep's CPU time over a whole run, CPUToCreated until all
	// its objects were created.
	CPU, CPUToCreated []time.Duration
	// CleanRequests are the API requests of each clean run (cleanPodPolicy
	// Running, worker-0 succeeds).
	CleanRequests RequestRuns
	// Anomalies describe runs in which trainstep did something a clean launch
	// does not (an object deleted and created again); their figures are kept.
	Anomalies []string
	// Loads are the machine's load averages (1, 5, 15 min) as each round
	// began.
	Loads []string
	// StartWaits are the waits for an idle machine before each launch, both
	// sides, in the order they ran.
	StartWaits []IdleWait `json:",omitempty"`
	// LoopAgainstLoop are more rounds in which the loop runs on both sides
	// (measured at TargetReplicas only): their ratios are the spread of this
	// cluster alone, with no difference between the sides.
	LoopAgainstLoop LoopRounds `json:",omitzero"`
	// The job runs under the per-job Service layout, a TrainJob's default.
	// PerReplica is trainstep's launch of it under the per-replica layout,
	// in the same rounds (where LayoutsCompared), and PerReplicaEndToOutputs
	// its EndToOutputs.
	PerReplica             LaunchTimes     `json:",omitzero"`
	PerReplicaEndToOutputs []time.Duration `json:",omitempty"`
	// TrainstepWrites, PerReplicaWrites and BaselineWrites are what
	// kube-apiserver wrote to etcd during each launch of each side.
	TrainstepWrites, PerReplicaWrites, BaselineWrites []StoreWrites `json:",omitempty"`
}

// LoopRounds are the times to all created of the loop's two sides, A and B,
// round by round; A goes first in odd rounds.
type LoopRounds struct {
	A, B []time.Duration `json:",omitempty"`
}

// LoopRound is one round of LoopRounds.
type LoopRound struct {
	Number int
	First  string
	A, B   time.Duration
	Ratio  float64
}

// Rounds are the rounds in order, as the report lists them.
func (l LoopRounds) Rounds() []LoopRound {
	var rounds []LoopRound
	for i := range min(len(l.A), len(l.B)) {
		r := LoopRound{Number: i + 1, First: "A", A: l.A[i], B: l.B[i], Ratio: l.A[i].Seconds() / l.B[i].Seconds()}
		if r.Number%2 == 0 {
			r.First = "B"
		}
		rounds = append(rounds, r)
	}
	return rounds
}

// Ratios are A's times over B's, round by round.
func (l LoopRounds) Ratios() []float64 { return Ratios(l.A, l.B) }

// Spread is the ratios' median, minimum and maximum.
func (l LoopRounds) Spread() Spread { return Summarize(l.Ratios()) }

// Widest is the farther of the slowest round either way, as a ratio ≥ 1:
// with no difference between A and B, which one is over the other is chance.
func (l LoopRounds) Widest() float64 {
	spread := l.Spread()
	if spread.Runs == 0 {
		return 0
	}
	return max(spread.Max, 1/spread.Min)
}

// IdleLimit is how long a launch waits at most for an idle machine (for the report).
func (SizeResult) IdleLimit() time.Duration { return IdleLimit }

// BusyStarts counts the launches that began on a machine still busy after
// IdleLimit.
func (s SizeResult) BusyStarts() int {
	n := 0
	for _, w := range s.StartWaits {
		if !w.Idle {
			n++
		}
	}
	return n
}

// Round is one round of trainstep and baseline launches.
type Round struct {
	Number              int
	First, Load         string
	Trainstep, Baseline time.Duration
	Ratio               float64
	// TrainstepLastCreate and BaselineLastCreate are when each side's own
	// last create was accepted (zero when not recorded): the rest, up to
	// Trainstep and Baseline, is the watch's delivery to the watcher.
	TrainstepLastCreate, BaselineLastCreate time.Duration
}

// Rounds are the launch rounds in order: trainstep goes first in odd
// rounds, the baseline in even ones.
func (s SizeResult) Rounds() []Round {
	var rounds []Round
	for i := range min(len(s.Trainstep.Created), len(s.Baseline.Created)) {
		r := Round{Number: i + 1, First: "trainstep", Trainstep: s.Trainstep.Created[i], Baseline: s.Baseline.Created[i],
			Ratio: s.Trainstep.Created[i].Seconds() / s.Baseline.Created[i].Seconds()}
		if r.Number%2 == 0 {
			r.First = "baseline"
		}
		if i < len(s.Loads) {
			r.Load = s.Loads[i]
		}
		if i < len(s.Trainstep.LastCreate) && i < len(s.Baseline.LastCreate) {
			r.TrainstepLastCreate, r.BaselineLastCreate = s.Trainstep.LastCreate[i], s.Baseline.LastCreate[i]
		}
		rounds = append(rounds, r)
	}
	return rounds
}

// LaunchTimes are, per run, the time to the first object created, to all pods
// and Services created, and to all pods Running; LastCreate is when the
// side's own last create was accepted (trainstep's --timeline, the loop's
// return), which the watcher sees some time later.
type LaunchTimes struct {
	First, Created, Running []time.Duration
	LastCreate              []time.Duration `json:",omitempty"`
}

// CreatedRatio is trainstep's time to all objects created over the
// baseline's, run by run.
func (s SizeResult) CreatedRatio() Spread {
	return Summarize(Ratios(s.Trainstep.Created, s.Baseline.Created))
}

// RunningRatio is the same ratio for all pods Running.
func (s SizeResult) RunningRatio() Spread {
	return Summarize(Ratios(s.Trainstep.Running, s.Baseline.Running))
}

// RequestRuns are the API requests of several runs, each counted by "verb resource".
type RequestRuns []map[string]int

// Count spreads, over the runs, the number of requests with one of verbs
// (every request when no verb is given).
func (r RequestRuns) Count(verbs ...string) Spread {
	var counts []float64
	for _, run := range r {
		if len(verbs) == 0 {
			counts = append(counts, float64(sum(run)))
		} else {
			counts = append(counts, float64(apistats.Total(run, verbs...)))
		}
	}
	return Summarize(counts)
}

// Costliest is the run with the most requests.
func (r RequestRuns) Costliest() map[string]int {
	var costliest map[string]int
	for _, run := range r {
		if costliest == nil || sum(run) > sum(costliest) {
			costliest = run
		}
	}
	return costliest
}

// RequestLimit is the bound on creates and on deletes: 2N + 10.
func RequestLimit(replicas int) int { return 2*replicas + 10 }

// TeardownResult is SIGTERM of a running job, and the baseline deleting the
// same job of its own both ways, in the same rounds.
type TeardownResult struct {
	Replicas int
	// Gone: SIGTERM → no pod or Service left; Exited: SIGTERM → trainstep exited.
	Gone, Exited []time.Duration
	// BaselineLoop and BaselineCollection: the baseline's deletes of its own
	// running job until no pod or Service is left, by name in parallel
	// (DeleteLoop) and by label (DeleteByLabel).
	BaselineLoop, BaselineCollection []time.Duration
	// CollectionRequests are the DeleteCollection requests of each
	// BaselineCollection run: two, unless the API server ended some before
	// they were done.
	CollectionRequests []int
	Requests           RequestRuns
	Anomalies          []string
	// PerReplicaGone is Gone with the job under the per-replica Service
	// layout, in the same rounds (where LayoutsCompared).
	PerReplicaGone []time.Duration `json:",omitempty"`
}

// FasterBaseline is the baseline's delete way with the smaller median, and its runs.
func (t TeardownResult) FasterBaseline() (DeleteWay, []time.Duration) {
	loop, collection := Summarize(Seconds(t.BaselineLoop)), Summarize(Seconds(t.BaselineCollection))
	if collection.Runs > 0 && (loop.Runs == 0 || collection.Median < loop.Median) {
		return DeleteByLabel, t.BaselineCollection
	}
	return DeleteLoop, t.BaselineLoop
}

// Ratio is trainstep's time until all gone over the faster baseline way's, round by round.
func (t TeardownResult) Ratio() Spread {
	_, faster := t.FasterBaseline()
	return Summarize(Ratios(t.Gone, faster))
}

// CollectionRequestCounts spreads CollectionRequests.
func (t TeardownResult) CollectionRequestCounts() Spread {
	counts := make([]float64, len(t.CollectionRequests))
	for i, c := range t.CollectionRequests {
		counts[i] = float64(c)
	}
	return Summarize(counts)
}

// FasterLabel names the faster baseline way.
func (t TeardownResult) FasterLabel() string {
	way, _ := t.FasterBaseline()
	return string(way)
}

// PollingResult compares the requests of a short and a long job.
type PollingResult struct {
	Replicas                    int
	Short, Long                 time.Duration
	ShortRequests, LongRequests map[string]int
	// LongRun is how long trainstep ran the long job, start to exit.
	LongRun   time.Duration
	Anomalies []string
}

// HeartbeatKey is the request of the job's Lease renewal: one per renewal
// period while the job runs, by design, so it is bounded on its own and left
// out of the polling target.
const HeartbeatKey = "update leases"

// Growth is how many more requests the long job made than the short one,
// Lease renewals aside.
func (p PollingResult) Growth() int {
	return sum(p.LongRequests) - p.LongRequests[HeartbeatKey] - sum(p.ShortRequests) + p.ShortRequests[HeartbeatKey]
}

// leaseUpdatesBesidePeriods counts the updates of the job's Lease that no
// renewal period paces: client-go's elector takes the Lease with one, renews
// it at once with another before its first period (both skipped when they
// come moments after the run's create of it), and lets it go with a third
// (ReleaseOnCancel).
const leaseUpdatesBesidePeriods = 3

// HeartbeatLimit is the most updates of the job's Lease a run of d may make:
// one per renewal period of the default lease, and the three no period paces.
// A renewal that had to be retried would go past it.
func HeartbeatLimit(d time.Duration) int {
	return int(d/executor.LeaseRenewPeriod(executor.DefaultLeaseDuration)) + leaseUpdatesBesidePeriods
}

// RateLimitResult is trainstep at one --kube-api-qps/--kube-api-burst: its
// time to all of the largest job's objects created.
type RateLimitResult struct {
	Replicas int
	QPS      float32
	Burst    int
	Created  []time.Duration
}

// Label names the setting: "200/400", or "none/400" without a client-side limit.
func (r RateLimitResult) Label() string {
	if r.QPS <= 0 {
		return fmt.Sprintf("none/%d", r.Burst)
	}
	return fmt.Sprintf("%g/%d", r.QPS, r.Burst)
}

// unlimitedPlotQPS is where the plots put the setting without a client-side
// limit: past every limit measured.
const unlimitedPlotQPS = 10000

// plotQPS is the setting's place on the plots' --kube-api-qps axis.
func (r RateLimitResult) plotQPS() float64 {
	if r.QPS <= 0 {
		return unlimitedPlotQPS
	}
	return float64(r.QPS)
}

func sum(counts map[string]int) int {
	total := 0
	for _, n := range counts {
		total += n
	}
	return total
}

// Target is one of the targets with what was measured and, when it
// is missed, what the measurements say limits it.
type Target struct {
	Name, Goal, Measured string
	Met                  bool
	Limit                string
}

// AllAnomalies lists the anomalies of every kind of run.
func (r Report) AllAnomalies() []string {
	var all []string
	for _, s := range r.Sizes {
		all = append(all, s.Anomalies...)
	}
	for _, t := range r.Teardowns {
		all = append(all, t.Anomalies...)
	}
	return append(all, r.Polling.Anomalies...)
}

// Size is the result for n workers, if they were measured.
func (r Report) Size(n int) (SizeResult, bool) {
	for _, s := range r.Sizes {
		if s.Replicas == n {
			return s, true
		}
	}
	return SizeResult{}, false
}

// Teardown is the teardown result for n workers, if measured.
func (r Report) Teardown(n int) (TeardownResult, bool) {
	for _, t := range r.Teardowns {
		if t.Replicas == n {
			return t, true
		}
	}
	return TeardownResult{}, false
}

// Profile is the profiled run of n workers, else of the largest profiled
// size below n, else of the smallest; false when none was taken.
func (r Report) Profile(n int) (ProfileResult, bool) {
	var below, smallest *ProfileResult
	for i := range r.Profiles {
		p := &r.Profiles[i]
		if p.Replicas == n {
			return *p, true
		}
		if p.Replicas < n && (below == nil || p.Replicas > below.Replicas) {
			below = p
		}
		if smallest == nil || p.Replicas < smallest.Replicas {
			smallest = p
		}
	}
	switch {
	case below != nil:
		return *below, true
	case smallest != nil:
		return *smallest, true
	}
	return ProfileResult{}, false
}

// RSSSlope is the resident memory each replica added between the measured
// sizes from and to: the difference of their median peak RSS over the
// difference of their replicas, in bytes.
func (r Report) RSSSlope(from, to int) (float64, bool) {
	return r.slope(from, to, func(s SizeResult) []float64 { return s.PeakRSSBytes })
}

func (r Report) slope(from, to int, values func(SizeResult) []float64) (float64, bool) {
	a, okA := r.Size(from)
	b, okB := r.Size(to)
	if !okA || !okB || from == to {
		return 0, false
	}
	ma, mb := Summarize(values(a)), Summarize(values(b))
	if ma.Runs == 0 || mb.Runs == 0 {
		return 0, false
	}
	return (mb.Median - ma.Median) / float64(to-from), true
}

// sizeBefore is the largest measured size below n.
func (r Report) sizeBefore(n int) (int, bool) {
	before, ok := 0, false
	for _, s := range r.Sizes {
		if s.Replicas < n && s.Replicas > before {
			before, ok = s.Replicas, true
		}
	}
	return before, ok
}

// FootprintRow is one line of the footprint table.
type FootprintRow struct {
	SizeResult
	// PerReplica is the resident memory each replica added since the
	// previous size, "–" for the first.
	PerReplica string
}

// FootprintRows are the footprint table's lines.
func (r Report) FootprintRows() []FootprintRow {
	var rows []FootprintRow
	for i, s := range r.Sizes {
		row := FootprintRow{SizeResult: s, PerReplica: "–"}
		if i > 0 {
			if slope, ok := r.RSSSlope(r.Sizes[i-1].Replicas, s.Replicas); ok {
				row.PerReplica = fmt.Sprintf("%.1f KiB (from %d)", slope/1024, r.Sizes[i-1].Replicas)
			}
		}
		rows = append(rows, row)
	}
	return rows
}

// notMeasured is a target whose size the run did not measure: missed, as
// nothing shows it met.
func (r Report) notMeasured(name, goal string, n int) Target {
	var sizes []string
	for _, s := range r.Sizes {
		sizes = append(sizes, fmt.Sprint(s.Replicas))
	}
	return Target{Name: name, Goal: goal, Measured: "not measured",
		Limit: fmt.Sprintf("this run measured %s workers, not %d", strings.Join(sizes, ", "), n)}
}

// medianTarget checks the median of values against goal (both in the unit the format prints).
func medianTarget(name string, values []float64, goal float64, format, unit, limit string) Target {
	spread := Summarize(values)
	return Target{
		Name: name, Goal: "≤ " + fmt.Sprintf(format, goal) + unit, Measured: spread.Format(format) + unit,
		Met: spread.Runs > 0 && spread.Median <= goal, Limit: limit,
	}
}

// maxTarget is met when no value is above goal.
func maxTarget(name string, values []float64, goal float64, limit string) Target {
	spread := Summarize(values)
	return Target{
		Name: name, Goal: fmt.Sprintf("≤ %.2f in every round", goal), Measured: fmt.Sprintf("%.2f", spread.Max),
		Met: spread.Runs > 0 && spread.Max <= goal, Limit: limit,
	}
}

// Targets checks every target against the report.
func (r Report) Targets() []Target {
	if len(r.Sizes) == 0 {
		return nil
	}
	var targets []Target
	at := TargetReplicas
	if s, ok := r.Size(at); ok {
		targets = append(targets,
			medianTarget(fmt.Sprintf("launch at %d: trainstep/baseline, all created", at),
				Ratios(s.Trainstep.Created, s.Baseline.Created), TargetCreatedRatio, "%.2f", "", r.launchLimit(s)),
			maxTarget(fmt.Sprintf("launch at %d: trainstep/baseline, all created, the slowest round", at),
				Ratios(s.Trainstep.Created, s.Baseline.Created), TargetRoundRatio, r.launchLimit(s)),
			medianTarget(fmt.Sprintf("launch at %d: trainstep/baseline, all Running", at),
				Ratios(s.Trainstep.Running, s.Baseline.Running), TargetRunningRatio, "%.2f", "", r.launchLimit(s)),
			medianTarget(fmt.Sprintf("first object at %d: trainstep's start → its first object", at),
				Seconds(s.Trainstep.First), TargetFirstObject.Seconds(), "%.2f", " s", r.startLimit(s)),
			medianTarget(fmt.Sprintf("trainstep's CPU until all created at %d", at),
				Seconds(s.CPUToCreated), TargetCPUToCreated.Seconds(), "%.3f", " s", r.cpuToCreatedLimit(s)))
	} else {
		for _, name := range []string{"launch at %d: trainstep/baseline, all created", "launch at %d: trainstep/baseline, all created, the slowest round", "launch at %d: trainstep/baseline, all Running",
			"first object at %d: trainstep's start → its first object", "trainstep's CPU until all created at %d"} {
			targets = append(targets, r.notMeasured(fmt.Sprintf(name, at), "as set", at))
		}
	}
	teardownName := fmt.Sprintf("SIGTERM teardown at %d: trainstep/faster baseline way", at)
	if t, ok := r.Teardown(at); ok {
		ratio := t.Ratio()
		targets = append(targets, Target{
			Name: teardownName, Goal: fmt.Sprintf("≤ %.1f", TargetTeardownRatio),
			Measured: ratio.Format("%.2f") + " (against " + t.FasterLabel() + ")",
			Met:      ratio.Runs > 0 && ratio.Median <= TargetTeardownRatio,
			Limit:    r.teardownLimit(t),
		})
	} else {
		targets = append(targets, r.notMeasured(teardownName, fmt.Sprintf("≤ %.1f", TargetTeardownRatio), at))
	}
	for _, s := range r.Sizes {
		targets = append(targets, medianTarget(fmt.Sprintf("detection at %d (median)", s.Replicas),
			millis(s.Detection), float64(TargetDetection.Milliseconds()), "%.0f", " ms", r.cpuLimit()))
	}
	for _, s := range r.Sizes {
		targets = append(targets, requestTarget(fmt.Sprintf("API cost at %d: creates / deletes of a clean run", s.Replicas), s.Replicas, s.CleanRequests))
	}
	for _, t := range r.Teardowns {
		targets = append(targets, requestTarget(fmt.Sprintf("API cost at %d: creates / deletes of a stopped run", t.Replicas), t.Replicas, t.Requests))
	}
	targets = append(targets, r.layoutTargets()...)
	targets = append(targets, r.duplicateTarget(TargetLargeReplicas))
	if r.Polling.LongRequests != nil {
		targets = append(targets, Target{
			Name: fmt.Sprintf("no polling: requests of a %s job minus a %s job, %d workers",
				r.Polling.Long, r.Polling.Short, r.Polling.Replicas),
			Goal:     fmt.Sprintf("≤ %d", TargetRequestsSlack),
			Measured: fmt.Sprintf("%+d (%d vs %d)", r.Polling.Growth(), sum(r.Polling.LongRequests), sum(r.Polling.ShortRequests)),
			Met:      r.Polling.Growth() <= TargetRequestsSlack,
			Limit:    "the requests that grew: " + strings.Join(grown(r.Polling.ShortRequests, r.Polling.LongRequests), ", "),
		}, Target{
			Name:     fmt.Sprintf("updates of the job's Lease in the %s job, which trainstep ran for %s (`%s`)", r.Polling.Long, r.Polling.LongRun.Round(time.Second), HeartbeatKey),
			Goal:     fmt.Sprintf("≤ %d", HeartbeatLimit(r.Polling.LongRun)),
			Measured: fmt.Sprint(r.Polling.LongRequests[HeartbeatKey]),
			Met:      r.Polling.LongRequests[HeartbeatKey] <= HeartbeatLimit(r.Polling.LongRun),
			Limit: fmt.Sprintf("one renewal every %s, besides the update that takes the Lease, the renewal at once after it and the update that lets it go",
				executor.LeaseRenewPeriod(executor.DefaultLeaseDuration)),
		})
	}
	for _, goal := range []struct {
		n     int
		bytes int64
	}{{TargetReplicas, TargetPeakRSSBytes}, {TargetLargeReplicas, TargetLargePeakRSSBytes}} {
		name := fmt.Sprintf("peak RSS at %d", goal.n)
		s, ok := r.Size(goal.n)
		if !ok {
			targets = append(targets, r.notMeasured(name, fmt.Sprintf("≤ %d MiB", goal.bytes>>20), goal.n))
			continue
		}
		targets = append(targets, medianTarget(name, mebibytes(s.PeakRSSBytes), float64(goal.bytes>>20), "%.0f", " MiB", r.memoryLimit(goal.n)))
	}
	targets = append(targets, r.flatnessTarget())
	return append(targets, r.sweepTargets()...)
}

// flatnessTarget checks that each replica from TargetReplicas to
// TargetLargeReplicas adds at most TargetSlopeGrowth times the memory each
// added from the size before TargetReplicas.
func (r Report) flatnessTarget() Target {
	name := fmt.Sprintf("RSS per replica flat from %d to %d", TargetReplicas, TargetLargeReplicas)
	before, ok := r.sizeBefore(TargetReplicas)
	below, okBelow := r.RSSSlope(before, TargetReplicas)
	above, okAbove := r.RSSSlope(TargetReplicas, TargetLargeReplicas)
	goal := fmt.Sprintf("≤ %.2f × the KiB per replica below %d", TargetSlopeGrowth, TargetReplicas)
	if !ok || !okBelow || !okAbove {
		missing := TargetLargeReplicas
		if _, has := r.Size(TargetReplicas); !has {
			missing = TargetReplicas
		}
		return r.notMeasured(name, goal, missing)
	}
	anonBelow, _ := r.slope(before, TargetReplicas, func(s SizeResult) []float64 { return s.PeakAnonBytes })
	anonAbove, _ := r.slope(TargetReplicas, TargetLargeReplicas, func(s SizeResult) []float64 { return s.PeakAnonBytes })
	fileBelow, _ := r.slope(before, TargetReplicas, func(s SizeResult) []float64 { return s.PeakFileBytes })
	fileAbove, _ := r.slope(TargetReplicas, TargetLargeReplicas, func(s SizeResult) []float64 { return s.PeakFileBytes })
	return Target{
		Name: name, Goal: goal,
		Measured: fmt.Sprintf("%.1f KiB per replica from %d to %d, %.1f from %d to %d (%.2f ×)",
			above/1024, TargetReplicas, TargetLargeReplicas, below/1024, before, TargetReplicas, above/below),
		Met: below > 0 && above <= TargetSlopeGrowth*below,
		Limit: fmt.Sprintf("per replica, anonymous memory grew %.1f KiB from %d to %d against %.1f KiB below, file-backed pages %.1f KiB against %.1f KiB; %s",
			anonAbove/1024, TargetReplicas, TargetLargeReplicas, anonBelow/1024, fileAbove/1024, fileBelow/1024, r.memoryLimit(TargetLargeReplicas)),
	}
}

// duplicateTarget checks that no run of n workers created an object twice.
func (r Report) duplicateTarget(n int) Target {
	name := fmt.Sprintf("no pod or Service created twice in any run of %d workers", n)
	s, ok := r.Size(n)
	if !ok {
		return r.notMeasured(name, "0 runs", n)
	}
	runs := len(s.Trainstep.Created) + len(s.CleanRequests)
	anomalies := append([]string(nil), s.Anomalies...)
	if t, ok := r.Teardown(n); ok {
		runs += len(t.Gone)
		anomalies = append(anomalies, t.Anomalies...)
	}
	return Target{
		Name: name, Goal: "0 runs", Measured: fmt.Sprintf("%d of %d runs", len(anomalies), runs),
		Met: runs > 0 && len(anomalies) == 0, Limit: strings.Join(anomalies, "; "),
	}
}

// requestTarget checks the runs' creates and deletes against 2N + 10 (every
// run must stay within it) and names, for the costliest run, the requests
// beyond one create and one delete per pod and Service of the job.
func requestTarget(name string, replicas int, runs RequestRuns) Target {
	limit := RequestLimit(replicas)
	creates, deletes := runs.Count("create"), runs.Count("delete", "deletecollection")
	return Target{
		Name: name, Goal: fmt.Sprintf("≤ %d each", limit),
		Measured: creates.Format("%.0f") + " / " + deletes.Format("%.0f"),
		Met:      len(runs) > 0 && creates.Max <= float64(limit) && deletes.Max <= float64(limit),
		Limit:    extraRequests(replicas, runs.Costliest()),
	}
}

// extraRequests describes the creates and deletes of a run beyond one per
// pod and Service of a job of n workers.
func extraRequests(n int, requests map[string]int) string {
	var extra []string
	for _, key := range apistats.Sorted(requests) {
		verb, resource, _ := strings.Cut(key, " ")
		if verb != "create" && verb != "delete" && verb != "deletecollection" {
			continue
		}
		switch {
		case resource != "pods" && resource != "services":
			extra = append(extra, fmt.Sprintf("%d × `%s`", requests[key], key))
		case requests[key] > n:
			extra = append(extra, fmt.Sprintf("%d × `%s` for %d %s (the benchmark's watch saw each created once: "+
				"the API server refused the others as already existing)", requests[key], key, n, resource))
		}
	}
	if len(extra) == 0 {
		return "every create and delete is one of the job's pods or Services"
	}
	return "besides one request per pod and Service of the job, the costliest run sent " + strings.Join(extra, ", ")
}

// launchLimit explains a slow launch from the measurements: trainstep's
// start-up (its time to the first object against the baseline's), the extra
// requests it sends, the CPU it takes from the API server on a small
// machine, and where that CPU goes in the profile.
func (r Report) launchLimit(s SizeResult) string {
	first := Summarize(Seconds(s.Trainstep.First)).Median - Summarize(Seconds(s.Baseline.First)).Median
	created := Summarize(Seconds(s.Trainstep.Created)).Median
	cpu := Summarize(Seconds(s.CPUToCreated)).Median
	why := fmt.Sprintf("trainstep's first object appears %.2f s later than the baseline's (starting the process, loading the job, "+
		"checking permissions, the informers' first list); until all %d workers' objects exist it uses %.2f s of CPU in %.2f s, "+
		"CPU the API server on the same cores does not get; %s",
		first, s.Replicas, cpu, created, extraRequests(s.Replicas, s.CleanRequests.Costliest()))
	for _, rl := range r.RateLimits {
		if rl.Replicas == s.Replicas && (rl.QPS != r.DefaultQPS || rl.Burst != r.DefaultBurst) && rl.QPS > r.DefaultQPS {
			why += fmt.Sprintf("; with --kube-api-qps %s instead of the default it took %s", rl.Label(), formatSeconds(rl.Created))
		}
	}
	if floor := s.LoopAgainstLoop.Spread(); floor.Runs > 0 {
		why += fmt.Sprintf("; the loop against itself in %d more rounds gave %s, its slowest round %.2f one way or the other",
			floor.Runs, floor.Format("%.2f"), s.LoopAgainstLoop.Widest())
	}
	return why + "; " + r.ownCPU(s.Replicas)
}

// startLimit explains a late first object.
func (r Report) startLimit(s SizeResult) string {
	return fmt.Sprintf("the baseline's first object appears %s after its first request, trainstep's %s after its process started: "+
		"the difference is the process start, loading and checking the job, the permission checks and the informers' first list "+
		"before the first create; %s", formatSeconds(s.Baseline.First), formatSeconds(s.Trainstep.First), r.ownCPU(s.Replicas))
}

// cpuToCreatedLimit names where the CPU of the profiled run went.
func (r Report) cpuToCreatedLimit(s SizeResult) string {
	p, ok := r.Profile(s.Replicas)
	if !ok {
		return "no profile was taken"
	}
	return fmt.Sprintf("the profiled run of %d workers used %.2f s of CPU in all; by function: %s; %s",
		p.Replicas, p.CPU.Seconds(), strings.Join(topEntries(p.CPUTop, 4, false), ", "), r.ownCPU(s.Replicas))
}

// ownCPU names trainstep's own functions with the most cumulative CPU in the profile of n workers.
func (r Report) ownCPU(n int) string {
	p, ok := r.Profile(n)
	if !ok {
		return "no profile was taken"
	}
	return fmt.Sprintf("in the profiled run of %d workers, trainstep's own functions with the most cumulative CPU: %s",
		p.Replicas, strings.Join(topEntries(p.CPUOwn, 4, true), ", "))
}

// teardownLimit explains a slow teardown: the deletes trainstep sends under
// its client rate limit against the baseline's unlimited ones.
func (r Report) teardownLimit(t TeardownResult) string {
	deletes := int(t.Requests.Count("delete", "deletecollection").Median)
	why := fmt.Sprintf("trainstep sent %d deletes", deletes)
	if r.DefaultQPS > 0 {
		budget := max(0, float64(deletes-r.DefaultBurst)/float64(r.DefaultQPS))
		why += fmt.Sprintf("; at its default --kube-api-qps %g and --kube-api-burst %d the client's rate limiter alone takes %.1f s over them",
			r.DefaultQPS, r.DefaultBurst, budget)
	}
	return why + fmt.Sprintf("; the baseline, with no client-side limit, took %s with parallel deletes and %s with DeleteCollection; trainstep exited %s after SIGTERM",
		formatSeconds(t.BaselineLoop), formatSeconds(t.BaselineCollection), formatSeconds(t.Exited))
}

// cpuLimit says how much of the profiled run trainstep spent on the CPU.
func (r Report) cpuLimit() string {
	p, ok := r.Profile(TargetReplicas)
	if !ok || p.Wall == 0 {
		return "no profile was taken"
	}
	return fmt.Sprintf("the profiled run of %d workers used %.1f s of CPU in %.1f s (%.0f%%): trainstep mostly waits on the API server",
		p.Replicas, p.CPU.Seconds(), p.Wall.Seconds(), 100*p.CPU.Seconds()/p.Wall.Seconds())
}

// memoryLimit splits the profiled run's peak resident set into the binary's
// pages and the Go heap, and names the largest allocators.
func (r Report) memoryLimit(n int) string {
	p, ok := r.Profile(n)
	if !ok || p.PeakRSS == 0 {
		return "no profile was taken"
	}
	return fmt.Sprintf("of the profiled run of %d workers' %.0f MiB, %.0f MiB are file-backed pages of the %.0f MB trainstep binary "+
		"and %.0f MiB anonymous memory; the Go heap held at most %d MB live after a collection and reached %d MB before one "+
		"(the default GOGC=100 lets it grow to twice the live heap); the largest allocators over the run: %s",
		p.Replicas, float64(p.PeakRSS)/(1<<20), float64(p.PeakFile)/(1<<20), float64(r.BinaryBytes)/1e6, float64(p.PeakAnon)/(1<<20),
		p.GC.PeakLiveMB, p.GC.PeakHeapMB, strings.Join(topEntries(p.AllocTop, 3, false), ", "))
}

// topEntries reads the first n entries of `pprof -top` output as
// "function (flat)", or with cum "function (cum)".
func topEntries(top string, n int, cum bool) []string {
	var out []string
	header := true
	for _, line := range strings.Split(top, "\n") {
		fields := strings.Fields(line)
		if header {
			header = !(len(fields) > 0 && fields[0] == "flat")
			continue
		}
		if len(fields) < 6 || len(out) == n {
			continue
		}
		value := fields[0]
		if cum {
			value = fields[3]
		}
		out = append(out, fmt.Sprintf("`%s` (%s)", strings.Join(fields[5:], " "), value))
	}
	return out
}

// grown lists the requests the second count has more of.
func grown(before, after map[string]int) []string {
	var out []string
	for _, key := range apistats.Sorted(after) {
		if after[key] > before[key] {
			out = append(out, fmt.Sprintf("`%s` %d → %d", key, before[key], after[key]))
		}
	}
	return out
}

func millis(ds []time.Duration) []float64 {
	out := make([]float64, len(ds))
	for i, d := range ds {
		out[i] = float64(d) / float64(time.Millisecond)
	}
	return out
}

func mebibytes(bytes []float64) []float64 {
	out := make([]float64, len(bytes))
	for i, b := range bytes {
		out[i] = b / (1 << 20)
	}
	return out
}
