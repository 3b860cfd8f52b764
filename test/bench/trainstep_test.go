package bench

import (
	"strings"
	"testing"
	"time"

	"github.com/trainstep/trainstep/pkg/timeline"
)

func TestLastCreateReadsTrainstepsTimeline(t *testing.T) {
	tl := timeline.New(time.Now().Add(-2 * time.Second))
	tl.Mark("informers synced")
	tl.Created()
	tl.Mark("last create")
	tl.Mark("run ended")
	var table strings.Builder
	if _, err := tl.WriteTo(&table); err != nil {
		t.Fatal(err)
	}
	at, err := LastCreate(table.String())
	if err != nil {
		t.Fatal(err)
	}
	// The table prints tenths of a millisecond.
	if want := tl.Marks()[2].At; (at - want).Abs() > 100*time.Microsecond {
		t.Errorf("last create at %v, want %v", at, want)
	}

	if _, err := LastCreate("at + stage\n 1.0ms 1.0ms first create\n"); err == nil || !strings.Contains(err.Error(), `no "last create" line`) {
		t.Errorf("a timeline without the line: error %v", err)
	}
}

func TestStageTimesReadsTheTimeline(t *testing.T) {
	table := `      at        +             stage  creates  requests  429s  limiter wait (sum)  longest wait  create round trip (mean since last)     CPU
   3.1ms    3.1ms        job loaded        0         0     0               0.0ms         0.0ms                                    -   4.0ms
  40.2ms   37.1ms    preflight done        0         2     0               0.0ms         0.0ms                               20.0ms  10.0ms
  95.0ms   54.8ms      first create        1        12     0               0.0ms         0.0ms                                9.0ms  30.0ms
 130.5ms   35.5ms       last create        9        20     0               0.0ms         0.0ms                               11.0ms  40.0ms
 131.0ms    0.5ms  first get pods/log      9        21     0               0.0ms         0.0ms                                    -  40.0ms
`
	got := StageTimes(table, LaunchStages...)
	want := map[string]time.Duration{"job loaded": 3100 * time.Microsecond, "preflight done": 40200 * time.Microsecond,
		"first create": 95 * time.Millisecond, "last create": 130500 * time.Microsecond}
	if len(got) != len(want) {
		t.Fatalf("StageTimes = %v, want %v", got, want)
	}
	for stage, at := range want {
		if (got[stage] - at).Abs() > time.Microsecond {
			t.Errorf("%s at %s, want %s", stage, got[stage], at)
		}
	}
}

func TestTimelinePeakRSSReadsTheLastLine(t *testing.T) {
	table := `      at        +      stage  creates  requests  429s  limiter wait (sum)  longest wait  create round trip (mean since last)     CPU  peak RSS
   3.1ms    3.1ms  job loaded        0         0     0               0.0ms         0.0ms                                    -   4.0ms   20.0MiB
 131.0ms    0.5ms   run ended        9        21     0               0.0ms         0.0ms                                    -  40.0ms   41.5MiB
`
	if got, want := TimelinePeakRSS(table), int64(41.5*(1<<20)); got != want {
		t.Errorf("TimelinePeakRSS = %d, want %d", got, want)
	}
	// An older build's table has no such column: no peak, not its CPU.
	older := "at + stage CPU\n 1.0ms 1.0ms run ended 40.0ms\n"
	if got := TimelinePeakRSS(older); got != 0 {
		t.Errorf("TimelinePeakRSS of a table without the column = %d, want 0", got)
	}
	// A real table: the process's own high-water mark, which is never 0 on Linux.
	tl := timeline.New(time.Now())
	tl.Mark("run ended")
	var real strings.Builder
	if _, err := tl.WriteTo(&real); err != nil {
		t.Fatal(err)
	}
	if got := TimelinePeakRSS(real.String()); got <= 0 {
		t.Errorf("TimelinePeakRSS of this process's timeline = %d, want > 0:\n%s", got, real.String())
	}
}
