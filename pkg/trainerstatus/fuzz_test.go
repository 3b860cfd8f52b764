package trainerstatus

import (
	"encoding/json"
	"strings"
	"testing"
)

// FuzzDecode feeds the decoder what a replica could send. Whatever it is,
// Decode must not panic, and a status it accepts must be within bounds and
// print as one line without quotes or control characters.
func FuzzDecode(f *testing.F) {
	for _, seed := range []string{
		`{"trainerStatus": {"progressPercentage": 45, "estimatedRemainingSeconds": 795, "metrics": [{"name": "loss", "value": "0.2347"}], "lastUpdatedTime": "2025-01-23T10:30:45Z"}}`,
		`{"trainerStatus": {"lastUpdatedTime": "2025-01-23T10:30:45.123+02:00"}}`,
		`{"trainerStatus": {"progressPercentage": 101, "lastUpdatedTime": "2025-01-23T10:30:45Z"}}`,
		`{"trainerStatus": {"metrics": [{"name": "a", "value": "\u0000"}], "lastUpdatedTime": "2025-01-23T10:30:45Z"}}`,
		`{"trainerStatus": null}`,
		`{"trainerStatus": []}`,
		`[]`,
		`{"trainerStatus": {"progressPercentage": 1e400}}`,
		``,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		s, err := Decode(body)
		if err != nil {
			if s != nil {
				t.Fatalf("a refused body gave a status: %+v", s)
			}
			return
		}
		if p := s.ProgressPercentage; p != nil && (*p < 0 || *p > 100) {
			t.Fatalf("accepted progress %d", *p)
		}
		if e := s.EstimatedRemainingSeconds; e != nil && *e < 0 {
			t.Fatalf("accepted eta %d", *e)
		}
		if s.LastUpdatedTime.IsZero() || len(s.Metrics) > MaxMetrics {
			t.Fatalf("accepted %+v", s)
		}
		line := s.Summary()
		if strings.ContainsAny(line, "\"\\\n\r\x00") {
			t.Fatalf("summary %q holds a character a log line must not", line)
		}
		if _, err := json.Marshal(s.MetricsMap()); err != nil {
			t.Fatalf("metrics do not encode: %v", err)
		}
	})
}
