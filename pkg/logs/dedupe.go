package logs

import (
	"bytes"
	"sync"
	"time"
)

// highWater remembers the newest log timestamp printed for one replica's
// container, across its container restarts and pod recreations, so a stream
// that is opened again never prints a line twice. It is needed because a
// stream resumed after an error overlaps (sinceTime has one-second
// precision) and because some log servers (KWOK serving a fixed file, for
// one) answer every request with the whole file.
//
// Lines are compared by timestamp; count tells how many lines with exactly
// the newest timestamp were printed, so distinct lines sharing a timestamp
// are kept and only their repetition is dropped. Dropping by timestamp
// assumes a replacement pod's node clock is not behind the old node's by
// more than the time it takes to replace the pod.
//
// A highWater is shared by the streams of one replica and safe for
// concurrent use.
type highWater struct {
	mu     sync.Mutex
	newest time.Time
	count  int
}

// since is the time a resumed stream can start from: the newest printed
// timestamp, or zero when nothing timestamped was printed yet.
func (h *highWater) since() time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.newest
}

// streamPosition is one stream's view of the lines it has read that carry
// the high-water timestamp.
type streamPosition struct {
	at   time.Time
	seen int
}

// admit reports whether a line stamped at ts is new and, if so, records it.
// Lines without a timestamp (zero ts) cannot be compared and are always new.
func (h *highWater) admit(ts time.Time, pos *streamPosition) bool {
	if ts.IsZero() {
		return true
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if !pos.at.Equal(ts) {
		pos.at, pos.seen = ts, 0
	}
	pos.seen++
	switch {
	case ts.After(h.newest):
		h.newest, h.count = ts, 1
		return true
	case ts.Before(h.newest):
		return false
	case pos.seen <= h.count:
		return false
	default:
		h.count++
		return true
	}
}

// splitTimestamp separates the RFC 3339 timestamp the API server puts in
// front of each line when asked for timestamps. A line that does not start
// with one is returned whole with a zero time.
func splitTimestamp(line []byte) (time.Time, []byte) {
	space := bytes.IndexByte(line, ' ')
	if space <= 0 {
		return time.Time{}, line
	}
	ts, err := time.Parse(time.RFC3339Nano, string(line[:space]))
	if err != nil {
		return time.Time{}, line
	}
	return ts, line[space+1:]
}
