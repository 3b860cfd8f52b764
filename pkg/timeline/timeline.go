// Package timeline records when one run reaches each stage of its launch —
// configuration, preflight, the Lease, the informers' first sync, the creates
// — with what the client-side rate limiter made the requests wait by then,
// and the process's CPU time and peak memory, so that a slow launch names its
// cause. It is a diagnostic: it never changes a request or a decision, and a
// nil *Timeline records nothing at the cost of a nil check, so callers use it
// unconditionally.
package timeline

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"k8s.io/client-go/util/flowcontrol"

	"github.com/trainstep/trainstep/internal/procfs"
	"github.com/trainstep/trainstep/pkg/apistats"
)

// CreateMarkEvery is how often, in accepted creates, the timeline marks the
// creates' progress (besides the first and the last).
const CreateMarkEvery = 64

// Timeline is one run's stages. Its methods are safe for concurrent use
// and do nothing on a nil *Timeline.
type Timeline struct {
	start time.Time
	now   func() time.Time

	mu    sync.Mutex
	marks []Mark
	// seen holds the request kinds ("verb resource") already marked on
	// their first appearance.
	seen map[string]bool

	creates              atomic.Int64
	limiterWait, maxWait atomic.Int64 // nanoseconds, summed over requests / the longest one
	throttled, requests  atomic.Int64 // answers 429 / requests sent
	// createLatency sums the creates' round trips (nanoseconds), answers counts them.
	createLatency, answers atomic.Int64
}

// Mark is one stage reached.
type Mark struct {
	Stage string
	// At is the time since the process started.
	At time.Duration
	// Creates is how many objects the API server had accepted by then.
	Creates int64
	// Requests is how many requests had been sent by then, Throttled how
	// many of their answers were 429 Too Many Requests (the API server's
	// own flow control; client-go waits and retries them).
	Requests, Throttled int64
	// LimiterWait is the time requests had spent waiting for the
	// client-side rate limiter by then, summed over requests (parallel
	// waits add up); LongestWait the longest single wait.
	LimiterWait, LongestWait time.Duration
	// CreateLatency is the creates' round trips summed, CreateAnswers how
	// many there were; CPU is this process's CPU time (user and system).
	CreateLatency time.Duration
	CreateAnswers int64
	CPU           time.Duration
	// PeakRSS is this process's resident memory high-water mark by then,
	// in bytes (0 where the system does not say).
	PeakRSS int64
}

// New starts a timeline whose times count from start (the process's start).
func New(start time.Time) *Timeline {
	return &Timeline{start: start, now: time.Now, seen: map[string]bool{}}
}

// Mark records that the run reached stage now.
func (t *Timeline) Mark(stage string) {
	if t == nil {
		return
	}
	m := Mark{
		Stage: stage, At: t.now().Sub(t.start), Creates: t.creates.Load(),
		Requests: t.requests.Load(), Throttled: t.throttled.Load(),
		LimiterWait: time.Duration(t.limiterWait.Load()), LongestWait: time.Duration(t.maxWait.Load()),
		CreateLatency: time.Duration(t.createLatency.Load()), CreateAnswers: t.answers.Load(), CPU: processCPU(),
		PeakRSS: procfs.PeakResident(),
	}
	t.mu.Lock()
	t.marks = append(t.marks, m)
	t.mu.Unlock()
}

// Created counts one object the API server accepted, marking the first and
// every CreateMarkEvery-th.
func (t *Timeline) Created() {
	if t == nil {
		return
	}
	switch n := t.creates.Add(1); {
	case n == 1:
		t.Mark("first create")
	case n%CreateMarkEvery == 0:
		t.Mark(fmt.Sprintf("create %d", n))
	}
}

// Marks returns the stages recorded so far, in order.
func (t *Timeline) Marks() []Mark {
	if t == nil {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]Mark(nil), t.marks...)
}

// RateLimiter wraps the client's rate limiter so the timeline sees how long
// each request waited for it; nil stays nil (no client-side limit).
func (t *Timeline) RateLimiter(l flowcontrol.RateLimiter) flowcontrol.RateLimiter {
	if t == nil || l == nil {
		return l
	}
	return &meteredLimiter{RateLimiter: l, timeline: t}
}

// meteredLimiter measures client-go's waits: the REST client calls Wait
// before every request (and before every retry of one).
type meteredLimiter struct {
	flowcontrol.RateLimiter
	timeline *Timeline
}

func (m *meteredLimiter) Wait(ctx context.Context) error {
	began := time.Now()
	err := m.RateLimiter.Wait(ctx)
	waited := int64(time.Since(began))
	t := m.timeline
	t.limiterWait.Add(waited)
	for {
		longest := t.maxWait.Load()
		if waited <= longest || t.maxWait.CompareAndSwap(longest, waited) {
			break
		}
	}
	return err
}

// Wrap returns rt reporting to the timeline: every request is counted, the
// first of each kind ("get pods/log", "update leases") is marked, and 429
// answers are counted. It fits rest.Config.Wrap; with a nil timeline it
// returns rt.
func (t *Timeline) Wrap(rt http.RoundTripper) http.RoundTripper {
	if t == nil {
		return rt
	}
	return roundTripper{timeline: t, next: rt}
}

type roundTripper struct {
	timeline *Timeline
	next     http.RoundTripper
}

func (r roundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	t := r.timeline
	t.requests.Add(1)
	// Creates are marked by Created when they are accepted.
	if kind := apistats.Key(req); req.Method != http.MethodPost || kind == "create leases" {
		t.mu.Lock()
		first := !t.seen[kind]
		t.seen[kind] = true
		t.mu.Unlock()
		if first {
			t.Mark("first " + kind)
		}
	}
	began := time.Now()
	resp, err := r.next.RoundTrip(req)
	if req.Method == http.MethodPost {
		t.createLatency.Add(int64(time.Since(began)))
		t.answers.Add(1)
	}
	if err == nil && resp.StatusCode == http.StatusTooManyRequests {
		if t.throttled.Add(1) == 1 {
			t.Mark("first 429 from the API server")
		}
	}
	return resp, err
}

// WriteTo writes the stages as a table, one line per mark, with the time
// each took since the one before.
func (t *Timeline) WriteTo(w io.Writer) (int64, error) {
	cw := &countingWriter{w: w}
	tw := tabwriter.NewWriter(cw, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "at\t+\tstage\tcreates\trequests\t429s\tlimiter wait (sum)\tlongest wait\tcreate round trip (mean since last)\tCPU\tpeak RSS\t")
	var prev Mark
	for _, m := range t.Marks() {
		latency := "-"
		if n := m.CreateAnswers - prev.CreateAnswers; n > 0 {
			latency = ms((m.CreateLatency - prev.CreateLatency) / time.Duration(n))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t\n", ms(m.At), ms(m.At-prev.At), m.Stage, m.Creates, m.Requests,
			m.Throttled, ms(m.LimiterWait), ms(m.LongestWait), latency, ms(m.CPU), mib(m.PeakRSS))
		prev = m
	}
	err := tw.Flush()
	return cw.n, err
}

// WriteFile writes the table to path, replacing it whole, so a reader never
// sees half of it; a nil timeline writes nothing.
func (t *Timeline) WriteFile(path string) error {
	if t == nil || path == "" {
		return nil
	}
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	if _, err := t.WriteTo(f); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond)) }

// mib formats bytes as mebibytes, "-" for unknown.
func mib(bytes int64) string {
	if bytes <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.1fMiB", float64(bytes)/(1<<20))
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(b []byte) (int, error) {
	n, err := c.w.Write(b)
	c.n += int64(n)
	return n, err
}
