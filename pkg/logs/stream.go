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

	// predecessors are streams of the same pod's ended instances that must
	// finish before this one opens.
	predecessors []*stream

	retireOnce sync.Once
	retired    chan struct{} // closed when the instance ended or Stop was called
	done       chan struct{} // closed when the stream goroutine returns

	connected atomic.Bool
	// awaitingAnswer: a follow request is sent and not yet answered.
	awaitingAnswer atomic.Bool
	// lastRead is the last data, connection or follow request, retiredAt
	// the retirement (unix nanoseconds).
	lastRead, retiredAt atomic.Int64

	gaveUp bool // guarded by PodStreamer.mu; set when retries ran out
}

func (st *stream) retire() {
	st.retireOnce.Do(func() {
		st.retiredAt.Store(time.Now().UnixNano())
		close(st.retired)
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

func (st *stream) touch() { st.lastRead.Store(time.Now().UnixNano()) }

// silentFor is how long a stream has had nothing to print: a connected
// one since it last received data; one whose follow request is still
// unanswered since that request or its retirement, whichever came later.
// A log server answers at its first bytes (a kubelet sends no headers
// before the log's first line), so an unanswered follow request means the
// container printed nothing; such a request stays open for as long as the
// container runs, and after it ended for up to a second on a kubelet (it
// looks every second) and for ever on KWOK. Any other stream (opening a
// plain read, waiting to retry) is never taken as drained.
func (st *stream) silentFor() time.Duration {
	switch {
	case st.connected.Load():
		return time.Since(time.Unix(0, st.lastRead.Load()))
	case st.awaitingAnswer.Load():
		return time.Since(time.Unix(0, max(st.lastRead.Load(), st.retiredAt.Load())))
	}
	return 0
}

// run copies one instance's log until it ends, is cancelled, fails
// permanently or runs out of retries.
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
		s.finished(st, gaveUp)
		close(st.done)
		s.wg.Done()
	}()

	for _, earlier := range st.predecessors {
		select {
		case <-earlier.done:
		case <-ctx.Done():
			return
		}
	}
	st.predecessors = nil
	logger.Debug("streaming replica log")
	retry := s.newBackOff()
	for {
		printed, err := s.copyOnce(ctx, st, out)
		switch {
		case ctx.Err() != nil:
			return // drained after the instance ended, or Stop
		case err == nil:
			return // the server ended the log: the container stopped
		case isPermanent(err):
			logger.Warn("cannot stream replica log", zap.Error(err))
			return
		case st.isRetired():
			logger.Debug("replica log stream of an ended container broke", zap.Error(err))
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
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
		case <-st.retired:
		case <-timer.C:
		}
		timer.Stop()
		if ctx.Err() != nil || st.isRetired() {
			return
		}
	}
}

// copyOnce makes one log request and copies its new lines to out. It
// reports whether it printed anything; a nil error means the server ended
// the log.
func (s *PodStreamer) copyOnce(ctx context.Context, st *stream, out io.Writer) (printed bool, err error) {
	opts := &corev1.PodLogOptions{Container: st.key.container, Follow: st.follow, Timestamps: true}
	if since := st.mark.since(); !since.IsZero() {
		// sinceTime has second precision: the overlap is dropped by the mark.
		t := metav1.NewTime(since)
		opts.SinceTime = &t
	}
	if st.follow {
		st.touch()
		st.awaitingAnswer.Store(true)
	}
	body, err := s.open(ctx, st.podName, opts)
	st.awaitingAnswer.Store(false)
	if err != nil {
		return false, fmt.Errorf("opening log stream: %w", err)
	}
	defer func() { _ = body.Close() }()
	st.touch()
	st.connected.Store(true)
	defer st.connected.Store(false)

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
		st.touch()
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
