package bench

import (
	"fmt"
	"image/color"
	"sort"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// SweepPlotFile is the plot of trials running over time.
const SweepPlotFile = "docs/benchmarks/sweep.svg"

// Colours of the quota runs, by gang kind.
var quotaColors = []color.Color{
	color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff},
	color.RGBA{R: 0x94, G: 0x67, B: 0xbd, A: 0xff},
	color.RGBA{R: 0x8c, G: 0x56, B: 0x4b, A: 0xff},
}

// runningSteps is the number of trials with every replica running, as a
// step function of the seconds from the start: a point where it changes,
// and one just before with the count before.
func runningSteps(spans []TrialRunning) plotter.XYs {
	type edge struct {
		at    float64
		delta int
	}
	var edges []edge
	for _, s := range spans {
		edges = append(edges, edge{s.From.Seconds(), 1})
		if s.To > 0 {
			edges = append(edges, edge{s.To.Seconds(), -1})
		}
	}
	sort.Slice(edges, func(i, j int) bool { return edges[i].at < edges[j].at })
	points := plotter.XYs{{X: 0, Y: 0}}
	running := 0
	for _, e := range edges {
		points = append(points, plotter.XY{X: e.at, Y: float64(running)})
		running += e.delta
		points = append(points, plotter.XY{X: e.at, Y: float64(running)})
	}
	return points
}

// SweepPlot draws the trials with every replica running against the time
// from the start: in the largest sweep's round with the median ratio,
// trainstep's steps and the baseline loop, and in each quota run; nil
// without a sweep.
func SweepPlot(r Report) (*plot.Plot, error) {
	if len(r.Sweeps) == 0 && len(r.Quotas) == 0 {
		return nil, nil
	}
	p := plot.New()
	p.Title.Text = "Trials with every replica running, from the start of the sweep"
	p.X.Label.Text = "seconds from the start (every step process started at once)"
	p.Y.Label.Text = "trials running"
	p.Legend.Top, p.Legend.Left = true, false
	add := func(name string, spans []TrialRunning, c color.Color, dashes []vg.Length) error {
		line, err := plotter.NewLine(runningSteps(spans))
		if err != nil {
			return fmt.Errorf("plotting %s: %w", name, err)
		}
		line.Color, line.Dashes, line.Width = c, dashes, vg.Points(1.5)
		p.Add(line)
		p.Legend.Add(name, line)
		return nil
	}
	if len(r.Sweeps) > 0 {
		s := r.Sweeps[len(r.Sweeps)-1]
		if i, ok := s.medianRound(); ok {
			if err := add(fmt.Sprintf("trainstep, %d trials (%d pods)", s.Trials, s.Pods), s.Trainstep[i].Spans, trainstepColor, nil); err != nil {
				return nil, err
			}
			if err := add("baseline loop, the same pods", s.Baseline[i].Spans, baselineColor, runningDashes); err != nil {
				return nil, err
			}
		}
	}
	for i, q := range r.Quotas {
		name := fmt.Sprintf("trainstep, %d trials, gang %s, quota of a quarter", q.Trials, q.Gang)
		if err := add(name, q.Run.Spans, quotaColors[i%len(quotaColors)], nil); err != nil {
			return nil, err
		}
	}
	p.Y.Min, p.X.Min = 0, 0
	return p, nil
}

// medianRound is the round whose ratio is the median one (the lower middle
// for an even count).
func (s SweepResult) medianRound() (int, bool) {
	ratios := Ratios(s.times(s.Trainstep, allRunning), s.times(s.Baseline, allRunning))
	if len(ratios) == 0 {
		return 0, false
	}
	order := make([]int, len(ratios))
	for i := range order {
		order[i] = i
	}
	sort.Slice(order, func(a, b int) bool { return ratios[order[a]] < ratios[order[b]] })
	return order[(len(order)-1)/2], true
}
