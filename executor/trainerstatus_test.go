package executor

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/trainstep/trainstep/internal/testutil"
	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/result"
	"github.com/trainstep/trainstep/pkg/trainerstatus"
)

func TestStatusLogTapTakesOnlyALeadersStatusLine(t *testing.T) {
	job := testutil.NewJob(v1alpha1.FrameworkPyTorch, "j", "", testutil.Replicas{v1alpha1.ReplicaTypeMaster: 1, v1alpha1.ReplicaTypeWorker: 2})
	cfg := &Config{}
	cfg.setDefaults()
	e := newStatusEndpoint(cfg, job, "ns", trainerstatus.Material{}, zap.NewNop())
	var out bytes.Buffer
	tap := e.tapLogs(&out)
	status := func(pct string) string {
		return `{"trainerStatus": {"progressPercentage": ` + pct + `, "lastUpdatedTime": "2025-01-23T10:30:45Z"}}`
	}
	lines := []string{
		"[worker-1] " + status("20"),         // not a leader
		"[master-0] step 3 " + status("30"),  // not only the object
		"[master-0] " + status("101"),        // invalid
		"[master-0] " + status("40") + " {}", // two objects
	}
	for _, l := range lines {
		_, err := tap.Write([]byte(l + "\n"))
		require.NoError(t, err)
	}
	assert.Nil(t, e.lastStatus())
	_, err := tap.Write([]byte("[master-0] " + status("10") + "\n[master-0] after\n"))
	require.NoError(t, err)
	require.NotNil(t, e.lastStatus())
	assert.EqualValues(t, 10, *e.lastStatus().ProgressPercentage)
	assert.Equal(t, 6, strings.Count(out.String(), "\n"), "every line still reaches the log")

	var res result.Result
	e.finish(&res)
	assert.JSONEq(t, `{"progressPercentage": 10, "lastUpdatedTime": "2025-01-23T10:30:45Z"}`, string(res.TrainerStatus))
}

func TestNoStatusEndpointChangesNothing(t *testing.T) {
	var e *statusEndpoint
	var res result.Result
	e.finish(&res)
	assert.Empty(t, res.TrainerStatus)
	_, reported := e.percentage()
	assert.False(t, reported)
	var out bytes.Buffer
	assert.Same(t, &out, e.tapLogs(&out).(*bytes.Buffer))
}

func TestEventTextIsBounded(t *testing.T) {
	metrics := make([]trainerstatus.Metric, trainerstatus.MaxMetrics)
	for i := range metrics {
		metrics[i] = trainerstatus.Metric{Name: fmt.Sprintf("metric_%02d_%s", i, strings.Repeat("x", 100)), Value: "0.5"}
	}
	text := eventText(&trainerstatus.Status{Metrics: metrics})
	assert.LessOrEqual(t, len(text), maxEventText+len(" …"))
	assert.True(t, strings.HasPrefix(text, "training metric_00_"))
}
