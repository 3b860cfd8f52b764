package bench

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"text/template"
	"time"

	"github.com/trainstep/trainstep/pkg/apistats"
)

// Files WriteFiles writes, relative to the repository root: the report and
// every run's figures (durations in nanoseconds), for other analyses.
const (
	BenchmarksFile = "BENCHMARKS.md"
	ResultsFile    = "docs/benchmarks/results.json"
)

//go:embed benchmarks.md.tmpl
var benchmarksTemplate string

// WriteFiles regenerates BENCHMARKS.md and the plots under root.
func (r Report) WriteFiles(root string) error {
	launch, err := LaunchPlot(r)
	if err != nil {
		return err
	}
	if err := savePlot(launch, filepath.Join(root, PlotFile)); err != nil {
		return err
	}
	rss, err := MemoryPlot(r)
	if err != nil {
		return err
	}
	if err := savePlot(rss, filepath.Join(root, MemoryPlotFile)); err != nil {
		return err
	}
	layouts, err := LayoutsPlot(r)
	if err != nil {
		return err
	}
	if layouts != nil {
		if err := savePlot(layouts, filepath.Join(root, LayoutsPlotFile)); err != nil {
			return err
		}
	}
	limits, err := RateLimitPlot(r)
	if err != nil {
		return err
	}
	if limits != nil {
		if err := savePlot(limits, filepath.Join(root, RateLimitPlotFile)); err != nil {
			return err
		}
	}
	sweep, err := SweepPlot(r)
	if err != nil {
		return err
	}
	if sweep != nil {
		if err := savePlot(sweep, filepath.Join(root, SweepPlotFile)); err != nil {
			return err
		}
	}
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding the results: %w", err)
	}
	if err := os.WriteFile(filepath.Join(root, ResultsFile), append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", ResultsFile, err)
	}
	doc, err := r.Markdown()
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(root, BenchmarksFile), doc, 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", BenchmarksFile, err)
	}
	return nil
}

// Markdown renders BENCHMARKS.md.
func (r Report) Markdown() ([]byte, error) {
	tmpl, err := template.New("benchmarks").Funcs(templateFuncs).Parse(benchmarksTemplate)
	if err != nil {
		return nil, fmt.Errorf("parsing the report template: %w", err)
	}
	var out bytes.Buffer
	if err := tmpl.Execute(&out, r); err != nil {
		return nil, fmt.Errorf("rendering the report: %w", err)
	}
	return out.Bytes(), nil
}

// SweepMarkdown renders BENCHMARKS.md's sweep section alone, as the sweep
// scenario run by itself logs it.
func (r Report) SweepMarkdown() ([]byte, error) {
	tmpl, err := template.New("benchmarks").Funcs(templateFuncs).Parse(benchmarksTemplate)
	if err != nil {
		return nil, fmt.Errorf("parsing the report template: %w", err)
	}
	var out bytes.Buffer
	if err := tmpl.ExecuteTemplate(&out, "sweeps", r); err != nil {
		return nil, fmt.Errorf("rendering the sweep section: %w", err)
	}
	return out.Bytes(), nil
}

// WriteSweepPlot writes the plot of trials running over time alone.
func (r Report) WriteSweepPlot(root string) error {
	sweep, err := SweepPlot(r)
	if err != nil || sweep == nil {
		return err
	}
	return savePlot(sweep, filepath.Join(root, SweepPlotFile))
}

var templateFuncs = template.FuncMap{
	"seconds": formatSeconds,
	"millis":  formatMillis,
	"mib":     formatMiB,
	"ratio":   func(s Spread) string { return s.Format("%.2f") },
	"median":  func(ds []time.Duration) float64 { return Summarize(Seconds(ds)).Median },
	"count":   func(runs RequestRuns, verbs ...string) string { return runs.Count(verbs...).Format("%.0f") },
	"sum":     sum,
	"limit":   RequestLimit,
	"date":    func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04 MST") },
	"round":   func(d time.Duration) time.Duration { return d.Round(time.Second) },
	"mark": func(met bool) string {
		if met {
			return "met"
		}
		return "**missed**"
	},
	"requestRows":   requestRows,
	"teardownGrace": func() time.Duration { return TeardownGrace },
	"largest":       func(r Report) SizeResult { return r.Sizes[len(r.Sizes)-1] },
	"megabytes":     func(b int64) float64 { return float64(b) / 1e6 },
	"size": func(r Report, n int) *SizeResult {
		if s, ok := r.Size(n); ok {
			return &s
		}
		return nil
	},
	"teardown":    func(r Report, n int) TeardownResult { t, _ := r.Teardown(n); return t },
	"targetSize":  func() int { return TargetReplicas },
	"largeSize":   func() int { return TargetLargeReplicas },
	"slopeGrowth": func() float64 { return TargetSlopeGrowth },
	"indent":      func(s string) string { return "    " + strings.ReplaceAll(s, "\n", "\n    ") },
	"percent": func(part, whole time.Duration) string {
		return fmt.Sprintf("%.0f%%", 100*part.Seconds()/whole.Seconds())
	},
	"bytesMiB":    func(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) },
	"toMiB":       func(b float64) float64 { return b / (1 << 20) },
	"layoutRows":  func(r Report) []LayoutRow { return r.LayoutRows() },
	"dec":         func(n int) int { return n - 1 },
	"sweepTrials": func() int { return TargetSweepTrials },
}

