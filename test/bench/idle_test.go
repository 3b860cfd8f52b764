package bench

import (
	"math"
	"testing"
)

func TestParseCPUTimesCountsIOWaitAsIdle(t *testing.T) {
	// user nice system idle iowait irq softirq steal guest guest_nice
	before, err := parseCPUTimes("cpu  100 0 50 800 50 0 0 0 30 0\ncpu0 1 2 3 4\n")
	if err != nil {
		t.Fatal(err)
	}
	if want := (cpuTimes{total: 1000, idle: 850}); before != want {
		t.Errorf("parsed %+v, want %+v (guest time is already in user time)", before, want)
	}
	after, err := parseCPUTimes("cpu  160 0 70 900 70 0 0 0 30 0\n")
	if err != nil {
		t.Fatal(err)
	}
	// 200 ticks passed, 80 of them busy.
	if busy := after.busySince(before); math.Abs(busy-0.4) > 1e-9 {
		t.Errorf("busy %v, want 0.4", busy)
	}
	if busy := before.busySince(before); busy != 0 {
		t.Errorf("busy %v with no time passed, want 0", busy)
	}
}

func TestParseCPUTimesRejectsOtherText(t *testing.T) {
	for _, stat := range []string{"", "intr 1 2 3 4 5 6\n", "cpu 1 2 x 4 5\n", "cpu 1 2\n"} {
		if _, err := parseCPUTimes(stat); err == nil {
			t.Errorf("parseCPUTimes(%q) succeeded, want an error", stat)
		}
	}
}
