package reconcile

import (
	"errors"
	"fmt"
	"runtime/debug"

	"go.uber.org/zap"
	"k8s.io/client-go/tools/cache"

	"github.com/trainstep/trainstep/pkg/result"
)

// A panic in any goroutine the controller runs — a sync, a parallel create
// or delete, an informer's handler (OnPod with it), the autoscaler — ends
// the run as a fatal InternalError, so that the step still tears the job
// down and writes its outputs. Unrecovered, a panic outside the sync's own
// goroutine ends the process (exit 2) with neither.

// panicked is a recovered panic with the stack it was raised on.
type panicked struct {
	value any
	stack []byte
}

func (p *panicked) Error() string { return fmt.Sprintf("panic: %v", p.value) }

// internalError is the fatal error of a recovered panic in where.
func internalError(where string, p *panicked) error {
	return &result.Error{Phase: result.PhaseFailed, Reason: result.ReasonInternalError,
		Err: fmt.Errorf("internal error in %s: %w", where, p)}
}

// recovered runs work(i) and returns a panic in it as an InternalError:
// workqueue.ParallelizeUntil would raise it again in its own goroutine.
func recovered(work func(i int) error, i int) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = internalError("a parallel write", &panicked{value: v, stack: debug.Stack()})
		}
	}()
	return work(i)
}

// crash records the first panic of a controller goroutine; Run then ends
// with it. It returns the run's InternalError.
func (c *Controller) crash(where string, p *panicked) error {
	err := internalError(where, p)
	c.opts.Logger.Error("the controller failed", zap.String("where", where), zap.Any("panic", p.value), zap.ByteString("stack", p.stack))
	c.crashOnce.Do(func() {
		c.crashErr = err
		close(c.crashed)
	})
	return err
}

// crashError is the run's InternalError once a controller goroutine
// panicked, nil before.
func (c *Controller) crashError() error {
	select {
	case <-c.crashed:
		return c.crashErr
	default:
		return nil
	}
}

// recoverPanic, deferred at the top of a goroutine or handler, turns its
// panic into the run's InternalError.
func (c *Controller) recoverPanic(where string) {
	if v := recover(); v != nil {
		c.crash(where, &panicked{value: v, stack: debug.Stack()})
	}
}

// crashOnPanics records the panics errs carry (parallel pieces recovered).
func (c *Controller) crashOnPanics(errs []error) {
	for _, err := range errs {
		var p *panicked
		if errors.As(err, &p) {
			c.crash("a parallel write", p)
			return
		}
	}
}

// guarded wraps an informer's handlers so that their panic ends the run
// rather than the process (client-go raises it again in its goroutine).
func (c *Controller) guarded(where string, h cache.ResourceEventHandlerFuncs) cache.ResourceEventHandlerFuncs {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			defer c.recoverPanic(where)
			if h.AddFunc != nil {
				h.AddFunc(obj)
			}
		},
		UpdateFunc: func(old, obj any) {
			defer c.recoverPanic(where)
			if h.UpdateFunc != nil {
				h.UpdateFunc(old, obj)
			}
		},
		DeleteFunc: func(obj any) {
			defer c.recoverPanic(where)
			if h.DeleteFunc != nil {
				h.DeleteFunc(obj)
			}
		},
	}
}
