package bench

import (
	"fmt"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/trainstep/trainstep/pkg/apistats"
)

// The sweep scenario: many trials, each a trainstep step of its own, started
// at once in one namespace, as Argo starts a sweep's steps.
const (
	// TargetSweepTrials is the sweep the targets are set at.
	TargetSweepTrials = 64
	// TargetSweepRunningRatio bounds the time to every trial running over
	// the baseline loop's for the same pods, median of alternating rounds.
	TargetSweepRunningRatio = 1.5
	// TargetSweepPeakRSSBytes bounds every step's peak resident memory.
	TargetSweepPeakRSSBytes = 48 << 20
)

// SweepSizes are how many trials the sweep scenario starts at once.
var SweepSizes = []int{16, TargetSweepTrials}

// SweepResult is the rounds of one sweep size: trainstep's steps against
// the loop creating the same pods, taking turns at going first.
type SweepResult struct {
	Trials, Pods        int
	Trainstep, Baseline []SweepRun
}

// SweepRun is one side's run of a sweep. Times count from the start: just
// before the first step process started, or the loop's first request.
type SweepRun struct {
	// AllRunning is when every trial had had all its replicas running at
	// once; AllDone when every step process had exited (the baseline: every
	// pod had ended).
	AllRunning, AllDone time.Duration
	// Spans are each trial's stretches with every replica running.
	Spans []TrialRunning `json:",omitempty"`
	Load  string
	// What kube-apiserver and etcd did from the start to the end: their
	// CPU, the median and 99th percentile of the time kube-apiserver took
	// to answer (long-running requests aside), the requests it answered,
	// those it turned away (429), and its writes to etcd.
	APIServerCPU, EtcdCPU time.Duration
	P50, P99              time.Duration
	ServerRequests        int
	Throttled             int
	StoreWrites           int
	// ServerRequestsBy lists the requests kube-apiserver answered by verb
	// and resource, the most first.
	ServerRequestsBy string `json:",omitempty"`
	// Cost is the CPU by program, the watches cut and the writes, as logged.
	Cost string `json:",omitempty"`
	// Steps are trainstep's steps, one per trial; TypicalRequests the
	// requests of the step with the median count.
	Steps           []StepSummary  `json:",omitempty"`
	TypicalRequests map[string]int `json:",omitempty"`
	// TypicalTimeline is the --timeline of the step with the median last
	// create, for the log.
	TypicalTimeline string `json:"-"`
	// ThrottledRequests are the steps' requests turned away with 429, by
	// "verb resource", all steps together.
	ThrottledRequests map[string]int `json:",omitempty"`
	// ClientLog counts what client-go logged in the steps, by message.
	ClientLog map[string]int `json:",omitempty"`
	// StepProfile is `go tool pprof -top` of the steps' CPU profiles
	// merged, in the run that profiles them.
	StepProfile string `json:",omitempty"`
	// Retried counts the steps' attempts after their first: exits 12 that
	// Argo retries, and the isolation check's kills.
	Retried int `json:",omitempty"`
	// Problems are lost, duplicated or half-admitted trials, and steps that
	// took another trial's objects.
	Problems []string `json:",omitempty"`
}

// StepSummary is one trial's step, its attempts together.
type StepSummary struct {
	Trial    string
	Attempts int
	// Exit is the last attempt's exit code.
	Exit         int
	PeakRSSBytes int64
	CPU          time.Duration
	// Requests, and of them writes (create, update, patch, delete), watches
	// and lists; Throttled the requests turned away with 429.
	Requests, Writes, Watches, Lists, Throttled int
	// Stages are when the last attempt reached each of LaunchStages, from
	// its start.
	Stages map[string]time.Duration `json:",omitempty"`
}

// writeVerbs are the verbs that change objects.
var writeVerbs = []string{"create", "update", "patch", "delete", "deletecollection"}

func (s *StepSummary) count(requests map[string]int) {
	s.Requests = sum(requests)
	s.Writes = apistats.Total(requests, writeVerbs...)
	s.Watches = apistats.Total(requests, "watch")
	s.Lists = apistats.Total(requests, "list")
}

// StepSpread spreads one figure over a run's steps.
func (r SweepRun) StepSpread(figure func(StepSummary) float64) Spread {
	values := make([]float64, len(r.Steps))
	for i, s := range r.Steps {
		values[i] = figure(s)
	}
	return Summarize(values)
}

