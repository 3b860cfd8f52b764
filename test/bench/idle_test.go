package bench

import (
	"math"
	"testing"
	"time"
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

func TestIdleWaitSaysWhatWasWaitedFor(t *testing.T) {
	for _, tc := range []struct {
		wait IdleWait
		want string
	}{
		{IdleWait{Waited: 1300 * time.Millisecond, Idle: true, Namespaces: NamespacesWait{Waited: 4200 * time.Millisecond}},
			"namespaces deleted after 4.2s, then idle after 1.3s"},
		{IdleWait{Waited: IdleLimit, Busy: 0.6, Namespaces: NamespacesWait{Waited: NamespacesLimit, Left: 2}},
			"2 namespaces still being deleted after 2m0s, then still 60% busy after 30s"},
	} {
		if got := tc.wait.String(); got != tc.want {
			t.Errorf("got  %q\nwant %q", got, tc.want)
		}
	}
}
