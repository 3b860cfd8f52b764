package executor

import (
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/trainstep/trainstep/pkg/result"
	"github.com/trainstep/trainstep/pkg/trainerstatus"
)

// What a whole-job restart cost, when the replicas report progress: the
// last status before the restart against the first after it. A job that
// checkpoints when told to stop (SIGTERM) resumes where it stopped; one
// that checkpoints only now and then redoes the steps since its last
// checkpoint. A "step" metric (or "global_step") counts steps; without
// one, progress percentage points stand in.

// stepMetrics are the metric names read as the training step.
var stepMetrics = []string{"step", "global_step"}

// resumeLedger pairs each whole-job restart with the statuses around it.
type resumeLedger struct {
	mu      sync.Mutex
	last    *trainerstatus.Status
	pending *result.Resume
	// since is when the pending restart's attempt started.
	since time.Time
	done  []result.Resume
}

// status records a status the replicas reported; the first the next
// attempt reported completes the restart's record, which it returns (nil
// if none). A status stamped before the attempt started is an earlier
// attempt's (a log line read late): it is the "before" still.
func (l *resumeLedger) status(s *trainerstatus.Status) *result.Resume {
	l.mu.Lock()
	defer l.mu.Unlock()
	p := l.pending
	if p == nil || s.LastUpdatedTime.Before(l.since.Truncate(time.Second)) {
		l.last = s
		if p != nil {
			p.StepBefore, p.ProgressBefore = stepOf(s), progressOf(s)
		}
		return nil
	}
	l.last = s
	l.pending = nil
	p.ResumedAt = time.Now().UTC().Format(time.RFC3339)
	p.StepAfter, p.ProgressAfter = stepOf(s), progressOf(s)
	switch {
	case p.StepBefore != nil && p.StepAfter != nil:
		lost := *p.StepBefore - *p.StepAfter
		p.Redone, p.Unit = &lost, "steps"
	case p.ProgressBefore != nil && p.ProgressAfter != nil:
		lost := int64(*p.ProgressBefore - *p.ProgressAfter)
		p.Redone, p.Unit = &lost, "percent"
	}
	l.done = append(l.done, *p)
	return p
}

// restarted records that the job's next attempt starts now, every replica
// of the one before gone, for reason.
func (l *resumeLedger) restarted(attempt int, reason string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.since = time.Now()
	r := result.Resume{Attempt: attempt, Reason: reason, RestartedAt: l.since.UTC().Format(time.RFC3339)}
	if l.last != nil {
		r.StepBefore, r.ProgressBefore = stepOf(l.last), progressOf(l.last)
	}
	if l.pending != nil {
		// Restarted again before any status: the earlier one's "before"
		// still stands for this one.
		r.StepBefore, r.ProgressBefore = l.pending.StepBefore, l.pending.ProgressBefore
	}
	l.pending = &r
}

// resumes are the restarts recorded so far, the one still waiting for a
// status included.
func (l *resumeLedger) resumes() []result.Resume {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := append([]result.Resume{}, l.done...)
	if l.pending != nil {
		out = append(out, *l.pending)
	}
	return out
}

// describe says what one restart cost, for an Event and the log.
func describeResume(r *result.Resume) string {
	switch {
	case r.Redone != nil && r.Unit == "steps":
		return fmt.Sprintf("the job resumed at step %d after a %s restart at step %d: %d steps redone", *r.StepAfter, r.Reason, *r.StepBefore, *r.Redone)
	case r.Redone != nil:
		return fmt.Sprintf("the job resumed at %d%% after a %s restart at %d%%: %d percentage points redone", *r.ProgressAfter, r.Reason, *r.ProgressBefore, *r.Redone)
	}
	return fmt.Sprintf("the job reports progress again after a %s restart", r.Reason)
}

func stepOf(s *trainerstatus.Status) *int64 {
	for _, name := range stepMetrics {
		for _, m := range s.Metrics {
			if m.Name == name {
				if n, err := strconv.ParseInt(m.Value, 10, 64); err == nil {
					return &n
				}
			}
		}
	}
	return nil
}

func progressOf(s *trainerstatus.Status) *int32 {
	if s.ProgressPercentage == nil {
		return nil
	}
	p := *s.ProgressPercentage
	return &p
}
