package executor

import (
	"context"
	"os"
	"sync/atomic"
)

// watchSignals cancels the run on the first signal, after onSignal (when
// given) has run, and reports whether one came. done is closed once the
// watch is over: after ctx ends, or after the signal's onSignal and cancel.
// (A second signal is handled by the command: it exits at once.)
func watchSignals(ctx context.Context, signals <-chan os.Signal, cancel context.CancelFunc, onSignal func()) (terminated func() bool, done <-chan struct{}) {
	var got atomic.Bool
	finished := make(chan struct{})
	if signals == nil {
		close(finished)
		return got.Load, finished
	}
	go func() {
		defer close(finished)
		select {
		case <-signals:
			got.Store(true)
			if onSignal != nil {
				onSignal()
			}
			cancel()
		case <-ctx.Done():
		}
	}()
	return got.Load, finished
}
