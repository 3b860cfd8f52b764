package bench

import (
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// Plot files, relative to the repository root (BENCHMARKS.md links them).
const (
	PlotFile          = "docs/benchmarks/launch.svg"
	RateLimitPlotFile = "docs/benchmarks/rate-limits.svg"
	MemoryPlotFile    = "docs/benchmarks/memory.svg"
	LayoutsPlotFile   = "docs/benchmarks/layouts.svg"
)

var (
	trainstepColor  = color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}
	baselineColor   = color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}
	perReplicaColor = color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff}
	runningDashes   = []vg.Length{vg.Points(6), vg.Points(3)}
	anonColor       = color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff}
	fileColor       = color.RGBA{R: 0x94, G: 0x67, B: 0xbd, A: 0xff}
	limitDashes     = []vg.Length{vg.Points(2), vg.Points(2)}
)

// series is one line of medians with min–max error bars.
type series struct {
	name    string
	x       []float64
	samples [][]float64
	color   color.Color
	dashes  []vg.Length
}

// seconds turns each run's durations into seconds for a series.
func seconds(runs [][]time.Duration) [][]float64 {
	out := make([][]float64, len(runs))
	for i, ds := range runs {
		out[i] = Seconds(ds)
	}
	return out
}

// medianPoints are a series' medians with their distance to min and max.
type medianPoints struct {
	plotter.XYs
	plotter.YErrors
}

func (s series) points() medianPoints {
	var m medianPoints
	for i, samples := range s.samples {
		spread := Summarize(samples)
		if spread.Runs == 0 {
			continue
		}
		m.XYs = append(m.XYs, plotter.XY{X: s.x[i], Y: spread.Median})
		m.YErrors = append(m.YErrors, struct{ Low, High float64 }{spread.Median - spread.Min, spread.Max - spread.Median})
	}
	return m
}

func (s series) addTo(p *plot.Plot) error {
	pts := s.points()
	if len(pts.XYs) == 0 {
		return nil
	}
	line, marks, err := plotter.NewLinePoints(pts.XYs)
	if err != nil {
		return fmt.Errorf("plotting %s: %w", s.name, err)
	}
	line.Color, line.Dashes, line.Width = s.color, s.dashes, vg.Points(1.5)
	marks.Color, marks.Shape = s.color, draw.CircleGlyph{}
	bars, err := plotter.NewYErrorBars(pts)
	if err != nil {
		return fmt.Errorf("plotting %s error bars: %w", s.name, err)
	}
	bars.Color = s.color
	p.Add(line, marks, bars)
	p.Legend.Add(s.name, line, marks)
	return nil
}

