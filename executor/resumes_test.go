package executor

import (
	"testing"
	"time"

	"github.com/trainstep/trainstep/pkg/trainerstatus"
)

func reported(progress int32, metrics ...trainerstatus.Metric) *trainerstatus.Status {
	return &trainerstatus.Status{ProgressPercentage: &progress, Metrics: metrics, LastUpdatedTime: time.Now().Add(time.Second)}
}

// A whole-job restart is paired with the last status before it and the
// first after it: a job that saved at step 141 when told to stop resumes
// at 141 (0 redone); one that saved only at 100 redoes 41 steps; without a
// step metric, the progress percentage says it.
func TestResumeLedgerSaysWhatARestartCost(t *testing.T) {
	step := func(v string) trainerstatus.Metric { return trainerstatus.Metric{Name: "step", Value: v} }
	var l resumeLedger
	l.status(reported(47, step("141")))
	l.restarted(1, "disruption")
	late := reported(48, step("143")) // the earlier attempt's, stamped before the restart
	late.LastUpdatedTime = time.Now().Add(-time.Hour)
	if r := l.status(late); r != nil {
		t.Fatalf("a status of the earlier attempt completed the restart: %+v", r)
	}
	if got := l.resumes(); len(got) != 1 || got[0].Redone != nil || *got[0].StepBefore != 143 {
		t.Fatalf("before any status after the restart: %+v", got)
	}
	r := l.status(reported(48, step("143")))
	if r == nil || r.Redone == nil || *r.Redone != 0 || r.Unit != "steps" || r.Reason != "disruption" || r.Attempt != 1 {
		t.Fatalf("resumed where it stopped: %+v", r)
	}
	if again := l.status(reported(48, step("150"))); again != nil {
		t.Errorf("a later status completed a restart again: %+v", again)
	}

	l.restarted(2, "disruption")
	l.restarted(3, "failure") // again before any status: the first "before" stands
	r = l.status(reported(33, step("109")))
	if r == nil || *r.StepBefore != 150 || *r.Redone != 41 || r.Attempt != 3 || r.Reason != "failure" {
		t.Fatalf("resumed from an older checkpoint: %+v", r)
	}

	var p resumeLedger
	p.status(reported(60))
	p.restarted(1, "disruption")
	if r := p.status(reported(55)); r == nil || r.Unit != "percent" || *r.Redone != 5 {
		t.Fatalf("without a step metric: %+v", r)
	}
	if got := len(l.resumes()); got != 2 {
		t.Errorf("%d restarts recorded, want 2 (one per attempt that reported)", got)
	}
}
