package trainer

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// failingReducer stands for a peer that dies: the all-reduce of step
// failAt fails.
type failingReducer struct{ calls, failAt int }

func (r *failingReducer) AllReduce(context.Context, []float64) error {
	r.calls++
	if r.calls == r.failAt {
		return errors.New("connection closed by peer")
	}
	return nil
}

// A job killed at step 35 and restarted resumes from the checkpoint of
// step 30, with its weights: it does not start over, and ends as a run
// that was never interrupted would. Its success removes the checkpoint.
func TestTrainingResumesFromTheCheckpoint(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "pod-0") // made by the trainer, as /var/tmp/<pod>
	s := DefaultSettings()
	s.CheckpointDir, s.CheckpointEvery, s.Steps = dir, 10, 45
	s.TerminationMessagePath = filepath.Join(t.TempDir(), "termination-log")
	// The first all-reduce shares the (absent) checkpoint; step n is call n+1.
	err := trainSynchronously(context.Background(), s, 0, 1, &failingReducer{failAt: 36}, NewLogger(&bytes.Buffer{}), false)
	if err == nil {
		t.Fatal("the interrupted run did not fail")
	}
	if c, ok, err := loadCheckpoint(dir, s.Features); err != nil || !ok || c.Step != 30 {
		t.Fatalf("checkpoint after the failure at step 35: %+v, %v, %v; want step 30", c, ok, err)
	}
	var out bytes.Buffer
	if err := RunSingle(context.Background(), s, NewLogger(&out)); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "resuming from the checkpoint of step 30") {
		t.Errorf("the restarted run did not say it resumed:\n%s", out.String())
	}
	body, err := os.ReadFile(s.TerminationMessagePath)
	if err != nil {
		t.Fatal(err)
	}
	var m Metrics
	if err := json.Unmarshal(body, &m); err != nil || m.Steps != 45 {
		t.Fatalf("metrics %s (%v): want 45 steps in all", body, err)
	}
	if _, ok, _ := loadCheckpoint(dir, s.Features); ok {
		t.Error("the checkpoint is still there after the job succeeded")
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the checkpoint directory is still there after the job succeeded (%v)", err)
	}
	straight := s
	straight.CheckpointDir = ""
	straight.TerminationMessagePath = filepath.Join(t.TempDir(), "termination-log")
	if err := RunSingle(context.Background(), straight, NewLogger(&bytes.Buffer{})); err != nil {
		t.Fatal(err)
	}
	body, _ = os.ReadFile(straight.TerminationMessagePath)
	var want Metrics
	_ = json.Unmarshal(body, &want)
	if m.Loss != want.Loss {
		t.Errorf("resumed run's loss %v, an uninterrupted run's %v", m.Loss, want.Loss)
	}
}

func TestACheckpointOfAnotherModelIsAnError(t *testing.T) {
	dir := t.TempDir()
	if err := saveCheckpoint(dir, checkpoint{Step: 3, Weights: []float64{1, 2}}); err != nil {
		t.Fatal(err)
	}
	s := DefaultSettings()
	s.CheckpointDir = dir
	err := RunSingle(context.Background(), s, NewLogger(&bytes.Buffer{}))
	if err == nil || !strings.Contains(err.Error(), "another model") {
		t.Errorf("err %v, want one naming the mismatch", err)
	}
}
