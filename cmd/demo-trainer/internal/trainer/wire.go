package trainer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"time"
)

// maxLineBytes bounds a control message so a confused peer cannot make a
// replica allocate without limit.
const maxLineBytes = 1 << 20

// dialWithRetry dials addr until it answers or timeout passes: peers may
// start later than this replica, restart, or not be resolvable yet.
func dialWithRetry(ctx context.Context, addr string, timeout time.Duration) (net.Conn, error) {
	deadline := time.Now().Add(timeout)
	wait := 50 * time.Millisecond
	for {
		dialer := net.Dialer{Timeout: 5 * time.Second}
		conn, err := dialer.DialContext(ctx, "tcp", addr)
		if err == nil {
			return conn, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("dialing %s (gave up after %v): %w", addr, timeout, err)
		}
		sleep(ctx, wait)
		wait = min(2*wait, time.Second)
	}
}

// writeLine sends v as one JSON line.
func writeLine(w io.Writer, v any) error {
	body, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = w.Write(append(body, '\n'))
	return err
}

// readLine reads one JSON line into v. It reads byte by byte, never past
// the newline, so binary data that follows on the same connection stays
// unread for whoever handles it next.
func readLine(r io.Reader, v any) error {
	var line []byte
	b := make([]byte, 1)
	for {
		if _, err := io.ReadFull(r, b); err != nil {
			return err
		}
		if b[0] == '\n' {
			break
		}
		if len(line) >= maxLineBytes {
			return errors.New("control message too long")
		}
		line = append(line, b[0])
	}
	return json.Unmarshal(line, v)
}
