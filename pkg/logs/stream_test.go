package logs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/trainstep/trainstep/internal/testutil"

	"github.com/cenkalti/backoff/v4"
	"github.com/google/go-cmp/cmp"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
)

// logServer serves one container log with timestamps the way the API
// server does when asked for them. Like KWOK serving a fixed file, every
// request returns the whole log again (from sinceTime, at second
// precision), and when keepOpen is set follow requests stay open after the
// content until they are cancelled. With unansweredWhenEmpty a follow
// request with nothing to send gets no answer until it is cancelled, as a
// kubelet sends no headers before a log's first line.
type logServer struct {
	mu                  sync.Mutex
	lines               []string // "<RFC 3339 time> <content>"
	keepOpen            bool
	unansweredWhenEmpty bool
	trickle             time.Duration // keepOpen streams append a new line this often
	failures            []openFailure // how the first requests fail, in order
	requests            []logRequest
}

// openFailure makes a request fail: at once with err, or with a broken
// connection after linesFirst lines.
type openFailure struct {
	err        error
	linesFirst int
}

type logRequest struct {
	opts corev1.PodLogOptions
	ctx  context.Context
	// earlierOpen counts earlier requests still open when this one was made.
	earlierOpen int
}

var logTime = time.Date(2025, 3, 1, 10, 0, 0, 0, time.UTC)

func stamped(ms int, content string) string {
	return logTime.Add(time.Duration(ms)*time.Millisecond).Format(time.RFC3339Nano) + " " + content
}

func (s *logServer) add(lines ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lines = append(s.lines, lines...)
}

func (s *logServer) open(ctx context.Context, podName string, opts *corev1.PodLogOptions) (io.ReadCloser, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	earlierOpen := 0
	for _, r := range s.requests {
		if r.ctx.Err() == nil {
			earlierOpen++
		}
	}
	s.requests = append(s.requests, logRequest{opts: *opts, ctx: ctx, earlierOpen: earlierOpen})
	var failure openFailure
	if len(s.failures) > 0 {
		failure, s.failures = s.failures[0], s.failures[1:]
	}
	if failure.err != nil {
		return nil, failure.err
	}
	var since time.Time
	if opts.SinceTime != nil {
		since = opts.SinceTime.Time.Truncate(time.Second) // the wire format keeps seconds only
	}
	var content []string
	for _, l := range s.lines {
		ts, _ := splitTimestamp([]byte(l))
		if !ts.Before(since) {
			content = append(content, l)
		}
	}
	if opts.Follow && len(content) == 0 && s.unansweredWhenEmpty {
		s.mu.Unlock()
		<-ctx.Done()
		s.mu.Lock()
		return nil, ctx.Err()
	}
	reader, writer := io.Pipe()
	go s.serve(ctx, writer, content, opts.Follow, failure.linesFirst)
	return reader, nil
}

func (s *logServer) serve(ctx context.Context, w *io.PipeWriter, content []string, follow bool, breakAfter int) {
	for i, l := range content {
		if breakAfter > 0 && i == breakAfter {
			w.CloseWithError(io.ErrUnexpectedEOF)
			return
		}
		if _, err := io.WriteString(w, l+"\n"); err != nil {
			return
		}
	}
	if !follow || !s.keepOpen {
		w.Close()
		return
	}
	var tick <-chan time.Time
	if s.trickle > 0 {
		ticker := time.NewTicker(s.trickle)
		defer ticker.Stop()
		tick = ticker.C
	}
	for n := 0; ; n++ {
		select {
		case <-ctx.Done():
			w.CloseWithError(ctx.Err())
			return
		case now := <-tick:
			if _, err := io.WriteString(w, now.UTC().Format(time.RFC3339Nano)+fmt.Sprintf(" tick %d\n", n)); err != nil {
				return
			}
		}
	}
}

func (s *logServer) requestsMade() []logRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]logRequest(nil), s.requests...)
}

// newTestStreamer returns a streamer reading from server with fast,
// bounded retries.
func newTestStreamer(server *logServer, out io.Writer, logger *zap.Logger) *PodStreamer {
	s := NewPodStreamer(fake.NewClientset().CoreV1(), testNamespace, NewPrefixer(out), logger)
	s.open = server.open
	s.newBackOff = func() backoff.BackOff {
		return backoff.WithMaxRetries(backoff.NewConstantBackOff(time.Millisecond), 3)
	}
	return s
}

