package bench

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writes(counts map[string]int) StoreWrites { return StoreWrites{Writes: counts} }

// layoutReport is sampleReport with the layouts compared at 512 and 2048:
// at 512 the per-job layout launches in half the time and writes 4 per
// replica; at 2048 it is as slow as the per-replica layout and writes 8.
func layoutReport() Report {
	r := sampleReport()
	for i := range r.Sizes {
		s := &r.Sizes[i]
		switch s.Replicas {
		case 512:
			s.PerReplica = LaunchTimes{Created: secs(16, 18, 20), Running: secs(18, 20, 22)}
			s.PerReplicaEndToOutputs = secs(6)
			s.TrainstepWrites = []StoreWrites{writes(map[string]int{"pods": 1024, "events": 1024}), writes(map[string]int{"pods": 1100, "events": 1000})}
			s.PerReplicaWrites = []StoreWrites{writes(map[string]int{"pods": 1024, "events": 1024, "services": 512, "endpoints": 512, "endpointslices": 512})}
			s.BaselineWrites = []StoreWrites{writes(map[string]int{"pods": 1024, "events": 1000})}
		case 2048:
			s.PerReplica = LaunchTimes{Created: secs(40, 42), Running: secs(50, 52)}
			s.PerReplicaEndToOutputs = secs(10, 11)
			s.TrainstepWrites = []StoreWrites{writes(map[string]int{"pods": 8192, "events": 8192})}
			s.PerReplicaWrites = []StoreWrites{writes(map[string]int{"pods": 8192, "events": 8192, "services": 2048})}
			s.BaselineWrites = []StoreWrites{writes(map[string]int{"pods": 8192})}
		}
	}
	r.Teardowns[0].PerReplicaGone = secs(9, 10)
	r.MaxLaunch = MaxLaunchResult{Replicas: MaxLaunchReplicas, Created: 70e9, Running: 90e9, Detection: 150e6,
		Writes: writes(map[string]int{"pods": 16384}), PeakRSSBytes: 300 << 20}
	return r
}

func TestWritesPerReplicaAndByResource(t *testing.T) {
	runs := []StoreWrites{writes(map[string]int{"pods": 1024, "events": 1024}), writes(map[string]int{"pods": 1100, "events": 1000})}
	if got := WritesPerReplica(runs, 512); got.Median != 4.05078125 || got.Min != 4 || got.Runs != 2 {
		t.Errorf("WritesPerReplica = %+v, want median 4.05 (2048 and 2100 writes over 512 replicas), min 4", got)
	}
	if got, want := WritesByResource(runs, 512), "pods 2.07, events 1.98"; got != want {
		t.Errorf("WritesByResource = %q, want %q", got, want)
	}
	if got := WritesByResource(nil, 512); got != "none" {
		t.Errorf("WritesByResource of no runs = %q, want none", got)
	}
}

func TestLayoutTargets(t *testing.T) {
	targets := map[string]Target{}
	for _, target := range layoutReport().Targets() {
		targets[target.Name] = target
	}
	for name, wantMet := range map[string]bool{
		"per-job layout at 512: time to all created over the per-replica layout's":  true,  // 9/18 = 0.5
		"per-job layout at 512: etcd writes per replica during the launch":          true,  // 4.07
		"per-job layout at 2048: time to all created over the per-replica layout's": false, // 1.0
		"per-job layout at 2048: etcd writes per replica during the launch":         false, // 8
		"end of a 2048-worker job with cleanup: per-job layout over per-replica":    false, // 10.5/10.5
	} {
		target, ok := targets[name]
		if !ok {
			t.Errorf("no target %q", name)
			continue
		}
		if target.Met != wantMet {
			t.Errorf("target %q: met %v, want %v (%+v)", name, target.Met, wantMet, target)
		}
	}
	if target := targets["per-job layout at 2048: etcd writes per replica during the launch"]; !strings.Contains(target.Limit, "events 4.00, pods 4.00") {
		t.Errorf("the missed writes target's limit %q does not say what was written", target.Limit)
	}
	// Without the per-replica launches nothing shows the targets met.
	for _, target := range sampleReport().Targets() {
		if strings.HasPrefix(target.Name, "per-job layout at") && (target.Met || target.Measured != "not measured") {
			t.Errorf("target %+v of a run without the per-replica layout, want not measured", target)
		}
	}
}

func TestMarkdownComparesTheLayouts(t *testing.T) {
	doc, err := layoutReport().Markdown()
	if err != nil {
		t.Fatal(err)
	}
	text := string(doc)
	for _, want := range []string{
		"## Service layouts",
		"| 512 | 9.00 (8.00–10.00) s | 18.00 (16.00–20.00) s | 0.50 | 10.00 (9.00–11.00) s | 20.00 (18.00–22.00) s | 3.00 s | 6.00 s | 5.50 (5.00–6.00) s | 9.50 (9.00–10.00) s |",
		"| 512 | trainstep, per job | 4.05 (4.00–4.10) | pods 2.07, events 1.98 |",
		"| 512 | trainstep, per replica | 7.00 | events 2.00, pods 2.00, endpoints 1.00, endpointslices 1.00, services 1.00 |",
		"| 512 | baseline loop | 3.95 | pods 2.00, events 1.95 |",
		"One launch at 4096 workers",
		"all created in 70.00 s",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("BENCHMARKS.md lacks %q", want)
		}
	}
	if table := layoutReport().Table(); !strings.Contains(table, "layouts at 2048 workers") || !strings.Contains(table, "launch of 4096 workers") {
		t.Errorf("the printed table lacks the layouts or the launch at 4096:\n%s", table)
	}
}

func TestWriteFilesPlotsTheLayoutsWhenBothWereMeasured(t *testing.T) {
	root := t.TempDir()
	if err := layoutReport().WriteFiles(root); err != nil {
		t.Fatal(err)
	}
	svg, err := os.ReadFile(filepath.Join(root, LayoutsPlotFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"per job: all created", "per job: all Running", "per replica: all created", "per replica: all Running", ">512<", ">2048<"} {
		if !strings.Contains(string(svg), want) {
			t.Errorf("%s lacks %q", LayoutsPlotFile, want)
		}
	}
	doc, err := os.ReadFile(filepath.Join(root, BenchmarksFile))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(doc), "("+LayoutsPlotFile+")") {
		t.Errorf("%s does not show %s", BenchmarksFile, LayoutsPlotFile)
	}

	// Without the per-replica launches there is nothing to plot or show.
	root = t.TempDir()
	if err := sampleReport().WriteFiles(root); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, LayoutsPlotFile)); !os.IsNotExist(err) {
		t.Errorf("%s written for a run without the per-replica layout (stat: %v)", LayoutsPlotFile, err)
	}
	doc, err = os.ReadFile(filepath.Join(root, BenchmarksFile))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(doc), LayoutsPlotFile) {
		t.Errorf("%s shows %s for a run without the per-replica layout", BenchmarksFile, LayoutsPlotFile)
	}
}
