package bench

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// Spread summarises repeated measurements of one figure.
type Spread struct {
	Median, Min, Max float64
	Runs             int
}

// Summarize returns the median, minimum and maximum of values (the mean of
// the two middle values for an even count). No values give a zero Spread.
func Summarize(values []float64) Spread {
	if len(values) == 0 {
		return Spread{}
	}
	sorted := append([]float64(nil), values...)
	sort.Float64s(sorted)
	n := len(sorted)
	median := sorted[n/2]
	if n%2 == 0 {
		median = (sorted[n/2-1] + sorted[n/2]) / 2
	}
	return Spread{Median: median, Min: sorted[0], Max: sorted[n-1], Runs: n}
}

// Seconds turns durations into seconds for Summarize.
func Seconds(ds []time.Duration) []float64 {
	out := make([]float64, len(ds))
	for i, d := range ds {
		out[i] = d.Seconds()
	}
	return out
}

// Ratios divides a[i] by b[i]: paired measurements taken back to back, so
// the machine's drift cancels out of each ratio.
func Ratios(a, b []time.Duration) []float64 {
	var out []float64
	for i := range min(len(a), len(b)) {
		if b[i] > 0 {
			out = append(out, a[i].Seconds()/b[i].Seconds())
		}
	}
	return out
}

// Format prints the spread with format for each value: "median (min–max)",
// or just the value for a single run.
func (s Spread) Format(format string) string {
	if s.Runs == 0 {
		return "–"
	}
	median := formatValue(format, s.Median)
	if s.Runs == 1 || s.Min == s.Max {
		return median
	}
	return median + " (" + formatValue(format, s.Min) + "–" + formatValue(format, s.Max) + ")"
}

// formatValue formats v, writing a value that rounds to zero as zero rather than "-0".
func formatValue(format string, v float64) string {
	out := fmt.Sprintf(format, v)
	if strings.HasPrefix(out, "-") && strings.Trim(out, "-0.") == "" {
		return out[1:]
	}
	return out
}
