package logs

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v4"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// errOutput marks a failure to write to the step's stderr: retrying the
// stream cannot help.
var errOutput = errors.New("writing replica log line")

// stream is the log of one container instance being copied.
type stream struct {
	key     instanceKey
	podName string
	prefix  string
	follow  bool
	mark    *highWater
	cancel  context.CancelFunc

	// followCtx bounds the follow request: retiring the stream cancels it,
	// and the rest of the log is then read without following.
	followCtx    context.Context
	cancelFollow context.CancelFunc

	// predecessors are streams of the same pod's ended instances that must
	// finish before this one opens.
	predecessors []*stream

	retireOnce sync.Once
	retired    chan struct{} // closed when the instance ended or Stop was called
	done       chan struct{} // closed when the stream goroutine returns

	// rest says where the rest of a retired instance's log is read from.
	rest atomic.Int32

	gaveUp bool // guarded by PodStreamer.mu; set when retries ran out
}

// Where the rest of a retired instance's log is: the container's current
// log, its previous one (it has restarted once since), or nowhere (it has
// restarted more than once: the kubelet keeps one previous log).
const (
	restCurrent int32 = iota
	restPrevious
	restGone
)

// retire ends the instance's follow request: what the instance printed
// and the request had not yet delivered is read by one plain request,
// which ends with the log. A log server keeps a follow request open after
// its container ended for a while (a kubelet looks every few seconds) or
// for ever (KWOK), so neither its end nor a quiet period says when the
// last line has been delivered; the end of a plain read does.
func (st *stream) retire(rest int32) {
	st.retireOnce.Do(func() {
		st.rest.Store(rest)
		close(st.retired)
		if st.cancelFollow != nil {
			st.cancelFollow()
		}
	})
}

func (st *stream) isRetired() bool {
	select {
	case <-st.retired:
		return true
	default:
		return false
	}
}

// run copies one instance's log until it ends, is cancelled, fails
// permanently or runs out of retries. A follow stream that is retired
// reads the rest of its instance's log without following, to its end.
func (s *PodStreamer) run(ctx context.Context, st *stream) {
	logger := s.logger.With(
		zap.String("namespace", s.namespace),
		zap.String("pod", st.podName),
		zap.String("container", st.key.container),
		zap.Int32("restarts", st.key.restarts),
		zap.Bool("follow", st.follow),
	)
	out := s.out.Writer(st.prefix)
	gaveUp := false
	defer func() {
		_ = out.Close()
		st.cancel()
		if st.cancelFollow != nil {
			st.cancelFollow()
		}
		s.finished(st, gaveUp)
		close(st.done)
		s.wg.Done()
	}()
	if !waitForPredecessors(ctx, st) {
		return
	}
	logger.Debug("streaming replica log")
	retry := s.newBackOff()
	for {
		retiredBefore := st.isRetired()
		following := st.follow && !retiredBefore
		if retiredBefore && st.rest.Load() == restGone {
			logger.Debug("replica log of a container restarted twice since is no longer served")
			return
		}
		reqCtx := ctx
		if following {
			reqCtx = st.followCtx
		}
		printed, err := s.copyOnce(reqCtx, st, out, following, retiredBefore && st.rest.Load() == restPrevious)
		switch {
		case ctx.Err() != nil:
			return // Stop's bound, or Stop after the pod went away
		case following && st.isRetired():
			continue // read the rest of the log, to its end
		case err == nil:
			return // the server ended the log: it is complete
		case isPermanent(err):
			logger.Warn("cannot stream replica log", zap.Error(err))
			return
		}
		if printed {
			retry.Reset()
		}
		wait := retry.NextBackOff()
		if wait == backoff.Stop {
			logger.Warn("giving up streaming replica log", zap.Error(err))
			gaveUp = true
			return
		}
		logger.Debug("retrying replica log stream", zap.Error(err), zap.Duration("after", wait))
		if !waitToRetry(ctx, st, wait) {
			return
		}
	}
}

// waitForPredecessors waits until the streams of the container's earlier
// instances are done, so that the logs print in order; false when ctx
// ended first.
func waitForPredecessors(ctx context.Context, st *stream) bool {
	for _, earlier := range st.predecessors {
		select {
		case <-earlier.done:
		case <-ctx.Done():
			return false
		}
	}
	st.predecessors = nil
	return true
}

// waitToRetry waits out a failed read's back-off; a retirement during the
// wait reads the rest at once, and once retired, a failing read waits out
// its back-off. It reports false when ctx ended.
func waitToRetry(ctx context.Context, st *stream, wait time.Duration) bool {
	var retired <-chan struct{}
	if !st.isRetired() {
		retired = st.retired
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case <-ctx.Done():
	case <-retired:
	case <-timer.C:
	}
	return ctx.Err() == nil
}

// copyOnce makes one log request, following the log or reading it to its
// current end, of the container's current or previous instance, and copies
// its new lines to out. It reports whether it printed anything; a nil
// error means the server ended the log.
func (s *PodStreamer) copyOnce(ctx context.Context, st *stream, out io.Writer, follow, previous bool) (printed bool, err error) {
	opts := &corev1.PodLogOptions{Container: st.key.container, Follow: follow, Previous: previous, Timestamps: true}
	if since := st.mark.since(); !since.IsZero() {
		// sinceTime has second precision: the overlap is dropped by the mark.
		t := metav1.NewTime(since)
		opts.SinceTime = &t
	}
	body, err := s.open(ctx, st.podName, opts)
	if err != nil {
		return false, fmt.Errorf("opening log stream: %w", err)
	}
	defer func() { _ = body.Close() }()

	reader := bufio.NewReaderSize(body, MaxLineBytes)
	var pos streamPosition
	var line []byte
	keep, lineStart := false, true
	for {
		fragment, more, err := reader.ReadLine()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return printed, nil
			}
			return printed, fmt.Errorf("reading log stream: %w", err)
		}
		if lineStart {
			var ts time.Time
			ts, fragment = splitTimestamp(fragment)
			keep = st.mark.admit(ts, &pos)
		}
		lineStart = !more
		if !keep {
			continue
		}
		// Copy: fragment points into the reader's buffer.
		line = append(line[:0], fragment...)
		if !more {
			line = append(line, '\n')
		}
		if _, err := out.Write(line); err != nil {
			return printed, fmt.Errorf("%w: %w", errOutput, err)
		}
		printed = true
	}
}

// isPermanent tells errors that retrying the same request cannot fix: the
// pod is gone, the request is refused, the container has no log to serve,
// or stderr cannot be written.
func isPermanent(err error) bool {
	return errors.Is(err, errOutput) ||
		apierrors.IsNotFound(err) ||
		apierrors.IsForbidden(err) ||
		apierrors.IsUnauthorized(err) ||
		apierrors.IsBadRequest(err) ||
		apierrors.IsInvalid(err) ||
		apierrors.IsMethodNotSupported(err)
}
