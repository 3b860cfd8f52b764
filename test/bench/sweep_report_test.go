package bench

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// sweepRun is a made-up side of a sweep of trials trials, every one running
// from first on, a second apart, for 20 s.
func sweepRun(trials int, first, done float64, steps ...StepSummary) SweepRun {
	run := SweepRun{AllRunning: secs(first + float64(trials-1))[0], AllDone: secs(done)[0], Load: "1.00 0.50 0.20",
		APIServerCPU: 10 * time.Second, EtcdCPU: 2 * time.Second, P50: 5 * time.Millisecond, P99: 400 * time.Millisecond,
		ServerRequests: 5000, Throttled: 0, StoreWrites: 3000, Steps: steps}
	for i := range trials {
		from := secs(first + float64(i))[0]
		run.Spans = append(run.Spans, TrialRunning{Trial: "sweep-" + string(rune('0'+i)), From: from, To: from + 20*time.Second})
	}
	if len(steps) > 0 {
		run.TypicalRequests = map[string]int{"create pods": 6, "watch pods": 1}
	}
	return run
}

func sampleSweepReport() Report {
	r := sampleReport()
	step := func(rss int64, requests int) StepSummary {
		return StepSummary{Trial: "sweep-0", Attempts: 1, PeakRSSBytes: rss << 20, CPU: 150 * time.Millisecond, Requests: requests, Writes: 20, Watches: 3, Lists: 3}
	}
	r.Sweeps = []SweepResult{{
		Trials: 4, Pods: 22,
		Trainstep: []SweepRun{sweepRun(4, 2, 30, step(36, 50), step(40, 60)), sweepRun(4, 3, 31, step(38, 50), step(50, 70))},
		Baseline:  []SweepRun{sweepRun(4, 1, 25), sweepRun(4, 1, 25)},
	}}
	quota := sweepRun(4, 5, 60, step(37, 80))
	quota.Problems = []string{"sweep-3 half admitted: sweep-3-worker-0 bound while 1 of 7 pods existed"}
	r.Quotas = []QuotaResult{{Gang: "builtin", Trials: 4, Pods: 22, QuotaGPUs: 6, Run: quota, LongestWait: 8 * time.Second, MostRunning: 1, Releases: 9}}
	r.Isolation = &IsolationResult{Trials: 4, Killed: []string{"sweep-1", "sweep-10"}, Run: sweepRun(4, 2, 50),
		Checked: []string{"22 of 22 pods of the 4 trials controlled by their own trial's last step pod"}}
	return r
}

func TestMarkdownShowsTheSweeps(t *testing.T) {
	doc, err := sampleSweepReport().Markdown()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		// 5 s and 6 s to all running against 4 s: ratios 1.25 and 1.5.
		"| 4 | 22 | 5.50 (5.00–6.00) s | 4.00 s | 1.38 (1.25–1.50) | 30.50 (30.00–31.00) s | 25.00 s |",
		"| 4 | 2 | baseline | 1.00 0.50 0.20 | 6.00 s | 4.00 s | 1.50 |",
		"| 4 | 41.0 (38.0–44.0) MiB | 50.0 MiB | 58 (55–60) | 20 | 3 | 3 | 150 ms | 0 | 0 |",
		"| 4 | trainstep | 10.00 s | 2.00 s | 0.01 s | 0.40 s | 5000 | 0 | 3000 |",
		"| `create pods` | 6 |",
		"| `builtin` | 4 | 22 | 6 | 1 | 1 | 60.0 s | 8.0 s | 1 | 9 | 0 | 37.0 MiB |",
		"- 22 of 22 pods of the 4 trials controlled by their own trial's last step pod",
		"once every worker of `sweep-1` and\n`sweep-10` runs",
		"docs/benchmarks/sweep.svg",
		"| 4 trials under a quota of a quarter, gang builtin: trials completed | 4, none lost, duplicated or half admitted | 1, 1 problems | **missed** |",
		"| lost, duplicated or half-admitted trials, every sweep round | 0 | 0 in 2 rounds | met |",
	} {
		if !strings.Contains(string(doc), want) {
			t.Errorf("BENCHMARKS.md lacks %q", want)
		}
	}
	if strings.Contains(string(doc), "<no value>") {
		t.Errorf("BENCHMARKS.md has an unfilled field:\n%s", doc)
	}
	if t.Failed() {
		start := strings.Index(string(doc), "## Sweeps")
		t.Logf("the sweep section:\n%s", string(doc)[start:])
	}
}

func TestWriteFilesPlotsTheSweepAndKeepsItsFigures(t *testing.T) {
	root := t.TempDir()
	if err := sampleSweepReport().WriteFiles(root); err != nil {
		t.Fatal(err)
	}
	svg, err := os.ReadFile(filepath.Join(root, SweepPlotFile))
	if err != nil || !strings.Contains(string(svg), "<svg") {
		t.Fatalf("%s: %v, not an SVG", SweepPlotFile, err)
	}
	checkResultsFileHolds(t, root, sampleSweepReport())
}

func TestRunningStepsCountTrialsRunningOverTime(t *testing.T) {
	spans := []TrialRunning{{From: 2 * time.Second, To: 5 * time.Second}, {From: 3 * time.Second}}
	got := runningSteps(spans)
	want := []float64{0, 0, 1, 1, 2, 2, 1} // at 0; 2 s: 0→1; 3 s: 1→2; 5 s: 2→1
	if len(got) != len(want) {
		t.Fatalf("points %v, want %d", got, len(want))
	}
	for i, p := range got {
		if p.Y != want[i] {
			t.Errorf("point %d = %v, want y %v", i, p, want[i])
		}
	}
}

// The sweep scenario run alone logs the section BENCHMARKS.md would hold,
// from a report of the sweeps only.
func TestSweepMarkdownIsTheWholeReportsSweepSection(t *testing.T) {
	full := sampleSweepReport()
	doc, err := full.Markdown()
	if err != nil {
		t.Fatal(err)
	}
	alone := Report{Sweeps: full.Sweeps, Quotas: full.Quotas, Isolation: full.Isolation}
	section, err := alone.SweepMarkdown()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(section), "## Sweeps: many steps at once\n") || strings.Contains(string(section), "## Targets") {
		t.Errorf("the section does not run from its heading to the next:\n%s", section)
	}
	if !strings.Contains(string(doc), string(section)) {
		t.Errorf("BENCHMARKS.md does not hold the section as logged:\n%s", section)
	}
	if strings.Contains(string(section), "<no value>") {
		t.Errorf("the section has an unfilled field:\n%s", section)
	}
}
