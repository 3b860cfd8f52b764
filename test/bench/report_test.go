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
		Machine: "test CPU, 2 cores", BinaryBytes: 52e6, BinaryBuild: "`go build -trimpath`", ServiceCollection: true,
		Cluster: "Kubernetes v1.34.4", DefaultQPS: 200, DefaultBurst: 400,
		Sizes: []SizeResult{
			{
				Replicas:  64,
				Trainstep: LaunchTimes{Created: secs(0.4, 0.5, 0.6), Running: secs(0.6, 0.7, 0.8)},
				Baseline:  LaunchTimes{Created: secs(0.1, 0.1, 0.1), Running: secs(0.3, 0.3, 0.3)},
				Detection: secs(0.05, 0.06, 0.07), EndToOutputs: secs(0.1, 0.2, 0.3),
				PeakRSSBytes: []float64{30 << 20}, PeakAnonBytes: []float64{10 << 20}, PeakFileBytes: []float64{20 << 20}, CPU: secs(0.2),
				CleanRequests: RequestRuns{
					{"create pods": 64, "create services": 64, "delete pods": 63, "delete services": 63, "watch pods": 1},
					{"create pods": 64, "create services": 65, "delete pods": 63, "delete services": 63, "watch pods": 1},
				},
			},
			{
				Replicas:   512,
				Trainstep:  LaunchTimes{First: secs(0.5, 0.6, 0.7), Created: secs(8, 9, 10), Running: secs(9, 10, 11), LastCreate: secs(7.5, 8.5, 9.5)},
				Baseline:   LaunchTimes{First: secs(0.1, 0.1, 0.1), Created: secs(8, 8, 8), Running: secs(9, 9, 9), LastCreate: secs(7.9, 7.9, 7.9)},
				StartWaits: []IdleWait{{Idle: true}, {Idle: true}, {Idle: false, Waited: IdleLimit, Busy: 0.6}, {Idle: true}, {Idle: true}, {Idle: true}},
				Detection:  secs(0.1, 0.3, 0.4), EndToOutputs: secs(3),
				// 28 MiB more than at 64 workers over 448 more workers: 64 KiB per replica.
				PeakRSSBytes: []float64{50 << 20, 58 << 20, 80 << 20}, PeakAnonBytes: []float64{30 << 20}, PeakFileBytes: []float64{28 << 20},
				CPU: secs(3), CPUToCreated: secs(1, 1.1, 1.2),
				CleanRequests: RequestRuns{
					{"create pods": 512, "create services": 512, "create selfsubjectaccessreviews": 12, "delete pods": 511, "delete services": 511},
				},
				Anomalies: []string{"512 workers, round 2: trainstep made 513 pods"},
				Loads:     []string{"0.50 0.40 0.30", "0.60 0.45 0.31", "0.70 0.50 0.32"},
				// B is once 1.5 times A: the slowest round either way is 1.50.
				LoopAgainstLoop: LoopRounds{A: secs(8, 6, 8.8), B: secs(8, 9, 8)},
			},
			{
				Replicas:  2048,
				Trainstep: LaunchTimes{First: secs(0.5, 0.6), Created: secs(40, 42), Running: secs(50, 52)},
				Baseline:  LaunchTimes{First: secs(0.1, 0.1), Created: secs(40, 40), Running: secs(50, 50)},
				Detection: secs(0.1, 0.1), EndToOutputs: secs(10, 11),
				// 192 MiB more than at 512 over 1536 more workers: 128 KiB per replica, twice the slope below.
				PeakRSSBytes: []float64{250 << 20}, PeakAnonBytes: []float64{220 << 20}, PeakFileBytes: []float64{30 << 20},
				CPU: secs(12, 13), CPUToCreated: secs(4, 4),
				CleanRequests: RequestRuns{
					{"create pods": 2048, "create services": 2048, "delete pods": 2047, "delete services": 2047},
					{"create pods": 2048, "create services": 2048, "delete pods": 2047, "delete services": 2047},
				},
			},
		},
		Teardowns: []TeardownResult{
			{Replicas: 512, Gone: secs(5, 6), Exited: secs(5.5, 6.5), BaselineLoop: secs(4, 5), BaselineCollection: secs(6, 7), CollectionRequests: []int{2, 2},
				Requests: RequestRuns{{"create pods": 512, "create services": 512, "delete pods": 512, "delete services": 512}}},
			{Replicas: 2048, Gone: secs(30, 30), Exited: secs(20, 20), BaselineLoop: secs(25, 25), BaselineCollection: secs(20, 22), CollectionRequests: []int{3, 4},
				Requests: RequestRuns{{"create pods": 2048, "create services": 2048, "delete pods": 2048, "delete services": 2048}}},
		},
		Polling: PollingResult{Replicas: 8, Short: 10 * time.Second, Long: time.Minute,
			ShortRequests: map[string]int{"watch pods": 1, "list pods": 1}, LongRequests: map[string]int{"watch pods": 2, "list pods": 1},
			Anomalies: []string{"8 workers running 1m0s: trainstep made 9 pods"}},
		RateLimits: []RateLimitResult{{Replicas: 512, QPS: 50, Burst: 100, Created: secs(20)}},
		Profiles: []ProfileResult{
			{
				Replicas: 512,
				CPUTop:   "flat  flat%\n1s 50% runtime.gcBgMarkWorker", AllocTop: "Type: alloc_space\n      flat  flat%   sum%        cum   cum%\n      90MB 60% 60% 90MB 60% encoding/json.Marshal",
				CPUOwn: "      flat  flat%   sum%        cum   cum%\n         0     0%     0%      1.5s 50.00%  github.com/trainstep/trainstep/pkg/reconcile.(*Controller).launch",
				CPU:    3 * time.Second, Wall: 12 * time.Second,
				PeakRSS: 150 << 20, PeakAnon: 120 << 20, PeakFile: 30 << 20,
				GC: GCTrace{Collections: 20, PeakHeapMB: 90, PeakLiveMB: 45, PeakGoalMB: 92},
			},
			{
				Replicas: 2048,
				CPUTop:   "flat  flat%\n4s 50% runtime.gcBgMarkWorker", AllocTop: "Type: alloc_space\n      flat  flat%   sum%        cum   cum%\n      400MB 60% 60% 400MB 60% k8s.io/api/core/v1.(*EnvVar).Unmarshal",
				CPU: 12 * time.Second, Wall: 60 * time.Second,
				PeakRSS: 250 << 20, PeakAnon: 220 << 20, PeakFile: 30 << 20,
				GC: GCTrace{Collections: 50, PeakHeapMB: 300, PeakLiveMB: 150, PeakGoalMB: 300},
			},
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
		{"launch at 512: trainstep/baseline, all created", false, "1.12 (1.00–1.25)"},
		// 10/9 = 1.11 median of 1.0, 1.11, 1.22.
		{"launch at 512: trainstep/baseline, all Running", false, "1.11 (1.00–1.22)"},
		{"first object at 512: trainstep's start → its first object", false, "0.60 (0.50–0.70) s"},
		{"trainstep's CPU until all created at 512", true, "1.100 (1.000–1.200) s"},
		// Against the loop (median 4.5 s, faster than DeleteCollection's 6.5 s): 5/4 and 6/5.
		{"SIGTERM teardown at 512: trainstep/faster baseline way", false, "1.23 (1.20–1.25) (against parallel deletes)"},
		{"detection at 64 (median)", true, "60 (50–70) ms"},
		{"detection at 512 (median)", false, "300 (100–400) ms"},
		{"API cost at 64: creates / deletes of a clean run", true, "128 (128–129) / 126"},
		{"API cost at 512: creates / deletes of a clean run", false, "1036 / 1022"},
		{"API cost at 512: creates / deletes of a stopped run", true, "1024 / 1024"},
		{"API cost at 2048: creates / deletes of a stopped run", true, "4096 / 4096"},
		{"no pod or Service created twice in any run of 2048 workers", true, "0 of 6 runs"},
		{"no polling: requests of a 1m0s job minus a 10s job, 8 workers", true, "+1 (3 vs 2)"},
		{"peak RSS at 512", true, "58 (50–80) MiB"},
		{"peak RSS at 2048", false, "250 MiB"},
		{"RSS per replica flat from 512 to 2048", false, "128.0 KiB per replica from 512 to 2048, 64.0 from 64 to 512 (2.00 ×)"},
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

func TestTargetsOfSizesNotMeasuredAreMissed(t *testing.T) {
	r := sampleReport()
	r.Sizes, r.Teardowns = r.Sizes[:2], r.Teardowns[:1]
	for _, target := range r.Targets() {
		if strings.Contains(target.Name, "2048") && (target.Met || target.Measured != "not measured") {
			t.Errorf("target %q without a run of 2048 workers: met=%v measured %q", target.Name, target.Met, target.Measured)
		}
	}
}

func TestTeardownComparesWithTheFasterBaselineWay(t *testing.T) {
	td := TeardownResult{Gone: secs(10, 12), BaselineLoop: secs(9, 9), BaselineCollection: secs(5, 6)}
	if got := td.FasterLabel(); got != string(DeleteByLabel) {
		t.Errorf("faster way %q, want %q", got, DeleteByLabel)
	}
	if got := td.Ratio().Format("%.2f"); got != "2.00" {
		t.Errorf("ratio %s, want 2.00 (10/5 and 12/6)", got)
	}
}

func TestMarkdownShowsFiguresAndMissedTargets(t *testing.T) {
	doc, err := sampleReport().Markdown()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"| 512 | 9.00 (8.00–10.00) s | 8.00 s | 1.12 (1.00–1.25) |",
		"| 2 | baseline | 0.60 0.45 0.31 | 9.00 s | 8.50 s | 8.00 s | 7.90 s | 1.12 |",
		"| 3 | trainstep | 0.70 0.50 0.32 | 10.00 s | 9.50 s | 8.00 s | 7.90 s | 1.25 |",
		"1 of these launches started on a machine still busy after 30s.",
		"| launch at 512: trainstep/baseline, all created, the slowest round | ≤ 1.25 in every round | 1.25 | met |",
		"`--kube-api-qps 200`, `--kube-api-burst 400`",
		"| detection at 512 (median) | ≤ 200 ms | 300 (100–400) ms | **missed** |",
		"| `create pods` | 2048 | 2048 |",
		"| `watch pods` | 1 | 2 |",
		"| 50/100 | 20.00 s |",
		"    1s 50% runtime.gcBgMarkWorker",
		"          90MB 60% 60% 90MB 60% encoding/json.Marshal",
		"3.00 s of CPU over 12.00 s (25%)",
		"at most 45 MB live after a collection",
		"### 2048 workers",
		"docs/benchmarks/launch.svg",
		"docs/benchmarks/memory.svg",
		"`go build -trimpath`, 52.0 MB",
		"## Anomalies\n\n- 512 workers, round 2: trainstep made 513 pods\n- 8 workers running 1m0s: trainstep made 9 pods\n",
		"| 512 | 0.60 (0.50–0.70) s | 0.10 s | 1.10 (1.00–1.20) s |",
		"3 more rounds at\n512 workers with the loop on both sides",
		"| 2 | B | 6.00 s | 9.00 s | 0.67 |",
		"| 3 | A | 8.80 s | 8.00 s | 1.10 |",
		"A/B: 1.00 (0.67–1.10); the slowest round, either way, 1.50.",
		"the loop against itself in 3 more rounds gave 1.00 (0.67–1.10), its slowest round 1.50 one way or the other",
		"| 512 | 5.50 (5.00–6.00) s | 6.00 (5.50–6.50) s | 4.50 (4.00–5.00) s | 6.50 (6.00–7.00) s | 2 | 1.23 (1.20–1.25) (parallel deletes) |",
		"| 2048 | 30.00 s | 20.00 s | 25.00 s | 21.00 (20.00–22.00) s | 4 (3–4) | 1.43 (1.36–1.50) (DeleteCollection) |",
		"At 2048 workers trainstep exited before the benchmark's watch saw the last object",
		"trainstep runs with `--termination-grace 3m0s`",
		"| 2048 | 250.0 MiB | 220.0 MiB | 30.0 MiB | 128.0 KiB (from 512) | 12.50 (12.00–13.00) s |",
		"| 64 | 30.0 MiB | 10.0 MiB | 20.0 MiB | – | 0.20 s |",
		"one for its Services (the API server offers `deletecollection` on",
		"- **Missed: peak RSS at 2048**, 250 MiB against ≤ 128 MiB. What limits it: of the profiled run of 2048 workers' 250 MiB, 30 MiB are file-backed",
		"the largest allocators over the run: `k8s.io/api/core/v1.(*EnvVar).Unmarshal` (400MB).",
		"- **Missed: API cost at 512: creates / deletes of a clean run**, 1036 / 1022 against ≤ 1034 each. What limits it: besides one request per pod and Service of the job, the costliest run sent 12 × `create selfsubjectaccessreviews`.",
		"- **Missed: first object at 512: trainstep's start → its first object**, 0.60 (0.50–0.70) s against ≤ 0.30 s. What limits it:",
		"trainstep's own functions with the most cumulative CPU: `github.com/trainstep/trainstep/pkg/reconcile.(*Controller).launch` (1.5s)",
		"- **Missed: RSS per replica flat from 512 to 2048**, 128.0 KiB per replica from 512 to 2048, 64.0 from 64 to 512 (2.00 ×) against ≤ 1.25 × the KiB per replica below 512. What limits it: per replica, anonymous memory grew 126.7 KiB from 512 to 2048 against 45.7 KiB below",
	} {
		if !strings.Contains(string(doc), want) {
			t.Errorf("BENCHMARKS.md lacks %q:\n%s", want, doc)
		}
	}
	if strings.Contains(string(doc), "<no value>") {
		t.Errorf("BENCHMARKS.md has an unfilled field:\n%s", doc)
	}
	unlimited := sampleReport()
	unlimited.DefaultQPS = 0
	doc, err = unlimited.Markdown()
	if err != nil {
		t.Fatal(err)
	}
	if want := "no client-side\n  rate limit (`--kube-api-qps 0`"; !strings.Contains(string(doc), want) {
		t.Errorf("BENCHMARKS.md of a trainstep without a default client limit lacks %q:\n%s", want, doc)
	}
}

