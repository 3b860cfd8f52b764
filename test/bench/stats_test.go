package bench

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestSummarizeGivesMedianAndRange(t *testing.T) {
	tests := []struct {
		name   string
		values []float64
		want   Spread
	}{
		{"no runs", nil, Spread{}},
		{"one run", []float64{3}, Spread{Median: 3, Min: 3, Max: 3, Runs: 1}},
		{"odd count, unsorted", []float64{9, 1, 4}, Spread{Median: 4, Min: 1, Max: 9, Runs: 3}},
		{"even count averages the middle two", []float64{4, 1, 10, 2}, Spread{Median: 3, Min: 1, Max: 10, Runs: 4}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, Summarize(tc.values)); diff != "" {
				t.Errorf("Summarize(%v) (-want +got):\n%s", tc.values, diff)
			}
		})
	}
}

func TestSummarizeLeavesInputOrder(t *testing.T) {
	values := []float64{3, 1, 2}
	Summarize(values)
	if diff := cmp.Diff([]float64{3, 1, 2}, values); diff != "" {
		t.Errorf("Summarize reordered its input (-want +got):\n%s", diff)
	}
}

func TestRatiosPairRunsAndSkipZeroBaselines(t *testing.T) {
	a := []time.Duration{2 * time.Second, 3 * time.Second, time.Second}
	b := []time.Duration{time.Second, 0, 4 * time.Second}
	if diff := cmp.Diff([]float64{2, 0.25}, Ratios(a, b)); diff != "" {
		t.Errorf("Ratios (-want +got):\n%s", diff)
	}
}

func TestSpreadFormat(t *testing.T) {
	tests := []struct {
		spread Spread
		want   string
	}{
		{Spread{}, "–"},
		{Spread{Median: 1.5, Min: 1.5, Max: 1.5, Runs: 1}, "1.50"},
		{Spread{Median: 1.5, Min: 1.2, Max: 2, Runs: 3}, "1.50 (1.20–2.00)"},
		{Spread{Median: -0.001, Min: -2, Max: 0.5, Runs: 3}, "0.00 (-2.00–0.50)"},
	}
	for _, tc := range tests {
		if got := tc.spread.Format("%.2f"); got != tc.want {
			t.Errorf("%+v.Format = %q, want %q", tc.spread, got, tc.want)
		}
	}
}