// PeakRSS spreads the steps' peak RSS, in MiB.
func (r SweepRun) PeakRSS() Spread {
	return r.StepSpread(func(s StepSummary) float64 { return float64(s.PeakRSSBytes) / (1 << 20) })
}

// StepsThrottled counts the steps that met a 429.
func (r SweepRun) StepsThrottled() int {
	n := 0
	for _, s := range r.Steps {
		if s.Throttled > 0 {
			n++
		}
	}
	return n
}

// RunningRatio is trainstep's time to every trial running over the
// baseline's, round by round.
func (s SweepResult) RunningRatio() Spread {
	return Summarize(Ratios(s.times(s.Trainstep, allRunning), s.times(s.Baseline, allRunning)))
}

func allRunning(r SweepRun) time.Duration { return r.AllRunning }
func allDone(r SweepRun) time.Duration    { return r.AllDone }

func (SweepResult) times(runs []SweepRun, figure func(SweepRun) time.Duration) []time.Duration {
	out := make([]time.Duration, len(runs))
	for i, r := range runs {
		out[i] = figure(r)
	}
	return out
}

// Running and Done spread a side's times to every trial running and to
// the end.
func (s SweepResult) Running(runs []SweepRun) string { return formatSeconds(s.times(runs, allRunning)) }
func (s SweepResult) Done(runs []SweepRun) string    { return formatSeconds(s.times(runs, allDone)) }

// Spread of a figure over a side's runs.
func (s SweepResult) Spread(runs []SweepRun, figure func(SweepRun) float64) Spread {
	values := make([]float64, len(runs))
	for i, r := range runs {
		values[i] = figure(r)
	}
	return Summarize(values)
}

// MaxPeakRSS is the largest peak RSS of any step in any round, in bytes.
func (s SweepResult) MaxPeakRSS() int64 {
	var most int64
	for _, r := range s.Trainstep {
		for _, st := range r.Steps {
			most = max(most, st.PeakRSSBytes)
		}
	}
	return most
}

// Problems are every round's, each naming its round.
func (s SweepResult) Problems() []string {
	var out []string
	for i, r := range s.Trainstep {
		for _, p := range r.Problems {
			out = append(out, fmt.Sprintf("%d trials, round %d: %s", s.Trials, i+1, p))
		}
	}
	return out
}

// QuotaResult is a sweep under a ResourceQuota that fits a quarter of its
// trials' replicas, under one gang kind.
type QuotaResult struct {
	Gang         string
	Trials, Pods int
	QuotaGPUs    int64
	Run          SweepRun
	// LongestWait is the longest time from the start to a trial's replicas
	// all running; MostRunning the most trials running at once.
	LongestWait time.Duration
	MostRunning int
	// Releases counts the gangs given back because the quota refused part
	// of them, from the steps' logs.
	Releases int
}

// Completed counts the trials whose step succeeded in the end.
func (q QuotaResult) Completed() int {
	n := 0
	for _, s := range q.Run.Steps {
		if s.Exit == 0 {
			n++
		}
	}
	return n
}

// IsolationResult is the check that no step touches another trial's
// objects, with two trials' steps killed at once and started again under
// the load of a whole sweep.
type IsolationResult struct {
	Trials int
	Killed []string
	Run    SweepRun
	// Checked says what was checked, one line per check, with what was seen.
	Checked []string
}

// MostRunningAtOnce is the largest number of trials with every replica
// running at the same moment.
func MostRunningAtOnce(spans []TrialRunning) int {
	type edge struct {
		at    time.Duration
		delta int
	}
	var edges []edge
	for _, s := range spans {
		edges = append(edges, edge{s.From, 1})
		if s.To > 0 {
			edges = append(edges, edge{s.To, -1})
		}
	}
	sort.Slice(edges, func(i, j int) bool {
		return edges[i].at < edges[j].at || edges[i].at == edges[j].at && edges[i].delta < edges[j].delta
	})
	running, most := 0, 0
	for _, e := range edges {
		running += e.delta
		most = max(most, running)
	}
	return most
}

