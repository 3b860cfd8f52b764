package executor

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/trainstep/trainstep/internal/testutil"

	"github.com/trainstep/trainstep/pkg/logs"
	"github.com/trainstep/trainstep/pkg/result"
)

// progressJob runs executor/testdata/report_progress.py in two PyTorch
// workers; worker 0 reports four statuses, a second apart.
func progressJob(t *testing.T, args string) []byte {
	t.Helper()
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		t.Skip("needs /usr/bin/python3 (make test-deps installs it)")
	}
	script, err := filepath.Abs("testdata/report_progress.py")
	require.NoError(t, err)
	return []byte(`apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata: {name: progress}
spec:
  pytorchReplicaSpecs:
    Worker:
      replicas: 2
      template:
        spec:
          containers:
          - name: pytorch
            image: none
            command: [/usr/bin/python3, ` + script + args + `]
`)
}

// progressValues collects every distinct content of the progress file
// until ctx ends.
func progressValues(ctx context.Context, path string) func() []string {
	var mu sync.Mutex
	var seen []string
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			if b, err := os.ReadFile(path); err == nil {
				mu.Lock()
				if v := string(b); len(seen) == 0 || seen[len(seen)-1] != v {
					seen = append(seen, v)
				}
				mu.Unlock()
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	return func() []string {
		<-done
		mu.Lock()
		defer mu.Unlock()
		return seen
	}
}

func runWithProgress(t *testing.T, manifest []byte, mode logs.Mode) (localRun, []string) {
	t.Helper()
	watch := watchLog()
	outputs := t.TempDir()
	ctx, stop := context.WithCancel(t.Context())
	values := progressValues(ctx, filepath.Join(outputs, "progress"))
	var stdout strings.Builder
	r := localRun{stderr: &testutil.SyncBuffer{}, logs: watch.logs, outputsDir: outputs}
	cfg := Config{
		Spec: manifest, Local: true, TrainerStatus: true,
		OutputsDir: outputs, ProgressFile: filepath.Join(outputs, "progress"),
		Logs: mode, Logger: zap.New(watch.core), Stdout: &stdout, Stderr: r.stderr,
	}
	r.res, r.err = Run(t.Context(), cfg)
	r.stdout = stdout.String()
	time.Sleep(100 * time.Millisecond)
	stop()
	return r, values()
}

// The KEP's stdlib snippet, run by rank 0 of a local job, reports to the
// endpoint run --local serves: Argo's progress file goes through the
// reported percentages to 100/100, the log carries the status lines, the
// outputs the last status and its metrics beside the termination message's,
// and a post with a wrong token is refused without harming the job.
func TestLocalRunServesTheProgressEndpoint(t *testing.T) {
	r, values := runWithProgress(t, progressJob(t, ""), logs.ModeLeaders)
	require.Equal(t, result.PhaseSucceeded, r.res.Phase, "%v\n%s", r.err, r.stderr)
	stderr := r.stderr.String()
	assert.Contains(t, stderr, "[worker-0] wrong token 401")
	for _, pct := range []string{"25", "50", "75", "100"} {
		assert.Contains(t, stderr, "[worker-0] posted "+pct+" 200")
	}
	var percentages []string
	for _, v := range values {
		if strings.HasSuffix(v, "/100") {
			percentages = append(percentages, v)
		}
	}
	assert.Equal(t, []string{"25/100", "50/100", "75/100", "100/100"}, percentages, "every value: %v", values)
	assert.Equal(t, "100/100", values[len(values)-1])

	assert.NotEmpty(t, r.logs.FilterMessage("training 25% (eta 3s) loss=1.0000 step=1").All(), "the first status is logged at once")
	assert.NotEmpty(t, r.logs.FilterMessage("training 100% (eta 0s) loss=0.2500 step=4").All(), "the last status is logged before the run ends")
	assert.Len(t, r.logs.FilterMessageSnippet("training ").FilterMessageSnippet("% (eta").All(), 2, "at most one status line every 10 s")

	var status map[string]any
	require.NoError(t, json.Unmarshal([]byte(r.output(t, "trainer-status.json")), &status))
	assert.Equal(t, float64(100), status["progressPercentage"])
	if diff := sameJSON(t, `{"accuracy": 0.9, "loss": 0.2500, "step": 4}`, r.output(t, "metrics.json")); diff != "" {
		t.Errorf("metrics.json (-want +got):\n%s", diff)
	}
	assert.Contains(t, r.stdout, `"trainerStatus":{"progressPercentage":100`)
}

// A script posting as Kubeflow's current clients do — the SDK, the
// transformers integration: KUBEFLOW_TRAINER_SERVER_*, the token file read
// again for every post — reports the same way, and a template's variable
// may refer to the endpoint's, which come before it.
func TestLocalRunServesTheProgressEndpointUnderTheServerNames(t *testing.T) {
	manifest := strings.Replace(string(progressJob(t, ", --server-names")), "            image: none\n",
		"            image: none\n            env: [{name: REPORT_URL, value: $(KUBEFLOW_TRAINER_SERVER_URL)}]\n", 1)
	r, values := runWithProgress(t, []byte(manifest), logs.ModeLeaders)
	require.Equal(t, result.PhaseSucceeded, r.res.Phase, "%v\n%s", r.err, r.stderr)
	stderr := r.stderr.String()
	assert.Contains(t, stderr, "[worker-0] REPORT_URL is the URL: True")
	assert.Contains(t, stderr, "[worker-0] wrong token 401")
	assert.Contains(t, stderr, "[worker-0] posted 100 200")
	assert.Equal(t, "100/100", values[len(values)-1], "every value: %v", values)
	var status map[string]any
	require.NoError(t, json.Unmarshal([]byte(r.output(t, "trainer-status.json")), &status))
	assert.Equal(t, float64(100), status["progressPercentage"])
	if diff := sameJSON(t, `{"accuracy": 0.9, "loss": 0.2500, "step": 4}`, r.output(t, "metrics.json")); diff != "" {
		t.Errorf("metrics.json (-want +got):\n%s", diff)
	}
}

// A script that cannot make HTTP calls prints its status as one JSON line.
func TestLocalRunTakesALeadersStatusLine(t *testing.T) {
	r, values := runWithProgress(t, progressJob(t, ", --log-line"), logs.ModeLeaders)
	require.Equal(t, result.PhaseSucceeded, r.res.Phase, "%v\n%s", r.err, r.stderr)
	assert.Equal(t, "100/100", values[len(values)-1], "every value: %v", values)
	if diff := sameJSON(t, `{"accuracy": 0.9, "loss": 0.2500, "step": 4}`, r.output(t, "metrics.json")); diff != "" {
		t.Errorf("metrics.json (-want +got):\n%s", diff)
	}
}

// With logs off nothing reads the lines, so they report nothing.
func TestLocalRunWithLogsOffTakesNoStatusLine(t *testing.T) {
	r, values := runWithProgress(t, progressJob(t, ", --log-line"), logs.ModeNone)
	require.Equal(t, result.PhaseSucceeded, r.res.Phase, "%v\n%s", r.err, r.stderr)
	for _, v := range values {
		assert.False(t, strings.HasSuffix(v, "/100"), "progress %s from a log line with logs off", v)
	}
	assert.Equal(t, "{}", r.output(t, "trainer-status.json"))
	if diff := sameJSON(t, `{"accuracy": 0.9}`, r.output(t, "metrics.json")); diff != "" {
		t.Errorf("metrics.json (-want +got):\n%s", diff)
	}
}

// Real DDP training (Debian's python3-torch, gloo on CPU) whose rank 0
// reports with the KEP's snippet, the script the real node's Argo test
// runs: run --local shows the same progress and outputs.
func TestLocalRealPyTorchDDPReportsProgress(t *testing.T) {
	requireTorch(t)
	manifest := ddpJob(t, "OnFailure", map[string]string{"CKPT_DIR": t.TempDir(), "STEPS": "300", "REPORT_EVERY": "60", "STEP_DELAY": "0.01"})
	r, values := runWithProgress(t, manifest, logs.ModeLeaders)
	require.Equal(t, result.PhaseSucceeded, r.res.Phase, "%v\n%s", r.err, lastLines(r.stderr.String(), 40))
	stderr := r.stderr.String()
	assert.Contains(t, stderr, "[master-0] wrong token 401")
	assert.Contains(t, stderr, "[master-0] posted 100 200")
	var percentages []string
	for _, v := range values {
		if strings.HasSuffix(v, "/100") {
			percentages = append(percentages, v)
		}
	}
	assert.Equal(t, []string{"20/100", "40/100", "60/100", "80/100", "100/100"}, percentages, "every value: %v", values)
	var metrics map[string]any
	require.NoError(t, json.Unmarshal([]byte(r.output(t, "metrics.json")), &metrics))
	assert.Equal(t, float64(300), metrics["steps"], "the termination message's metrics: %v", metrics)
	assert.Equal(t, float64(300), metrics["step"], "the reported metrics: %v", metrics)
	assert.Contains(t, r.output(t, "trainer-status.json"), `"progressPercentage":100`)
}
