package bench

import (
	"fmt"
	"strings"
	"time"

	"github.com/trainstep/trainstep/executor"

	"github.com/trainstep/trainstep/pkg/apistats"
)

// Targets the issue sets for trainstep, checked by Report.Targets.
const (
	TargetLaunchRatio  = 1.2                    // trainstep/baseline time to all objects created, at the largest size
	TargetDetection    = 200 * time.Millisecond // median, at every size
	TargetPeakRSSBytes = 64 << 20               // at the largest size
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
	// BinaryBytes is the size of the measured trainstep binary.
	BinaryBytes int64

	Sizes      []SizeResult
	Teardown   TeardownResult
	Polling    PollingResult
	RateLimits []RateLimitResult
	Profile    ProfileResult
}

// ProfileResult is one more trainstep run of the largest job, profiled.
type ProfileResult struct {
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
	// BaselineDelete is the baseline loop deleting its objects, until gone.
	BaselineDelete []time.Duration
	PeakRSSBytes   []float64
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
}

// LaunchTimes are, per run, the time to the first object created, to all pods
// and Services created, and to all pods Running.
type LaunchTimes struct {
	First, Created, Running []time.Duration
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

// TeardownResult is SIGTERM of a running job.
type TeardownResult struct {
	Replicas int
	// Gone: SIGTERM → no pod or Service left; Exited: SIGTERM → trainstep exited.
	Gone, Exited []time.Duration
	Requests     RequestRuns
	Anomalies    []string
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

// HeartbeatLimit is the most Lease renewals a run of d may make: one per
// renewal period of the default lease, and the slack.
func HeartbeatLimit(d time.Duration) int {
	return int(d/executor.LeaseRenewPeriod(executor.DefaultLeaseDuration)) + TargetRequestsSlack
}

// RateLimitResult is trainstep at one --kube-api-qps/--kube-api-burst: its
// time to all of the largest job's objects created.
type RateLimitResult struct {
	Replicas int
	QPS      float32
	Burst    int
	Created  []time.Duration
}

// Label names the setting: "200/400".
func (r RateLimitResult) Label() string { return fmt.Sprintf("%g/%d", r.QPS, r.Burst) }

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
	all = append(all, r.Teardown.Anomalies...)
	return append(all, r.Polling.Anomalies...)
}

// Targets checks every target against the report.
func (r Report) Targets() []Target {
	if len(r.Sizes) == 0 {
		return nil
	}
	largest := r.Sizes[len(r.Sizes)-1]
	var targets []Target
	ratio := largest.CreatedRatio()
	targets = append(targets, Target{
		Name:     fmt.Sprintf("launch at %d: trainstep/baseline, all created", largest.Replicas),
		Goal:     fmt.Sprintf("≤ %.1f", TargetLaunchRatio),
		Measured: ratio.Format("%.2f"),
		Met:      ratio.Runs > 0 && ratio.Median <= TargetLaunchRatio,
		Limit:    r.launchLimit(),
	})
	for _, s := range r.Sizes {
		d := Summarize(millis(s.Detection))
		targets = append(targets, Target{
			Name:     fmt.Sprintf("detection at %d (median)", s.Replicas),
			Goal:     fmt.Sprintf("≤ %d ms", TargetDetection.Milliseconds()),
			Measured: d.Format("%.0f") + " ms",
			Met:      d.Runs > 0 && d.Median <= float64(TargetDetection.Milliseconds()),
			Limit:    r.cpuLimit(),
		})
	}
	for _, s := range r.Sizes {
		targets = append(targets, requestTarget(fmt.Sprintf("API cost at %d: creates / deletes of a clean run", s.Replicas), s.Replicas, s.CleanRequests))
	}
	if len(r.Teardown.Requests) > 0 {
		targets = append(targets, requestTarget(fmt.Sprintf("API cost at %d: creates / deletes of a stopped run", r.Teardown.Replicas), r.Teardown.Replicas, r.Teardown.Requests))
	}
	if r.Polling.LongRequests != nil {
		targets = append(targets, Target{
			Name: fmt.Sprintf("no polling: requests of a %s job minus a %s job, %d workers",
				r.Polling.Long, r.Polling.Short, r.Polling.Replicas),
			Goal:     fmt.Sprintf("≤ %d", TargetRequestsSlack),
			Measured: fmt.Sprintf("%+d (%d vs %d)", r.Polling.Growth(), sum(r.Polling.LongRequests), sum(r.Polling.ShortRequests)),
			Met:      r.Polling.Growth() <= TargetRequestsSlack,
			Limit:    "the requests that grew: " + strings.Join(grown(r.Polling.ShortRequests, r.Polling.LongRequests), ", "),
		}, Target{
			Name:     fmt.Sprintf("Lease renewals of the %s job, which trainstep ran for %s (`%s`)", r.Polling.Long, r.Polling.LongRun.Round(time.Second), HeartbeatKey),
			Goal:     fmt.Sprintf("≤ %d", HeartbeatLimit(r.Polling.LongRun)),
			Measured: fmt.Sprint(r.Polling.LongRequests[HeartbeatKey]),
			Met:      r.Polling.LongRequests[HeartbeatKey] <= HeartbeatLimit(r.Polling.LongRun),
			Limit:    fmt.Sprintf("one renewal every %s", executor.LeaseRenewPeriod(executor.DefaultLeaseDuration)),
		})
	}
	rss := Summarize(mebibytes(largest.PeakRSSBytes))
	targets = append(targets, Target{
		Name:     fmt.Sprintf("peak RSS at %d", largest.Replicas),
		Goal:     fmt.Sprintf("≤ %d MiB", TargetPeakRSSBytes>>20),
		Measured: rss.Format("%.0f") + " MiB",
		Met:      rss.Runs > 0 && rss.Median <= TargetPeakRSSBytes>>20,
		Limit:    r.memoryLimit(),
	})
	return targets
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
// requests it sends, and the CPU it takes from the API server on a small
// machine.
func (r Report) launchLimit() string {
	largest := r.Sizes[len(r.Sizes)-1]
	first := Summarize(Seconds(largest.Trainstep.First)).Median - Summarize(Seconds(largest.Baseline.First)).Median
	created := Summarize(Seconds(largest.Trainstep.Created)).Median
	cpu := Summarize(Seconds(largest.CPUToCreated)).Median
	why := fmt.Sprintf("trainstep's first object appears %.2f s later than the baseline's (starting the process, loading the job, "+
		"checking permissions, the informers' first list); until all %d workers' objects exist it uses %.1f s of CPU in %.1f s, "+
		"CPU the API server on the same cores does not get; %s",
		first, largest.Replicas, cpu, created, extraRequests(largest.Replicas, largest.CleanRequests.Costliest()))
	if limits := r.RateLimits; len(limits) > 1 {
		fastest := limits[len(limits)-1]
		why += fmt.Sprintf("; with --kube-api-qps %s instead of the default it took %s", fastest.Label(), formatSeconds(fastest.Created))
	}
	return why
}

// cpuLimit says how much of the profiled run trainstep spent on the CPU.
func (r Report) cpuLimit() string {
	if r.Profile.Wall == 0 {
		return "no profile was taken"
	}
	return fmt.Sprintf("the profiled run used %.1f s of CPU in %.1f s (%.0f%%): trainstep mostly waits on the API server",
		r.Profile.CPU.Seconds(), r.Profile.Wall.Seconds(), 100*r.Profile.CPU.Seconds()/r.Profile.Wall.Seconds())
}

// memoryLimit splits the profiled run's peak resident set into the binary's
// pages and the Go heap, and names the largest allocators.
func (r Report) memoryLimit() string {
	p := r.Profile
	if p.PeakRSS == 0 {
		return "no profile was taken"
	}
	return fmt.Sprintf("of the profiled run's %.0f MiB, %.0f MiB are file-backed pages of the %.0f MB trainstep binary "+
		"and %.0f MiB anonymous memory; the Go heap held at most %d MB live after a collection and reached %d MB before one "+
		"(the default GOGC=100 lets it grow to twice the live heap); the largest allocators over the run: %s",
		float64(p.PeakRSS)/(1<<20), float64(p.PeakFile)/(1<<20), float64(r.BinaryBytes)/1e6, float64(p.PeakAnon)/(1<<20),
		p.GC.PeakLiveMB, p.GC.PeakHeapMB, strings.Join(topEntries(p.AllocTop, 3), ", "))
}

// topEntries reads the first n entries of `pprof -top` output as
// "function (flat)".
func topEntries(top string, n int) []string {
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
		out = append(out, fmt.Sprintf("`%s` (%s)", strings.Join(fields[5:], " "), fields[0]))
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
