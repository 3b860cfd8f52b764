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
)

var (
	trainstepColor = color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}
	baselineColor  = color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}
	runningDashes  = []vg.Length{vg.Points(6), vg.Points(3)}
)

// series is one line of medians with min–max error bars.
type series struct {
	name    string
	x       []float64
	samples [][]time.Duration
	color   color.Color
	dashes  []vg.Length
}

// medianPoints are a series' medians with their distance to min and max.
type medianPoints struct {
	plotter.XYs
	plotter.YErrors
}

func (s series) points() medianPoints {
	var m medianPoints
	for i, samples := range s.samples {
		spread := Summarize(Seconds(samples))
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
	p.X.Label.Text = "workers (one pod and one headless Service each)"
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
		{"trainstep: all created", x, tsCreated, trainstepColor, nil},
		{"trainstep: all Running", x, tsRunning, trainstepColor, runningDashes},
		{"baseline: all created", x, blCreated, baselineColor, nil},
		{"baseline: all Running", x, blRunning, baselineColor, runningDashes},
	} {
		if err := s.addTo(p); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// RateLimitPlot draws the largest job's launch against trainstep's client
// rate limit, with the baseline's median as a reference line.
func RateLimitPlot(r Report) (*plot.Plot, error) {
	if len(r.RateLimits) == 0 || len(r.Sizes) == 0 {
		return nil, nil
	}
	largest := r.Sizes[len(r.Sizes)-1]
	p := plot.New()
	p.Title.Text = fmt.Sprintf("Launch of %d workers by --kube-api-qps/--kube-api-burst (median, min–max)", largest.Replicas)
	p.X.Label.Text = "--kube-api-qps"
	p.Y.Label.Text = "seconds from start"
	p.X.Scale = plot.LogScale{}
	var x []float64
	var ticks []plot.Tick
	var created [][]time.Duration
	for _, rl := range r.RateLimits {
		x = append(x, float64(rl.QPS))
		ticks = append(ticks, plot.Tick{Value: float64(rl.QPS), Label: rl.Label()})
		created = append(created, rl.Created)
	}
	p.X.Tick.Marker = plot.ConstantTicks(ticks)
	p.Legend.Top = true
	if err := (series{"trainstep: all created", x, created, trainstepColor, nil}).addTo(p); err != nil {
		return nil, err
	}
	if baseline := Summarize(Seconds(largest.Baseline.Created)); baseline.Runs > 0 {
		ref := plotter.NewFunction(func(float64) float64 { return baseline.Median })
		ref.Color, ref.Dashes = baselineColor, []vg.Length{vg.Points(2), vg.Points(2)}
		p.Add(ref)
		p.Legend.Add("baseline: all created (no client limit)", ref)
	}
	p.Y.Min = 0
	p.X.Min, p.X.Max = p.X.Min/1.3, p.X.Max*1.3 // room for the end labels
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
