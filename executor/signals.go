package executor

import (
	"context"
	"os"
	"sync/atomic"
)

// watchSignals cancels the run on the first signal and reports whether one
// came. (A second signal is handled by the command: it exits at once.)
func watchSignals(ctx context.Context, signals <-chan os.Signal, cancel context.CancelFunc) func() bool {
	var got atomic.Bool
	if signals == nil {
		return got.Load
	}
	go func() {
		select {
		case <-signals:
			got.Store(true)
			cancel()
		case <-ctx.Done():
		}
	}()
	return got.Load
}
