package bench

import (
	"encoding/json"
	"os"

	"github.com/google/go-cmp/cmp"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func secs(values ...float64) []time.Duration {
	out := make([]time.Duration, len(values))
	for i, v := range values {
		out[i] = time.Duration(v * float64(time.Second))
	}
	return out
}

// sampleReport is a small report with made-up figures.
func sampleReport() Report {
	return Report{
		Generated: time.Date(2025, 1, 2, 3, 4, 0, 0, time.UTC), Took: 9 * time.Minute,
		Machine: "test CPU, 2 cores", BinaryBytes: 73e6, Cluster: "Kubernetes v1.34.4", DefaultQPS: 200, DefaultBurst: 400,
		Sizes: []SizeResult{
			{
				Replicas:  8,
				Trainstep: LaunchTimes{Created: secs(0.4, 0.5, 0.6), Running: secs(0.6, 0.7, 0.8)},
				Baseline:  LaunchTimes{Created: secs(0.1, 0.1, 0.1), Running: secs(0.3, 0.3, 0.3)},
				Detection: secs(0.05, 0.06, 0.07), EndToOutputs: secs(0.1, 0.2, 0.3), BaselineDelete: secs(0.1),
				PeakRSSBytes: []float64{30 << 20}, PeakAnonBytes: []float64{10 << 20}, PeakFileBytes: []float64{20 << 20}, CPU: secs(0.2),
				CleanRequests: RequestRuns{
					{"create pods": 8, "create services": 8, "delete pods": 7, "delete services": 7, "watch pods": 1},
					{"create pods": 8, "create services": 9, "delete pods": 7, "delete services": 7, "watch pods": 1},
				},
			},
			{
				Replicas:  512,
				Trainstep: LaunchTimes{First: secs(0.5, 0.6, 0.7), Created: secs(8, 9, 10), Running: secs(9, 10, 11)},
				Baseline:  LaunchTimes{First: secs(0.1, 0.1, 0.1), Created: secs(8, 8, 8), Running: secs(9, 9, 9)},
				Detection: secs(0.1, 0.3, 0.4), EndToOutputs: secs(3), BaselineDelete: secs(4),
				PeakRSSBytes: []float64{50 << 20, 70 << 20, 80 << 20}, CPU: secs(3), CPUToCreated: secs(2),
				CleanRequests: RequestRuns{
					{"create pods": 512, "create services": 512, "create selfsubjectaccessreviews": 12, "delete pods": 511, "delete services": 511},
				},
				Anomalies: []string{"512 workers, round 2: trainstep made 513 pods"},
			},
		},
		Teardown: TeardownResult{Replicas: 512, Gone: secs(5), Exited: secs(5.5),
			Requests: RequestRuns{{"create pods": 512, "create services": 512, "delete pods": 512, "delete services": 512}}},
		Polling: PollingResult{Replicas: 8, Short: 10 * time.Second, Long: time.Minute,
			ShortRequests: map[string]int{"watch pods": 1, "list pods": 1}, LongRequests: map[string]int{"watch pods": 2, "list pods": 1},
			Anomalies: []string{"8 workers running 1m0s: trainstep made 9 pods"}},
		RateLimits: []RateLimitResult{{Replicas: 512, QPS: 50, Burst: 100, Created: secs(20)}},
		Profile: ProfileResult{
			CPUTop: "flat  flat%\n1s 50% runtime.gcBgMarkWorker", AllocTop: "Type: alloc_space\n      flat  flat%   sum%        cum   cum%\n      90MB 60% 60% 90MB 60% encoding/json.Marshal",
			CPU: 3 * time.Second, Wall: 12 * time.Second,
			PeakRSS: 150 << 20, PeakAnon: 120 << 20, PeakFile: 30 << 20,
			GC: GCTrace{Collections: 20, PeakHeapMB: 90, PeakLiveMB: 45, PeakGoalMB: 92},
		},
	}
}

func TestTargetsNameWhatIsMissed(t *testing.T) {
	targets := map[string]Target{}
	for _, target := range sampleReport().Targets() {
		targets[target.Name] = target
	}
	tests := []struct {
		name     string
		met      bool
		measured string
	}{
		// 9/8 = 1.125 median of the paired ratios 1.0, 1.125, 1.25.
		{"launch at 512: trainstep/baseline, all created", true, "1.12 (1.00–1.25)"},
		{"detection at 8 (median)", true, "60 (50–70) ms"},
		{"detection at 512 (median)", false, "300 (100–400) ms"},
		{"API cost at 8: creates / deletes of a clean run", true, "16 (16–17) / 14"},
		{"API cost at 512: creates / deletes of a clean run", false, "1036 / 1022"},
		{"API cost at 512: creates / deletes of a stopped run", true, "1024 / 1024"},
		{"no polling: requests of a 1m0s job minus a 10s job, 8 workers", true, "+1 (3 vs 2)"},
		{"peak RSS at 512", false, "70 (50–80) MiB"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := targets[tc.name]
			if !ok {
				t.Fatalf("no target %q among %v", tc.name, targets)
			}
			if got.Met != tc.met || got.Measured != tc.measured {
				t.Errorf("got met=%v measured %q, want met=%v measured %q", got.Met, got.Measured, tc.met, tc.measured)
			}
		})
	}
}

