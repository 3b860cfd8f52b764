package bench

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestParseGCTraceKeepsPeaks(t *testing.T) {
	stderr := `{"level":"info","msg":"job started"}
gc 1 @0.010s 1%: 0.011+1.1+0.002 ms clock, 0.022+0.3/0.9/0+0.005 ms cpu, 3->4->2 MB, 4 MB goal, 0 MB stacks, 0 MB globals, 2 P
gc 2 @1.500s 4%: 0.02+12+0.01 ms clock, 0.04+2/10/0+0.02 ms cpu, 61->70->38 MB, 66 MB goal, 0 MB stacks, 0 MB globals, 2 P
gc 3 @2.100s 5%: 0.02+9+0.01 ms clock, 0.04+2/8/0+0.02 ms cpu, 75->76->30 MB, 77 MB goal, 0 MB stacks, 0 MB globals, 2 P (forced)
not a gc 4 line, 1->2->3 MB, 4 MB goal`
	want := GCTrace{Collections: 3, PeakHeapMB: 75, PeakLiveMB: 38, PeakGoalMB: 77}
	if diff := cmp.Diff(want, ParseGCTrace(stderr)); diff != "" {
		t.Errorf("ParseGCTrace (-want +got):\n%s", diff)
	}
}

func TestParseStatCPUAddsUserAndSystemTime(t *testing.T) {
	// pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime …
	stat := "4242 (train step (x)) S 1 4242 4242 0 -1 4194560 1000 0 0 0 123 45 0 0 20 0 12 0 100 0 0"
	got, err := parseStatCPU(stat)
	if err != nil || got != 1680*time.Millisecond {
		t.Errorf("parseStatCPU = %v, %v; want 1.68s", got, err)
	}
	if _, err := parseStatCPU("4242 (trainstep) S 1"); err == nil {
		t.Error("parseStatCPU accepted a line without CPU times")
	}
}