// sweepTargets checks the sweep scenario's targets.
func (r Report) sweepTargets() []Target {
	if len(r.Sweeps) == 0 && len(r.Quotas) == 0 {
		return nil
	}
	var targets []Target
	if s, ok := r.Sweep(TargetSweepTrials); ok {
		ratio := s.RunningRatio()
		targets = append(targets, Target{
			Name:     fmt.Sprintf("%d trials at once: all running, trainstep/baseline", s.Trials),
			Goal:     fmt.Sprintf("≤ %.1f", TargetSweepRunningRatio),
			Measured: ratio.Format("%.2f"), Met: ratio.Runs > 0 && ratio.Median <= TargetSweepRunningRatio,
			Limit: r.sweepLimit(s),
		}, Target{
			Name: fmt.Sprintf("%d trials at once: each step's peak RSS", s.Trials), Goal: fmt.Sprintf("≤ %d MiB", TargetSweepPeakRSSBytes>>20),
			Measured: fmt.Sprintf("%.1f MiB at most", float64(s.MaxPeakRSS())/(1<<20)),
			Met:      s.MaxPeakRSS() > 0 && s.MaxPeakRSS() <= TargetSweepPeakRSSBytes,
			Limit:    "the steps' peak RSS is mostly the binary's file-backed pages; see the footprint above",
		})
	} else {
		targets = append(targets, Target{Name: fmt.Sprintf("%d trials at once", TargetSweepTrials), Goal: "as set", Measured: "not measured",
			Limit: "this run measured no sweep of that size"})
	}
	var problems []string
	runs := 0
	for _, s := range r.Sweeps {
		problems = append(problems, s.Problems()...)
		runs += len(s.Trainstep)
	}
	if p := r.SweepProfile; p != nil {
		runs++
		for _, problem := range p.Problems {
			problems = append(problems, "the profiled run: "+problem)
		}
	}
	targets = append(targets, Target{
		Name: "lost, duplicated or half-admitted trials, every sweep round", Goal: "0",
		Measured: fmt.Sprintf("%d in %d rounds", len(problems), runs), Met: runs > 0 && len(problems) == 0,
		Limit: strings.Join(problems, "; "),
	})
	for _, q := range r.Quotas {
		targets = append(targets, Target{
			Name:     fmt.Sprintf("%d trials under a quota of a quarter, gang %s: trials completed", q.Trials, q.Gang),
			Goal:     fmt.Sprintf("%d, none lost, duplicated or half admitted", q.Trials),
			Measured: fmt.Sprintf("%d, %d problems", q.Completed(), len(q.Run.Problems)),
			Met:      q.Completed() == q.Trials && len(q.Run.Problems) == 0,
			Limit:    strings.Join(q.Run.Problems, "; "),
		})
	}
	if iso := r.Isolation; iso != nil {
		targets = append(targets, Target{
			Name: fmt.Sprintf("isolation: %d trials, %s killed and started again at once", iso.Trials, strings.Join(iso.Killed, " and ")),
			Goal: "no step takes another trial's objects", Measured: fmt.Sprintf("%d problems", len(iso.Run.Problems)),
			Met: len(iso.Run.Problems) == 0, Limit: strings.Join(iso.Run.Problems, "; "),
		})
	}
	return targets
}

// Sweep is the result for n trials, if measured.
func (r Report) Sweep(n int) (SweepResult, bool) {
	for _, s := range r.Sweeps {
		if s.Trials == n {
			return s, true
		}
	}
	return SweepResult{}, false
}

// sweepLimit explains a slow sweep from what was measured.
func (r Report) sweepLimit(s SweepResult) string {
	if len(s.Trainstep) == 0 || len(s.Baseline) == 0 {
		return "no rounds"
	}
	cpu := s.Spread(s.Trainstep, func(r SweepRun) float64 { return r.APIServerCPU.Seconds() })
	baseCPU := s.Spread(s.Baseline, func(r SweepRun) float64 { return r.APIServerCPU.Seconds() })
	stepCPU := s.Spread(s.Trainstep, func(r SweepRun) float64 {
		total := 0.0
		for _, st := range r.Steps {
			total += st.CPU.Seconds()
		}
		return total
	})
	return fmt.Sprintf("%d step processes start on the machine's cores beside the control plane; their CPU over the whole run, all together, %s s; "+
		"kube-apiserver's CPU %s s against the baseline's %s s; each step's requests %s (the loop: one create per object)",
		s.Trials, stepCPU.Format("%.1f"), cpu.Format("%.1f"), baseCPU.Format("%.1f"),
		s.Trainstep[0].StepSpread(func(st StepSummary) float64 { return float64(st.Requests) }).Format("%.0f"))
}