// LaunchPlot draws time to all objects created and to all pods Running
// against the job size, for trainstep and the baseline.
func LaunchPlot(r Report) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = "Launch: trainstep vs a parallel client-go loop (median, min–max)"
	p.X.Label.Text = "workers (a pod each; one headless Service for the job)"
	p.Y.Label.Text = "seconds from start"
	p.X.Scale, p.Y.Scale = plot.LogScale{}, plot.LogScale{}
	p.Y.Tick.Marker = oneTwoFiveTicks()
	var x []float64
	var ticks []plot.Tick
	var tsCreated, tsRunning, blCreated, blRunning [][]time.Duration
	for _, s := range r.Sizes {
		x = append(x, float64(s.Replicas))
		ticks = append(ticks, plot.Tick{Value: float64(s.Replicas), Label: strconv.Itoa(s.Replicas)})
		tsCreated, tsRunning = append(tsCreated, s.Trainstep.Created), append(tsRunning, s.Trainstep.Running)
		blCreated, blRunning = append(blCreated, s.Baseline.Created), append(blRunning, s.Baseline.Running)
	}
	p.X.Tick.Marker = plot.ConstantTicks(ticks)
	p.Legend.Top, p.Legend.Left = true, true
	for _, s := range []series{
		{"trainstep: all created", x, seconds(tsCreated), trainstepColor, nil},
		{"trainstep: all Running", x, seconds(tsRunning), trainstepColor, runningDashes},
		{"baseline: all created", x, seconds(blCreated), baselineColor, nil},
		{"baseline: all Running", x, seconds(blRunning), baselineColor, runningDashes},
	} {
		if err := s.addTo(p); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// LayoutsPlot draws trainstep's time to all objects created and to all pods
// Running under the per-job and the per-replica Service layout, at the sizes
// measured under both; nil when there are none.
func LayoutsPlot(r Report) (*plot.Plot, error) {
	rows := r.LayoutRows()
	if len(rows) == 0 {
		return nil, nil
	}
	p := plot.New()
	p.Title.Text = "Launch by Service layout: one for the job vs one per replica (median, min–max)"
	p.X.Label.Text = "workers"
	p.Y.Label.Text = "seconds from start"
	p.X.Scale, p.Y.Scale = plot.LogScale{}, plot.LogScale{}
	p.Y.Tick.Marker = oneTwoFiveTicks()
	var x []float64
	var ticks []plot.Tick
	var jobCreated, jobRunning, replicaCreated, replicaRunning [][]time.Duration
	for _, row := range rows {
		x = append(x, float64(row.Replicas))
		ticks = append(ticks, plot.Tick{Value: float64(row.Replicas), Label: strconv.Itoa(row.Replicas)})
		jobCreated, jobRunning = append(jobCreated, row.PerJob.Created), append(jobRunning, row.PerJob.Running)
		replicaCreated, replicaRunning = append(replicaCreated, row.PerReplica.Created), append(replicaRunning, row.PerReplica.Running)
	}
	p.X.Tick.Marker = plot.ConstantTicks(ticks)
	p.Legend.Top, p.Legend.Left = true, true
	for _, s := range []series{
		{"per job: all created", x, seconds(jobCreated), trainstepColor, nil},
		{"per job: all Running", x, seconds(jobRunning), trainstepColor, runningDashes},
		{"per replica: all created", x, seconds(replicaCreated), perReplicaColor, nil},
		{"per replica: all Running", x, seconds(replicaRunning), perReplicaColor, runningDashes},
	} {
		if err := s.addTo(p); err != nil {
			return nil, err
		}
	}
	// Room around the sizes and the error bars, so neither ends on an axis.
	p.X.Min, p.X.Max = x[0]/1.5, x[len(x)-1]*1.5
	p.Y.Min, p.Y.Max = p.Y.Min/1.2, p.Y.Max*1.2
	return p, nil
}

// RateLimitPlot draws the launch of the job the rate limits were measured
// at against trainstep's client rate limit, with the baseline's median as a reference line.
func RateLimitPlot(r Report) (*plot.Plot, error) {
	if len(r.RateLimits) == 0 {
		return nil, nil
	}
	n := r.RateLimits[0].Replicas
	p := plot.New()
	p.Title.Text = fmt.Sprintf("Launch of %d workers by --kube-api-qps/--kube-api-burst (median, min–max)", n)
	p.X.Label.Text = "--kube-api-qps"
	p.Y.Label.Text = "seconds from start"
	p.X.Scale = plot.LogScale{}
	var x []float64
	var ticks []plot.Tick
	var created [][]time.Duration
	for _, rl := range r.RateLimits {
		x = append(x, rl.plotQPS())
		ticks = append(ticks, plot.Tick{Value: rl.plotQPS(), Label: rl.Label()})
		created = append(created, rl.Created)
	}
	p.X.Tick.Marker = plot.ConstantTicks(ticks)
	p.Legend.Top = true
	if err := (series{"trainstep: all created", x, seconds(created), trainstepColor, nil}).addTo(p); err != nil {
		return nil, err
	}
	size, _ := r.Size(n)
	if baseline := Summarize(Seconds(size.Baseline.Created)); baseline.Runs > 0 {
		ref := plotter.NewFunction(func(float64) float64 { return baseline.Median })
		ref.Color, ref.Dashes = baselineColor, limitDashes
		p.Add(ref)
		p.Legend.Add("baseline: all created (no client limit)", ref)
	}
	p.Y.Min = 0
	p.X.Min, p.X.Max = p.X.Min/1.3, p.X.Max*1.3 // room for the end labels
	return p, nil
}

// MemoryPlot draws trainstep's peak resident memory, and its anonymous and
// file-backed parts, against the job size, with the targets' limits.
func MemoryPlot(r Report) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = "trainstep's peak resident memory (median, min–max)"
	p.X.Label.Text = "workers (a pod each; one headless Service for the job)"
	p.Y.Label.Text = "MiB"
	p.X.Scale = plot.LogScale{}
	var x []float64
	var ticks []plot.Tick
	var rss, anon, file [][]float64
	for _, s := range r.Sizes {
		x = append(x, float64(s.Replicas))
		ticks = append(ticks, plot.Tick{Value: float64(s.Replicas), Label: strconv.Itoa(s.Replicas)})
		rss, anon, file = append(rss, mebibytes(s.PeakRSSBytes)), append(anon, mebibytes(s.PeakAnonBytes)), append(file, mebibytes(s.PeakFileBytes))
	}
	p.X.Tick.Marker = plot.ConstantTicks(ticks)
	p.Legend.Top, p.Legend.Left = true, true
	for _, s := range []series{
		{"peak RSS (VmHWM)", x, rss, trainstepColor, nil},
		{"anonymous (heap, stacks)", x, anon, anonColor, runningDashes},
		{"file-backed (the binary's pages)", x, file, fileColor, runningDashes},
	} {
		if err := s.addTo(p); err != nil {
			return nil, err
		}
	}
	for _, limit := range []struct {
		n     int
		bytes int64
	}{{TargetReplicas, TargetPeakRSSBytes}, {TargetLargeReplicas, TargetLargePeakRSSBytes}} {
		mib := float64(limit.bytes >> 20)
		target, err := plotter.NewLine(plotter.XYs{{X: float64(limit.n) / 1.15, Y: mib}, {X: float64(limit.n) * 1.15, Y: mib}})
		if err != nil {
			return nil, fmt.Errorf("plotting the RSS target: %w", err)
		}
		target.Color, target.Dashes, target.Width = baselineColor, limitDashes, vg.Points(1.5)
		p.Add(target)
		if limit.n == TargetReplicas {
			p.Legend.Add(fmt.Sprintf("target: %d MiB at %d, %d MiB at %d", TargetPeakRSSBytes>>20, TargetReplicas,
				TargetLargePeakRSSBytes>>20, TargetLargeReplicas), target)
		}
	}
	p.Y.Min = 0
	if len(x) > 0 {
		p.X.Min, p.X.Max = min(p.X.Min, x[0])/1.3, max(p.X.Max, x[len(x)-1])*1.3
	}
	return p, nil
}

// oneTwoFiveTicks label a log axis at 1, 2 and 5 times each power of ten:
// a decade alone leaves most of a short axis unlabelled.
func oneTwoFiveTicks() plot.ConstantTicks {
	var ticks plot.ConstantTicks
	for exp := -2; exp <= 3; exp++ {
		for _, m := range []float64{1, 2, 5} {
			v := m * math.Pow10(exp)
			ticks = append(ticks, plot.Tick{Value: v, Label: strconv.FormatFloat(v, 'g', -1, 64)})
		}
	}
	return ticks
}

// savePlot writes p as an SVG at path, creating the directory.
func savePlot(p *plot.Plot, path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("creating plot directory: %w", err)
	}
	if err := p.Save(9*vg.Inch, 5.5*vg.Inch, path); err != nil {
		return fmt.Errorf("saving plot %s: %w", path, err)
	}
	return nil
}