func outputLines(out *testutil.SyncBuffer) []string {
	text := strings.TrimSuffix(out.String(), "\n")
	if text == "" {
		return nil
	}
	return strings.Split(text, "\n")
}

func TestPodStreamerDoesNotRepeatReplayedLinesAcrossRestarts(t *testing.T) {
	server := &logServer{keepOpen: true}
	server.add(stamped(1, "epoch 1"), stamped(2, "epoch 2"), stamped(3, "epoch 3"))
	var out testutil.SyncBuffer
	streamer := newTestStreamer(server, &out, zap.NewNop())

	streamer.Observe(replicaPod("a", running(0)), "worker-0", testContainer)
	testutil.Eventually(t, 5*time.Second, "the first instance's lines", func() bool { return len(outputLines(&out)) == 3 })

	// The container restarts in place and logs one more line; the server
	// answers the new instance's request with the whole log.
	server.add(stamped(4, "restarted"))
	streamer.Observe(replicaPod("a", running(1)), "worker-0", testContainer)
	testutil.Eventually(t, 5*time.Second, "the restarted instance's line", func() bool { return len(outputLines(&out)) == 4 })
	// The old instance's read of its rest may have printed that line: wait
	// for the new instance's own follow, or a later retirement would find it
	// not yet following and read its log once.
	testutil.Eventually(t, 5*time.Second, "the restarted instance's follow", func() bool { return len(server.requestsMade()) == 3 })

	// Then the pod is recreated and logs another line.
	server.add(stamped(1500, "recreated"))
	streamer.Observe(replicaPod("b", running(0)), "worker-0", testContainer)
	testutil.Eventually(t, 5*time.Second, "the recreated pod's line", func() bool { return len(outputLines(&out)) == 5 })
	testutil.Eventually(t, 5*time.Second, "the recreated pod's follow", func() bool { return len(server.requestsMade()) == 4 })

	testutil.Eventually(t, 5*time.Second, "the restarted container's old stream to be cancelled", func() bool {
		return server.requestsMade()[0].ctx.Err() != nil
	})
	stopWithin(t, streamer, 5*time.Second)

	want := []string{
		"[worker-0] epoch 1", "[worker-0] epoch 2", "[worker-0] epoch 3",
		"[worker-0] restarted", "[worker-0] recreated",
	}
	if diff := cmp.Diff(want, outputLines(&out)); diff != "" {
		t.Errorf("output (-want +got):\n%s", diff)
	}
	// Instance 0 follows, then reads the rest of its log, now the previous
	// one, to its end; instance 1 follows once that ended; pod b follows;
	// Stop has instance 1 and pod b read their rest.
	requests := server.requestsMade()
	if len(requests) != 6 {
		t.Fatalf("%d log requests, want 6: a follow and a read of the rest per instance", len(requests))
	}
	if requests[0].opts.SinceTime != nil || !requests[0].opts.Follow {
		t.Errorf("first request %+v, want a follow without sinceTime", requests[0].opts)
	}
	wantSince := logTime.Add(3 * time.Millisecond)
	if r := requests[1].opts; r.Follow || !r.Previous || r.SinceTime == nil || !r.SinceTime.Time.Equal(wantSince) {
		t.Errorf("old instance's second request %+v, want a read of the previous log from the last printed line's %v", r, wantSince)
	}
	// This server answers every request with the whole log: the old
	// instance's read printed the restarted line too.
	if r, since := requests[2], logTime.Add(4*time.Millisecond); !r.opts.Follow || r.opts.Previous || r.opts.SinceTime == nil || !r.opts.SinceTime.Time.Equal(since) {
		t.Errorf("restarted instance's request %+v, want a follow from the last printed line's %v", r.opts, since)
	}
	if requests[2].earlierOpen != 0 {
		t.Error("restarted instance's stream opened before the old instance's stream finished")
	}
}

