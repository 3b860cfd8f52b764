package executor

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/trainstep/trainstep/pkg/outputs"
)

// TestFirstSignalWritesTerminatedOutputsBeforeTheRunIsCancelled: Argo's wait container,
// signalled together with the step, saves the outputs within about a second, long before
// the teardown is over; the files must already say Terminated when the teardown starts.
func TestFirstSignalWritesTerminatedOutputsBeforeTheRunIsCancelled(t *testing.T) {
	cfg := &Config{OutputsDir: t.TempDir(), Logger: zap.NewNop()}
	signals := make(chan os.Signal, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	phaseAtCancel := make(chan string, 1)
	cancelRun := func() {
		data, _ := os.ReadFile(filepath.Join(cfg.OutputsDir, outputs.FilePhase))
		phaseAtCancel <- string(data)
		cancel()
	}
	terminated, done := watchSignals(ctx, signals, cancelRun, func() { writeStoppingOutputs(cfg, "ts-0123456789") })
	if terminated() {
		t.Fatal("terminated before any signal")
	}
	signals <- syscall.SIGTERM
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the signal watch did not end after the signal")
	}
	if !terminated() {
		t.Error("not terminated after the signal")
	}
	if got := <-phaseAtCancel; got != "Terminated" {
		t.Errorf("phase file when the run was cancelled = %q, want Terminated", got)
	}
	for file, want := range map[string]string{outputs.FileReason: "Terminated", outputs.FileJobName: "ts-0123456789"} {
		if data, _ := os.ReadFile(filepath.Join(cfg.OutputsDir, file)); string(data) != want {
			t.Errorf("%s = %q, want %q", file, data, want)
		}
	}
}

// TestSignalWatchEndsWithTheRun: without a signal, the watch ends when the run does.
func TestSignalWatchEndsWithTheRun(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	terminated, done := watchSignals(ctx, make(chan os.Signal), cancel, func() { t.Error("onSignal ran without a signal") })
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the signal watch did not end with the run")
	}
	if terminated() {
		t.Error("terminated without a signal")
	}
}
