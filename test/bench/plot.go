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

// launchSide is one side of a launch plot: its times to all objects created and to all
// pods Running, one list of runs per size.
type launchSide struct {
	name             string
	color            color.Color
	created, running [][]time.Duration
}

// launchTimesPlot draws each side's time to all created (solid) and to all Running
// (dashed) against the job sizes, both axes logarithmic.
func launchTimesPlot(title, xLabel string, sizes []int, sides ...launchSide) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = xLabel
	p.Y.Label.Text = "seconds from start"
	p.X.Scale, p.Y.Scale = plot.LogScale{}, plot.LogScale{}
	p.Y.Tick.Marker = oneTwoFiveTicks()
	var x []float64
	var ticks []plot.Tick
	for _, n := range sizes {
		x = append(x, float64(n))
		ticks = append(ticks, plot.Tick{Value: float64(n), Label: strconv.Itoa(n)})
	}
	p.X.Tick.Marker = plot.ConstantTicks(ticks)
	p.Legend.Top, p.Legend.Left = true, true
	for _, side := range sides {
		for _, s := range []series{
			{side.name + ": all created", x, seconds(side.created), side.color, nil},
			{side.name + ": all Running", x, seconds(side.running), side.color, runningDashes},
		} {
			if err := s.addTo(p); err != nil {
				return nil, err
			}
		}
	}
	return p, nil
}

// LaunchPlot draws the time to all objects created and to all pods Running
// against the job size, for trainstep and the baseline.
func LaunchPlot(r Report) (*plot.Plot, error) {
	var sizes []int
	trainstep := launchSide{name: "trainstep", color: trainstepColor}
	baseline := launchSide{name: "baseline", color: baselineColor}
	for _, s := range r.Sizes {
		sizes = append(sizes, s.Replicas)
		trainstep.created, trainstep.running = append(trainstep.created, s.Trainstep.Created), append(trainstep.running, s.Trainstep.Running)
		baseline.created, baseline.running = append(baseline.created, s.Baseline.Created), append(baseline.running, s.Baseline.Running)
	}
	return launchTimesPlot("Launch: trainstep vs a parallel client-go loop (median, min–max)",
		"workers (a pod each; one headless Service for the job)", sizes, trainstep, baseline)
}

// LayoutsPlot draws trainstep's time to all objects created and to all pods
// Running under the per-job and the per-replica Service layout, at the sizes
// measured under both; nil when there are none.
func LayoutsPlot(r Report) (*plot.Plot, error) {
	rows := r.LayoutRows()
	if len(rows) == 0 {
		return nil, nil
	}
	var sizes []int
	perJob := launchSide{name: "per job", color: trainstepColor}
	perReplica := launchSide{name: "per replica", color: perReplicaColor}
	for _, row := range rows {
		sizes = append(sizes, row.Replicas)
		perJob.created, perJob.running = append(perJob.created, row.PerJob.Created), append(perJob.running, row.PerJob.Running)
		perReplica.created, perReplica.running = append(perReplica.created, row.PerReplica.Created), append(perReplica.running, row.PerReplica.Running)
	}
	p, err := launchTimesPlot("Launch by Service layout: one for the job vs one per replica (median, min–max)",
		"workers", sizes, perJob, perReplica)
	if err != nil {
		return nil, err
	}
	// Room around the sizes and the error bars, so neither ends on an axis.
	p.X.Min, p.X.Max = float64(sizes[0])/1.5, float64(sizes[len(sizes)-1])*1.5
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
