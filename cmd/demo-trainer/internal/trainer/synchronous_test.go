package trainer

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

func TestRunSingleConvergesAndWritesMetrics(t *testing.T) {
	cases := []struct {
		name      string
		steps     int
		target    float64
		wantSteps func(int) bool
	}{
		{"fixed number of steps", 150, 0, func(n int) bool { return n == 150 }},
		{"target loss ends early", 1000, 0.05, func(n int) bool { return n > 1 && n < 1000 }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := DefaultSettings()
			s.Steps, s.TargetLoss = tc.steps, tc.target
			s.TerminationMessagePath = filepath.Join(t.TempDir(), "termination-log")
			var out bytes.Buffer
			if err := RunSingle(context.Background(), s, NewLogger(&out)); err != nil {
				t.Fatalf("RunSingle: %v\n%s", err, out.String())
			}
			body, err := os.ReadFile(s.TerminationMessagePath)
			if err != nil {
				t.Fatalf("reading metrics: %v", err)
			}
			var m Metrics
			if err := json.Unmarshal(body, &m); err != nil {
				t.Fatalf("metrics %s: %v", body, err)
			}
			data, _ := Generate(s.Seed, s.Samples, s.Features)
			initial := data.Loss(make([]float64, s.Features))
			if !tc.wantSteps(m.Steps) {
				t.Errorf("stopped after %d steps", m.Steps)
			}
			if tc.target > 0 && m.Loss > tc.target {
				t.Errorf("stopped at loss %v above the target %v", m.Loss, tc.target)
			}
			if tc.target == 0 && m.Loss > 0.01*initial {
				t.Errorf("final loss %v is not below 1%% of the initial %v", m.Loss, initial)
			}
			if got := data.Loss(m.Weights); got != m.Loss {
				t.Errorf("metrics say loss %v, the weights give %v", m.Loss, got)
			}
		})
	}
}