func TestPodStreamerResumesAfterATransientError(t *testing.T) {
	server := &logServer{failures: []openFailure{
		{linesFirst: 2}, // the connection breaks after two lines
		{err: apierrors.NewServiceUnavailable("apiserver restarting")},
	}}
	server.add(stamped(1, "one"), stamped(2, "two"), stamped(3, "three"), stamped(4, "four"))
	var out testutil.SyncBuffer
	streamer := newTestStreamer(server, &out, zap.NewNop())

	streamer.Observe(replicaPod("a", running(0)), "worker-0", testContainer)
	testutil.Eventually(t, 5*time.Second, "all lines", func() bool { return len(outputLines(&out)) >= 4 })
	stopWithin(t, streamer, 5*time.Second)

	want := []string{"[worker-0] one", "[worker-0] two", "[worker-0] three", "[worker-0] four"}
	if diff := cmp.Diff(want, outputLines(&out)); diff != "" {
		t.Errorf("output (-want +got):\n%s", diff)
	}
	requests := server.requestsMade()
	if len(requests) != 3 {
		t.Fatalf("%d log requests, want 3 (broken, refused, resumed)", len(requests))
	}
	wantSince := logTime.Add(2 * time.Millisecond)
	for _, r := range requests[1:] {
		if r.opts.SinceTime == nil || !r.opts.SinceTime.Time.Equal(wantSince) {
			t.Errorf("retry has sinceTime %v, want %v", r.opts.SinceTime, wantSince)
		}
	}
}

func TestPodStreamerStopsOnErrors(t *testing.T) {
	unavailable := apierrors.NewServiceUnavailable("down")
	notFound := apierrors.NewNotFound(schema.GroupResource{Resource: "pods"}, testPod)
	badRequest := apierrors.NewBadRequest(`container "tensorflow" in pod "mnist-worker-0" is waiting to start`)
	cases := []struct {
		name         string
		failures     []openFailure
		wantRequests int
		wantWarning  string
	}{
		{
			name:         "pod gone",
			failures:     []openFailure{{err: notFound}},
			wantRequests: 1,
			wantWarning:  "cannot stream replica log",
		},
		{
			name:         "no log to serve",
			failures:     []openFailure{{err: badRequest}},
			wantRequests: 1,
			wantWarning:  "cannot stream replica log",
		},
		{
			name:         "transient errors are retried a bounded number of times",
			failures:     []openFailure{{err: unavailable}, {err: unavailable}, {err: unavailable}, {err: unavailable}, {err: unavailable}},
			wantRequests: 4, // the first try and three retries
			wantWarning:  "giving up streaming replica log",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			server := &logServer{failures: tc.failures}
			server.add(stamped(1, "never printed"))
			core, logs := observer.New(zapcore.WarnLevel)
			var out testutil.SyncBuffer
			streamer := newTestStreamer(server, &out, zap.New(core))

			streamer.Observe(replicaPod("a", running(0)), "worker-0", testContainer)
			testutil.Eventually(t, 5*time.Second, "a warning", func() bool { return logs.Len() > 0 })
			stopWithin(t, streamer, 5*time.Second)

			if n := len(server.requestsMade()); n != tc.wantRequests {
				t.Errorf("%d log requests, want %d", n, tc.wantRequests)
			}
			if got := logs.All()[0].Message; got != tc.wantWarning {
				t.Errorf("warning %q, want %q", got, tc.wantWarning)
			}
			if out.String() != "" {
				t.Errorf("output = %q, want nothing", out.String())
			}
		})
	}
}

func TestPodStreamerRestartsAStreamThatGaveUp(t *testing.T) {
	unavailable := apierrors.NewServiceUnavailable("down")
	server := &logServer{failures: []openFailure{{err: unavailable}, {err: unavailable}, {err: unavailable}, {err: unavailable}}}
	server.add(stamped(1, "finally"))
	core, logs := observer.New(zapcore.WarnLevel)
	var out testutil.SyncBuffer
	streamer := newTestStreamer(server, &out, zap.New(core))

	streamer.Observe(replicaPod("a", running(0)), "worker-0", testContainer)
	testutil.Eventually(t, 5*time.Second, "giving up", func() bool { return logs.FilterMessage("giving up streaming replica log").Len() == 1 })
	testutil.Eventually(t, 5*time.Second, "the stream to end", func() bool {
		streamer.mu.Lock()
		defer streamer.mu.Unlock()
		return len(streamer.active) == 0
	})
	streamer.Observe(replicaPod("a", running(0)), "worker-0", testContainer)
	testutil.Eventually(t, 5*time.Second, "the line", func() bool { return out.String() == "[worker-0] finally\n" })
	stopWithin(t, streamer, 5*time.Second)
}