func TestMarkdownShowsFiguresAndMissedTargets(t *testing.T) {
	doc, err := sampleReport().Markdown()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"| 512 | 9.00 (8.00–10.00) s | 8.00 s | 1.12 (1.00–1.25) |",
		"| detection at 512 (median) | ≤ 200 ms | 300 (100–400) ms | **missed** |",
		"| `create selfsubjectaccessreviews` | 12 | 0 |",
		"| `watch pods` | 1 | 2 |",
		"| 50/100 | 20.00 s |",
		"    1s 50% runtime.gcBgMarkWorker",
		"          90MB 60% 60% 90MB 60% encoding/json.Marshal",
		"3.00 s of CPU over 12.00 s (25%)",
		"at most 45 MB live after a collection",
		"docs/benchmarks/launch.svg",
		"## Anomalies\n\n- 512 workers, round 2: trainstep made 513 pods\n- 8 workers running 1m0s: trainstep made 9 pods\n",
		"| 512 | 0.60 (0.50–0.70) s | 0.10 s | 2.00 s |",
		"- **Missed: peak RSS at 512**, 70 (50–80) MiB against ≤ 64 MiB. What limits it: of the profiled run's 150 MiB, 30 MiB are file-backed",
		"the largest allocators over the run: `encoding/json.Marshal` (90MB).",
		"- **Missed: API cost at 512: creates / deletes of a clean run**, 1036 / 1022 against ≤ 1034 each. What limits it: besides one request per pod and Service of the job, the costliest run sent 12 × `create selfsubjectaccessreviews`.",
	} {
		if !strings.Contains(string(doc), want) {
			t.Errorf("BENCHMARKS.md lacks %q:\n%s", want, doc)
		}
	}
	if strings.Contains(string(doc), "<no value>") {
		t.Errorf("BENCHMARKS.md has an unfilled field:\n%s", doc)
	}
}

func TestWriteFilesWritesReportAndPlots(t *testing.T) {
	root := t.TempDir()
	if err := sampleReport().WriteFiles(root); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{BenchmarksFile, PlotFile, RateLimitPlotFile} {
		data, err := os.ReadFile(filepath.Join(root, name))
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(name, ".svg") && !strings.Contains(string(data), "<svg") {
			t.Errorf("%s is not an SVG", name)
		}
	}
	data, err := os.ReadFile(filepath.Join(root, ResultsFile))
	if err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(sampleReport(), back); diff != "" {
		t.Errorf("%s does not hold the report (-want +got):\n%s", ResultsFile, diff)
	}
}

func TestExtraRequestsNamesWhatIsBeyondTheJobsObjects(t *testing.T) {
	tests := []struct {
		name     string
		requests map[string]int
		want     string
	}{
		{"only the job's objects", map[string]int{"create pods": 8, "create services": 8, "delete pods": 7, "list pods": 1},
			"every create and delete is one of the job's pods or Services"},
		{"permission checks", map[string]int{"create pods": 8, "create selfsubjectaccessreviews": 12},
			"besides one request per pod and Service of the job, the costliest run sent 12 × `create selfsubjectaccessreviews`"},
		{"repeated creates", map[string]int{"create pods": 8, "create services": 11},
			"besides one request per pod and Service of the job, the costliest run sent 11 × `create services` for 8 services (the benchmark's watch saw each created once: the API server refused the others as already existing)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := extraRequests(8, tc.requests); got != tc.want {
				t.Errorf("extraRequests = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestTopEntriesReadsPprofTop(t *testing.T) {
	top := `File: trainstep
Type: alloc_space
Showing nodes accounting for 786.58MB, 89.67% of 877.17MB total
      flat  flat%   sum%        cum   cum%
  138.99MB 15.85% 15.85%   235.73MB 26.87%  github.com/trainstep/trainstep/pkg/reconcile.(*Controller).observe
   85.23MB  9.72% 25.56%    85.23MB  9.72%  k8s.io/apimachinery/pkg/runtime.(*Unknown).Unmarshal
   61.38MB  7.00% 47.43%    61.38MB  7.00%  k8s.io/api/core/v1.(*EnvVar).Unmarshal`
	want := []string{
		"`github.com/trainstep/trainstep/pkg/reconcile.(*Controller).observe` (138.99MB)",
		"`k8s.io/apimachinery/pkg/runtime.(*Unknown).Unmarshal` (85.23MB)",
	}
	if diff := cmp.Diff(want, topEntries(top, 2)); diff != "" {
		t.Errorf("topEntries (-want +got):\n%s", diff)
	}
}

func TestMarkdownSaysWhenThereWereNoAnomalies(t *testing.T) {
	r := sampleReport()
	r.Sizes[1].Anomalies, r.Polling.Anomalies = nil, nil
	doc, err := r.Markdown()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(doc), "## Anomalies\n\nNone: in every run trainstep created each pod and Service once.") {
		t.Errorf("BENCHMARKS.md does not say there were no anomalies:\n%s", doc)
	}
}

func TestLogLinesAboutPicksMatchingLines(t *testing.T) {
	stderr := `{"msg":"job started"}
{"msg":"recreating replica","replica":"Worker/7","cause":"its pod was removed from outside"}
{"msg":"cleaned up"}`
	want := []string{"`" + `{"msg":"recreating replica","replica":"Worker/7","cause":"its pod was removed from outside"}` + "`"}
	if diff := cmp.Diff(want, logLinesAbout(stderr, "recreat")); diff != "" {
		t.Errorf("logLinesAbout (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"(no line about it)"}, logLinesAbout(stderr, "lost")); diff != "" {
		t.Errorf("logLinesAbout without a match (-want +got):\n%s", diff)
	}
}
