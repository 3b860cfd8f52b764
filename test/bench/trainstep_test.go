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