func TestPodStreamerStopDrainsThenCancels(t *testing.T) {
	cases := []struct {
		name       string
		trickle    time.Duration
		drainBound time.Duration
		maxStop    time.Duration
	}{
		{name: "silent open stream is cut and its rest read", drainBound: 5 * time.Second, maxStop: 2 * time.Second},
		{name: "never silent stream is cut and its rest read", trickle: 5 * time.Millisecond, drainBound: 5 * time.Second, maxStop: 2 * time.Second},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			server := &logServer{keepOpen: true, trickle: tc.trickle}
			server.add(stamped(1, "first"), stamped(2, "second"))
			var out testutil.SyncBuffer
			streamer := newTestStreamer(server, &out, zap.NewNop())
			streamer.Observe(replicaPod("a", running(0)), "worker-0", testContainer)
			streamer.Observe(replicaPod("b", running(0)), "worker-1", testContainer)
			testutil.Eventually(t, 5*time.Second, "both replicas' lines", func() bool { return len(outputLines(&out)) >= 4 })

			start := time.Now()
			stopWithin(t, streamer, tc.drainBound)
			if took := time.Since(start); took > tc.maxStop {
				t.Errorf("Stop took %v, want under %v", took, tc.maxStop)
			}
			for i, r := range server.requestsMade() {
				if r.ctx.Err() == nil {
					t.Errorf("stream %d still open after Stop", i)
				}
			}
			text := out.String()
			for _, want := range []string{"[worker-0] first\n", "[worker-0] second\n", "[worker-1] first\n", "[worker-1] second\n"} {
				if !strings.Contains(text, want) {
					t.Errorf("output lacks %q", want)
				}
			}
		})
	}
}

func TestPodStreamerDoesNotWaitForAnUnansweredFollowRequest(t *testing.T) {
	cases := []struct {
		name string
		end  func(*PodStreamer)
	}{
		{name: "the container ended", end: func(s *PodStreamer) {
			s.Observe(replicaPod("a", terminated(0, 0)), "worker-0", testContainer)
		}},
		{name: "the container still runs", end: func(*PodStreamer) {}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			server := &logServer{keepOpen: true, unansweredWhenEmpty: true}
			var out testutil.SyncBuffer
			streamer := newTestStreamer(server, &out, zap.NewNop())
			streamer.Observe(replicaPod("a", running(0)), "worker-0", testContainer)
			testutil.Eventually(t, 5*time.Second, "the follow request", func() bool { return len(server.requestsMade()) == 1 })
			tc.end(streamer)

			start := time.Now()
			// The rest is read without following: Stop must not wait for the bound.
			stopWithin(t, streamer, 10*time.Second)
			if took := time.Since(start); took > 2*time.Second {
				t.Errorf("Stop took %v for a container that printed nothing, want one read of the rest", took)
			}
			if r := server.requestsMade()[0]; r.ctx.Err() == nil {
				t.Error("the unanswered follow request is still open after Stop")
			}
			if out.String() != "" {
				t.Errorf("printed %q for a container that printed nothing", out.String())
			}
		})
	}
}

func TestPodStreamerFinishesStreamOfTerminatedContainer(t *testing.T) {
	server := &logServer{keepOpen: true}
	server.add(stamped(1, "done"))
	var out testutil.SyncBuffer
	streamer := newTestStreamer(server, &out, zap.NewNop())
	streamer.Observe(replicaPod("a", running(0)), "worker-0", testContainer)
	testutil.Eventually(t, 5*time.Second, "the line", func() bool { return out.String() == "[worker-0] done\n" })

	streamer.Observe(replicaPod("a", terminated(0, 0)), "worker-0", testContainer)
	testutil.Eventually(t, 5*time.Second, "the ended container's stream to close", func() bool { return server.requestsMade()[0].ctx.Err() != nil })
	stopWithin(t, streamer, 5*time.Second)
	requests := server.requestsMade()
	if len(requests) != 2 || requests[1].opts.Follow || requests[1].opts.Previous {
		t.Fatalf("log requests %v, want the follow and one read of the rest", requests)
	}
	if out.String() != "[worker-0] done\n" {
		t.Errorf("output %q, want the line once", out.String())
	}
}