func TestWriteFilesWritesReportAndPlots(t *testing.T) {
	root := t.TempDir()
	if err := sampleReport().WriteFiles(root); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{BenchmarksFile, PlotFile, RateLimitPlotFile, MemoryPlotFile} {
		data, err := os.ReadFile(filepath.Join(root, name))
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(name, ".svg") && !strings.Contains(string(data), "<svg") {
			t.Errorf("%s is not an SVG", name)
		}
	}
	checkResultsFileHolds(t, root, sampleReport())
}

// checkResultsFileHolds checks that the results file WriteFiles wrote under
// root reads back as want.
func checkResultsFileHolds(t *testing.T, root string, want Report) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, ResultsFile))
	if err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, back); diff != "" {
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
	if diff := cmp.Diff(want, topEntries(top, 2, false)); diff != "" {
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

// The elector's own updates of a 1m13s run: taking the Lease, a renewal at
// once, one per 3.75 s period (19), letting it go. One more is a retry.
func TestLeaseUpdatesCountTheElectorsUpdatesBesideItsPeriods(t *testing.T) {
	for _, tc := range []struct {
		updates int
		met     bool
	}{{22, true}, {23, false}} {
		report := sampleReport()
		report.Polling.LongRun = 73 * time.Second
		report.Polling.LongRequests = map[string]int{"watch pods": 1, HeartbeatKey: tc.updates}
		var found bool
		for _, target := range report.Targets() {
			if strings.HasPrefix(target.Name, "updates of the job's Lease") {
				found = true
				if target.Met != tc.met || target.Goal != "≤ 22" {
					t.Errorf("%d updates: got met=%v goal %q, want met=%v goal ≤ 22", tc.updates, target.Met, target.Goal, tc.met)
				}
			}
		}
		if !found {
			t.Fatal("no target for the Lease's updates")
		}
	}
}