// ms prints a duration to the millisecond.
func ms(d time.Duration) string { return d.Round(time.Millisecond).String() }

func formatSeconds(ds []time.Duration) string { return Summarize(Seconds(ds)).Format("%.2f") + " s" }
func formatMillis(ds []time.Duration) string  { return Summarize(millis(ds)).Format("%.0f") + " ms" }
func formatMiB(bytes []float64) string        { return Summarize(mebibytes(bytes)).Format("%.1f") + " MiB" }

// requestRow is one "verb resource" line of a comparison table.
type requestRow struct {
	Key         string
	Left, Right int
}

// requestRows lines up two request counts by key.
func requestRows(left, right map[string]int) []requestRow {
	keys := map[string]int{}
	for k, v := range left {
		keys[k] = v
	}
	for k := range right {
		keys[k] += 0
	}
	var rows []requestRow
	for _, k := range apistats.Sorted(keys) {
		rows = append(rows, requestRow{Key: k, Left: left[k], Right: right[k]})
	}
	return rows
}

// Table is the plain-text summary the test prints.
func (r Report) Table() string {
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "workers\ttrainstep created\tbaseline created\tratio\ttrainstep running\tbaseline running\tratio")
	for _, s := range r.Sizes {
		fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%s\t%s\t%s\n", s.Replicas,
			formatSeconds(s.Trainstep.Created), formatSeconds(s.Baseline.Created), s.CreatedRatio().Format("%.2f"),
			formatSeconds(s.Trainstep.Running), formatSeconds(s.Baseline.Running), s.RunningRatio().Format("%.2f"))
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "workers\tdetection\tend → outputs (cleanPodPolicy Running)\tpeak RSS\tCPU\tcreates\tdeletes\tlimit")
	for _, s := range r.Sizes {
		fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%d\n", s.Replicas,
			formatMillis(s.Detection), formatMillis(s.EndToOutputs), formatMiB(s.PeakRSSBytes), formatSeconds(s.CPU),
			s.CleanRequests.Count("create").Format("%.0f"), s.CleanRequests.Count("delete").Format("%.0f"), RequestLimit(s.Replicas))
	}
	fmt.Fprintln(w)
	for _, t := range r.Teardowns {
		fmt.Fprintf(w, "teardown of %d workers: gone %s, trainstep exited %s; baseline %s %s, %s %s; ratio %s\n", t.Replicas,
			formatSeconds(t.Gone), formatSeconds(t.Exited), DeleteLoop, formatSeconds(t.BaselineLoop),
			DeleteByLabel, formatSeconds(t.BaselineCollection), t.Ratio().Format("%.2f"))
	}
	for _, l := range r.LayoutRows() {
		fmt.Fprintf(w, "layouts at %d workers: created per job %s, per replica %s, ratio %s; end → outputs per job %s, per replica %s; etcd writes per replica: per job %s (%s), per replica %s (%s), loop %s\n",
			l.Replicas, formatSeconds(l.PerJob.Created), formatSeconds(l.PerReplica.Created), l.CreatedRatio.Format("%.2f"),
			formatSeconds(l.PerJobEnd), formatSeconds(l.PerReplicaEnd),
			l.PerJobWrites.Format("%.2f"), l.PerJobByResource, l.PerReplicaWrites.Format("%.2f"), l.PerReplicaByResource, l.BaselineWrites.Format("%.2f"))
	}
	if m := r.MaxLaunch; m.Replicas > 0 {
		fmt.Fprintf(w, "launch of %d workers: created %s, running %s, detection %s, %.2f etcd writes per replica\n",
			m.Replicas, m.Created.Round(time.Millisecond), m.Running.Round(time.Millisecond), m.Detection.Round(time.Millisecond), m.WritesPerReplica())
	}
	if r.Polling.LongRequests != nil {
		fmt.Fprintf(w, "polling check, requests: %s job %d, %s job %d\n", r.Polling.Short, sum(r.Polling.ShortRequests), r.Polling.Long, sum(r.Polling.LongRequests))
	}
	fmt.Fprintln(w)
	if len(r.RateLimits) > 0 {
		fmt.Fprintln(w, "qps/burst\tall created")
		for _, rl := range r.RateLimits {
			fmt.Fprintf(w, "%s\t%s\n", rl.Label(), formatSeconds(rl.Created))
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w, "target\tgoal\tmeasured\t")
	for _, target := range r.Targets() {
		status := "met"
		if !target.Met {
			status = "MISSED"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", target.Name, target.Goal, target.Measured, status)
	}
	_ = w.Flush()
	return b.String()
}