// A log server may keep a follow request open after the container ended
// without having sent its last lines (KWOK's never ends; a kubelet's ends
// seconds later). The stream of an ended container reads the rest of the
// log to its end, so Stop prints those lines, and does not wait for the
// follow request to go quiet or end.
func TestPodStreamerKeepsTheLastLinesOfAnEndedContainer(t *testing.T) {
	for _, tc := range []struct {
		name string
		end  func(*PodStreamer)
	}{
		{"the container ended, then Stop", func(s *PodStreamer) {
			s.Observe(replicaPod("a", terminated(0, 0)), "worker-0", testContainer)
		}},
		{"Stop while the container runs", func(*PodStreamer) {}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			server := &logServer{keepOpen: true}
			server.add(stamped(1, "epoch 1"))
			var out testutil.SyncBuffer
			streamer := newTestStreamer(server, &out, zap.NewNop())
			streamer.Observe(replicaPod("a", running(0)), "worker-0", testContainer)
			testutil.Eventually(t, 5*time.Second, "the first line", func() bool { return len(outputLines(&out)) == 1 })

			// Printed by the container, not delivered by the open follow request.
			server.add(stamped(2, "final loss 0.01"), stamped(3, "saved model"))
			tc.end(streamer)
			start := time.Now()
			stopWithin(t, streamer, 10*time.Second)
			if took := time.Since(start); took > 2*time.Second {
				t.Errorf("Stop took %v, want it not to wait for the open follow request", took)
			}
			want := []string{"[worker-0] epoch 1", "[worker-0] final loss 0.01", "[worker-0] saved model"}
			if diff := cmp.Diff(want, outputLines(&out)); diff != "" {
				t.Errorf("output (-want +got):\n%s", diff)
			}
			for i, r := range server.requestsMade() {
				if r.ctx.Err() == nil {
					t.Errorf("request %d still open after Stop", i)
				}
			}
		})
	}
}

func TestPodStreamerKeepsOverlongLines(t *testing.T) {
	long := strings.Repeat("y", MaxLineBytes+10)
	server := &logServer{}
	server.add(stamped(1, long), stamped(2, "after"))
	var out testutil.SyncBuffer
	streamer := newTestStreamer(server, &out, zap.NewNop())
	streamer.Observe(replicaPod("a", terminated(0, 0)), "worker-0", testContainer)
	stopWithin(t, streamer, 5*time.Second)

	want := []string{"[worker-0] " + long[:MaxLineBytes], "[worker-0] " + long[MaxLineBytes:], "[worker-0] after"}
	if diff := cmp.Diff(want, outputLines(&out)); diff != "" {
		t.Errorf("output (-want +got):\n%s", diff)
	}
}

func TestIsPermanent(t *testing.T) {
	gr := schema.GroupResource{Resource: "pods"}
	cases := []struct {
		err  error
		want bool
	}{
		{apierrors.NewNotFound(gr, "p"), true},
		{apierrors.NewForbidden(gr, "p", errors.New("no")), true},
		{apierrors.NewUnauthorized("no"), true},
		{apierrors.NewBadRequest("waiting"), true},
		{fmt.Errorf("%w: %w", errOutput, errors.New("broken pipe")), true},
		{apierrors.NewServiceUnavailable("down"), false},
		{apierrors.NewTooManyRequests("slow down", 1), false},
		{apierrors.NewInternalError(errors.New("etcd")), false},
		{fmt.Errorf("reading log stream: %w", io.ErrUnexpectedEOF), false},
	}
	for _, tc := range cases {
		if got := isPermanent(tc.err); got != tc.want {
			t.Errorf("isPermanent(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