// SweepTable is the sweep scenario's plain-text summary, with its targets.
func (r Report) SweepTable() string {
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "trials\tpods\ttrainstep: all running\tbaseline: all running\tratio\ttrainstep: all done\tpeak RSS per step\trequests per step\twrites\twatches\tkube-apiserver CPU\tp99\t429s\tretried")
	for _, s := range r.Sweeps {
		fmt.Fprintf(w, "%d\t%d\t%s\t%s\t%s\t%s\t%s MiB\t%s\t%s\t%s\t%s s\t%s s\t%s\t%s\n", s.Trials, s.Pods,
			s.Running(s.Trainstep), s.Running(s.Baseline), s.RunningRatio().Format("%.2f"), s.Done(s.Trainstep),
			s.Spread(s.Trainstep, func(r SweepRun) float64 { return r.PeakRSS().Max }).Format("%.1f"),
			s.stepMedian(func(st StepSummary) float64 { return float64(st.Requests) }),
			s.stepMedian(func(st StepSummary) float64 { return float64(st.Writes) }),
			s.stepMedian(func(st StepSummary) float64 { return float64(st.Watches) }),
			s.Spread(s.Trainstep, func(r SweepRun) float64 { return r.APIServerCPU.Seconds() }).Format("%.1f"),
			s.Spread(s.Trainstep, func(r SweepRun) float64 { return r.P99.Seconds() }).Format("%.2f"),
			s.Spread(s.Trainstep, func(r SweepRun) float64 { return float64(r.Throttled) }).Format("%.0f"),
			s.Spread(s.Trainstep, func(r SweepRun) float64 { return float64(r.Retried) }).Format("%.0f"))
	}
	for _, q := range r.Quotas {
		fmt.Fprintf(w, "quota %d GPUs for %d trials (%d GPUs), gang %s: %d completed, all done %s, the longest wait %s, at most %d running at once, %d gangs given back, %d retried, %d problems\n",
			q.QuotaGPUs, q.Trials, q.Pods, q.Gang, q.Completed(), ms(q.Run.AllDone), ms(q.LongestWait), q.MostRunning, q.Releases, q.Run.Retried, len(q.Run.Problems))
	}
	if iso := r.Isolation; iso != nil {
		fmt.Fprintf(w, "isolation, %d trials, %s killed at once: %s\n", iso.Trials, strings.Join(iso.Killed, " and "), strings.Join(iso.Checked, "; "))
	}
	fmt.Fprintln(w)
	for _, target := range r.sweepTargets() {
		status := "met"
		if !target.Met {
			status = "MISSED: " + target.Limit
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", target.Name, target.Goal, target.Measured, status)
	}
	_ = w.Flush()
	return b.String()
}

// stepMedian is the median over the rounds of the median step's figure.
func (s SweepResult) stepMedian(figure func(StepSummary) float64) string {
	return s.Spread(s.Trainstep, func(r SweepRun) float64 { return r.StepSpread(figure).Median }).Format("%.0f")
}

// SweepRow is one sweep size as the report prints it: medians over the
// rounds, with min–max.
type SweepRow struct {
	Trials, Pods                                                           int
	TrainstepRunning, BaselineRunning, Ratio                               string
	TrainstepDone, BaselineDone                                            string
	RSS, MaxRSS, Requests, Writes, Watches, Lists, CPU                     string
	APIServerCPU, BaselineAPIServerCPU, EtcdCPU, BaselineEtcdCPU           string
	P50, BaselineP50, P99, BaselineP99                                     string
	ServerRequests, BaselineServerRequests, EtcdWrites, BaselineEtcdWrites string
	Throttled, BaselineThrottled                                           string
	StepsThrottled, Retried                                                int
	Rounds                                                                 []SweepRound
	// TypicalRequests are the median step's requests in the median round.
	TypicalRequests map[string]int
}

// SweepRound is one round of a sweep size.
type SweepRound struct {
	Number              int
	First, Load         string
	Trainstep, Baseline time.Duration
	Ratio               float64
}

