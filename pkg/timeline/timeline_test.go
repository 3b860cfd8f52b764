package timeline

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/util/flowcontrol"
)

func TestNilTimelineRecordsNothing(t *testing.T) {
	var tl *Timeline
	tl.Mark("config")
	tl.Created()
	if got := tl.Marks(); got != nil {
		t.Errorf("Marks() = %v, want nil", got)
	}
	limiter := flowcontrol.NewFakeAlwaysRateLimiter()
	if got := tl.RateLimiter(limiter); got != limiter {
		t.Error("a nil timeline wrapped the rate limiter")
	}
	rt := http.DefaultTransport
	if got := tl.Wrap(rt); got != rt {
		t.Error("a nil timeline wrapped the transport")
	}
	if err := tl.WriteFile(filepath.Join(t.TempDir(), "timeline")); err != nil {
		t.Error(err)
	}
}

func TestCreatedMarksFirstAndEveryBatch(t *testing.T) {
	tl := New(time.Now())
	for range 2*CreateMarkEvery + 1 {
		tl.Created()
	}
	var stages []string
	for _, m := range tl.Marks() {
		stages = append(stages, m.Stage)
	}
	want := []string{"first create", "create 64", "create 128"}
	if strings.Join(stages, ",") != strings.Join(want, ",") {
		t.Errorf("stages = %v, want %v", stages, want)
	}
	if last := tl.Marks()[2]; last.Creates != 128 {
		t.Errorf("creates at %q = %d, want 128", last.Stage, last.Creates)
	}
}

// slowLimiter makes every request wait as long as its wait says.
type slowLimiter struct {
	flowcontrol.RateLimiter
	wait time.Duration
}

func (s slowLimiter) Wait(context.Context) error {
	time.Sleep(s.wait)
	return nil
}

func TestRateLimiterWaitsAreSummed(t *testing.T) {
	tl := New(time.Now())
	limiter := tl.RateLimiter(slowLimiter{RateLimiter: flowcontrol.NewFakeAlwaysRateLimiter(), wait: 20 * time.Millisecond})
	for range 3 {
		if err := limiter.Wait(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	tl.Mark("after three requests")
	m := tl.Marks()[0]
	if m.LimiterWait < 60*time.Millisecond {
		t.Errorf("limiter wait = %s, want at least 60ms over three waits of 20ms", m.LimiterWait)
	}
	if m.LongestWait < 20*time.Millisecond || m.LongestWait > m.LimiterWait {
		t.Errorf("longest wait = %s, want at least 20ms and at most the sum %s", m.LongestWait, m.LimiterWait)
	}
}

func TestTransportMarksFirstRequestOfEachKindAndCounts429(t *testing.T) {
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			w.WriteHeader(http.StatusTooManyRequests)
		}
	}))
	defer server.Close()
	tl := New(time.Now())
	client := &http.Client{Transport: tl.Wrap(http.DefaultTransport)}
	for _, req := range []struct{ method, path string }{
		{http.MethodGet, "/api/v1/namespaces/ns/pods"},
		{http.MethodGet, "/api/v1/namespaces/ns/pods"},
		{http.MethodPost, "/api/v1/namespaces/ns/pods"},
		{http.MethodGet, "/api/v1/namespaces/ns/pods/p/log"},
	} {
		r, err := http.NewRequest(req.method, server.URL+req.path, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := client.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	tl.Mark("done")
	var stages []string
	for _, m := range tl.Marks() {
		stages = append(stages, m.Stage)
	}
	want := []string{"first list pods", "first 429 from the API server", "first get pods/log", "done"}
	if strings.Join(stages, ",") != strings.Join(want, ",") {
		t.Errorf("stages = %v, want %v", stages, want)
	}
	last := tl.Marks()[len(stages)-1]
	if last.Requests != 4 || last.Throttled != 1 || last.CreateAnswers != 1 {
		t.Errorf("requests %d, 429s %d, create answers %d; want 4, 1, 1", last.Requests, last.Throttled, last.CreateAnswers)
	}
}

func TestWriteFileTabulatesTheStages(t *testing.T) {
	start := time.Now()
	tl := New(start)
	now := start
	tl.now = func() time.Time { return now }
	now = start.Add(20 * time.Millisecond)
	tl.Mark("config")
	now = start.Add(150 * time.Millisecond)
	tl.Mark("lease acquired")
	path := filepath.Join(t.TempDir(), "timeline.txt")
	if err := tl.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(lines) != 3 {
		t.Fatalf("got %d lines, want a header and two stages:\n%s", len(lines), data)
	}
	if !strings.Contains(lines[2], "150.0ms") || !strings.Contains(lines[2], "130.0ms") || !strings.Contains(lines[2], "lease acquired") {
		t.Errorf("the lease's line %q should say it came at 150ms, 130ms after the one before", lines[2])
	}
	// The last column is the process's peak resident memory, where /proc says it.
	fields := strings.Fields(lines[2])
	if _, err := os.Stat("/proc/self/status"); err == nil && !strings.HasSuffix(fields[len(fields)-1], "MiB") {
		t.Errorf("the lease's line %q should end with the peak RSS in MiB", lines[2])
	}
	var buf bytes.Buffer
	if _, err := tl.WriteTo(&buf); err != nil || buf.String() != string(data) {
		t.Errorf("WriteTo wrote %q (%v), WriteFile %q", buf.String(), err, data)
	}
}

func TestProcessStartIsBeforeNow(t *testing.T) {
	now := time.Now()
	started := ProcessStart(now)
	if started.After(now) {
		t.Errorf("process start %s is after now %s", started, now)
	}
	// A test binary has run for seconds at most, not hours.
	if now.Sub(started) > time.Hour {
		t.Errorf("process start %s is %s before now", started, now.Sub(started))
	}
}
