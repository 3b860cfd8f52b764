package trainerstatus

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDecodeAcceptsTheKEPExample(t *testing.T) {
	body := `{"trainerStatus": {"progressPercentage": 45, "estimatedRemainingSeconds": 795,
		"metrics": [{"name": "loss", "value": "0.2347"}, {"name": "eval_loss", "value": "0.2451"}, {"name": "phase", "value": "warmup"}],
		"lastUpdatedTime": "2025-01-23T10:30:45Z"}, "dataInitializerStatus": {}}`
	s, err := Decode([]byte(body))
	require.NoError(t, err)
	assert.Equal(t, "training 45% (eta 13m15s) loss=0.2347 eval_loss=0.2451 phase=warmup", s.Summary())
	assert.Equal(t, map[string]any{"loss": json.Number("0.2347"), "eval_loss": json.Number("0.2451"), "phase": "warmup"}, s.MetricsMap())
}

func TestDecodeNamesTheFieldItRefuses(t *testing.T) {
	const at = `"lastUpdatedTime": "2025-01-23T10:30:45Z"`
	cases := []struct {
		name, body, field string
	}{
		{"not JSON", `{"trainerStatus":`, "body"},
		{"two objects", `{"trainerStatus": {` + at + `}} {}`, "body"},
		{"no trainerStatus", `{"status": {}}`, "trainerStatus"},
		{"null trainerStatus", `{"trainerStatus": null}`, "trainerStatus"},
		{"negative percentage", `{"trainerStatus": {"progressPercentage": -1, ` + at + `}}`, "trainerStatus.progressPercentage"},
		{"percentage over 100", `{"trainerStatus": {"progressPercentage": 101, ` + at + `}}`, "trainerStatus.progressPercentage"},
		{"fractional percentage", `{"trainerStatus": {"progressPercentage": 4.5, ` + at + `}}`, "trainerStatus.progressPercentage"},
		{"percentage as text", `{"trainerStatus": {"progressPercentage": "45", ` + at + `}}`, "trainerStatus.progressPercentage"},
		{"huge percentage", `{"trainerStatus": {"progressPercentage": 99999999999, ` + at + `}}`, "trainerStatus.progressPercentage"},
		{"negative eta", `{"trainerStatus": {"estimatedRemainingSeconds": -5, ` + at + `}}`, "trainerStatus.estimatedRemainingSeconds"},
		{"no time", `{"trainerStatus": {"progressPercentage": 5}}`, "trainerStatus.lastUpdatedTime"},
		{"bad time", `{"trainerStatus": {"lastUpdatedTime": "yesterday"}}`, "trainerStatus.lastUpdatedTime"},
		{"empty metric name", `{"trainerStatus": {"metrics": [{"name": "", "value": "1"}], ` + at + `}}`, "trainerStatus.metrics[0].name"},
		{"metric value with a space", `{"trainerStatus": {"metrics": [{"name": "a", "value": "1 2"}], ` + at + `}}`, "trainerStatus.metrics[0].value"},
		{"metric value with a newline", `{"trainerStatus": {"metrics": [{"name": "a", "value": "1\n[worker-1] x"}], ` + at + `}}`, "trainerStatus.metrics[0].value"},
		{"metric name with a quote", `{"trainerStatus": {"metrics": [{"name": "a\"", "value": "1"}], ` + at + `}}`, "trainerStatus.metrics[0].name"},
		{"duplicate metric", `{"trainerStatus": {"metrics": [{"name": "a", "value": "1"}, {"name": "a", "value": "2"}], ` + at + `}}`, "trainerStatus.metrics[1].name"},
		{"metric value as a number", `{"trainerStatus": {"metrics": [{"name": "a", "value": 1}], ` + at + `}}`, "trainerStatus.metrics.value"},
		{"long metric value", `{"trainerStatus": {"metrics": [{"name": "a", "value": "` + strings.Repeat("1", MaxMetricValueLength+1) + `"}], ` + at + `}}`, "trainerStatus.metrics[0].value"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Decode([]byte(tc.body))
			var invalid *InvalidError
			require.ErrorAs(t, err, &invalid)
			assert.Contains(t, err.Error(), tc.field+":")
		})
	}
}

func TestDecodeRefusesTooManyMetrics(t *testing.T) {
	metrics := make([]Metric, MaxMetrics+1)
	for i := range metrics {
		metrics[i] = Metric{Name: "m" + strings.Repeat("x", i), Value: "1"}
	}
	body, err := json.Marshal(map[string]any{"trainerStatus": map[string]any{"metrics": metrics, "lastUpdatedTime": "2025-01-23T10:30:45Z"}})
	require.NoError(t, err)
	_, err = Decode(body)
	assert.ErrorContains(t, err, "trainerStatus.metrics: Too many")
}

func TestSummaryWithoutProgress(t *testing.T) {
	s, err := Decode([]byte(`{"trainerStatus": {"metrics": [{"name": "loss", "value": "1.5"}], "lastUpdatedTime": "2025-01-23T10:30:45Z"}}`))
	require.NoError(t, err)
	assert.Equal(t, "training loss=1.5", s.Summary())
}