// SweepRows are the report's rows, one per sweep size.
func (r Report) SweepRows() []SweepRow {
	var rows []SweepRow
	for _, s := range r.Sweeps {
		ts, bl := s.Trainstep, s.Baseline
		secs := func(runs []SweepRun, d func(SweepRun) time.Duration) string {
			return s.Spread(runs, func(r SweepRun) float64 { return d(r).Seconds() }).Format("%.2f") + " s"
		}
		count := func(runs []SweepRun, n func(SweepRun) int) string {
			return s.Spread(runs, func(r SweepRun) float64 { return float64(n(r)) }).Format("%.0f")
		}
		row := SweepRow{Trials: s.Trials, Pods: s.Pods,
			TrainstepRunning: s.Running(ts), BaselineRunning: s.Running(bl), Ratio: s.RunningRatio().Format("%.2f"),
			TrainstepDone: s.Done(ts), BaselineDone: s.Done(bl),
			RSS:      s.Spread(ts, func(r SweepRun) float64 { return r.PeakRSS().Median }).Format("%.1f") + " MiB",
			MaxRSS:   fmt.Sprintf("%.1f MiB", float64(s.MaxPeakRSS())/(1<<20)),
			Requests: s.stepMedian(func(st StepSummary) float64 { return float64(st.Requests) }),
			Writes:   s.stepMedian(func(st StepSummary) float64 { return float64(st.Writes) }),
			Watches:  s.stepMedian(func(st StepSummary) float64 { return float64(st.Watches) }),
			Lists:    s.stepMedian(func(st StepSummary) float64 { return float64(st.Lists) }),
			CPU: s.Spread(ts, func(r SweepRun) float64 {
				return r.StepSpread(func(st StepSummary) float64 { return st.CPU.Seconds() }).Median * 1000
			}).Format("%.0f") + " ms",
			APIServerCPU: secs(ts, func(r SweepRun) time.Duration { return r.APIServerCPU }), BaselineAPIServerCPU: secs(bl, func(r SweepRun) time.Duration { return r.APIServerCPU }),
			EtcdCPU: secs(ts, func(r SweepRun) time.Duration { return r.EtcdCPU }), BaselineEtcdCPU: secs(bl, func(r SweepRun) time.Duration { return r.EtcdCPU }),
			P50: secs(ts, func(r SweepRun) time.Duration { return r.P50 }), BaselineP50: secs(bl, func(r SweepRun) time.Duration { return r.P50 }),
			P99: secs(ts, func(r SweepRun) time.Duration { return r.P99 }), BaselineP99: secs(bl, func(r SweepRun) time.Duration { return r.P99 }),
			ServerRequests: count(ts, func(r SweepRun) int { return r.ServerRequests }), BaselineServerRequests: count(bl, func(r SweepRun) int { return r.ServerRequests }),
			EtcdWrites: count(ts, func(r SweepRun) int { return r.StoreWrites }), BaselineEtcdWrites: count(bl, func(r SweepRun) int { return r.StoreWrites }),
			Throttled: count(ts, func(r SweepRun) int { return r.Throttled }), BaselineThrottled: count(bl, func(r SweepRun) int { return r.Throttled }),
		}
		for _, r := range ts {
			row.StepsThrottled += r.StepsThrottled()
			row.Retried += r.Retried
		}
		ratios := Ratios(s.times(ts, allRunning), s.times(bl, allRunning))
		for i, ratio := range ratios {
			round := SweepRound{Number: i + 1, First: "trainstep", Load: ts[i].Load, Trainstep: ts[i].AllRunning, Baseline: bl[i].AllRunning, Ratio: ratio}
			if round.Number%2 == 0 {
				round.First, round.Load = "baseline", bl[i].Load
			}
			row.Rounds = append(row.Rounds, round)
		}
		if i, ok := s.medianRound(); ok {
			row.TypicalRequests = ts[i].TypicalRequests
		}
		rows = append(rows, row)
	}
	return rows
}

// StageMedians says, for each of LaunchStages, when the steps reached it:
// "job loaded 12 ms, preflight done 80 ms, …", medians over the steps.
func (r SweepRun) StageMedians() string {
	var parts []string
	for _, stage := range LaunchStages {
		var at []float64
		for _, s := range r.Steps {
			if d, ok := s.Stages[stage]; ok {
				at = append(at, float64(d.Milliseconds()))
			}
		}
		if spread := Summarize(at); spread.Runs > 0 {
			parts = append(parts, fmt.Sprintf("%s %s ms", stage, spread.Format("%.0f")))
		}
	}
	return strings.Join(parts, ", ")
}
