package logs

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"sync"

	corev1 "k8s.io/api/core/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
)

// FailedTailLines is how many of its last lines a failed replica whose log
// was not streamed gets on the step's stderr.
const FailedTailLines = 20

// Tail keeps the last lines written to it: the output of a replica that is
// not streamed, kept so that its end can be shown if it fails.
type Tail struct {
	mu      sync.Mutex
	max     int
	lines   [][]byte
	partial []byte
}

// NewTail keeps the last max lines.
func NewTail(max int) *Tail { return &Tail{max: max} }

// Write keeps b's complete lines, and the start of an unfinished one.
func (t *Tail) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	data := append(t.partial, b...)
	for {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			break
		}
		t.keep(data[:i])
		data = data[i+1:]
	}
	// A line longer than a prefixed line may be is kept whole up to that size.
	if len(data) > MaxLineBytes {
		t.keep(data[:MaxLineBytes])
		data = data[MaxLineBytes:]
	}
	t.partial = append([]byte(nil), data...)
	return len(b), nil
}

func (t *Tail) keep(line []byte) {
	t.lines = append(t.lines, append([]byte(nil), line...))
	if len(t.lines) > t.max {
		t.lines = t.lines[len(t.lines)-t.max:]
	}
}

// Close keeps an unfinished last line.
func (t *Tail) Close() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.partial) > 0 {
		t.keep(t.partial)
		t.partial = nil
	}
	return nil
}

// WriteTo prints the kept lines to w, one per line.
func (t *Tail) WriteTo(w io.Writer) (int64, error) {
	t.mu.Lock()
	lines := t.lines
	if len(t.partial) > 0 {
		lines = append(append([][]byte(nil), lines...), t.partial)
		if len(lines) > t.max {
			lines = lines[1:]
		}
	}
	t.mu.Unlock()
	var n int64
	for _, line := range lines {
		m, err := w.Write(append(append([]byte(nil), line...), '\n'))
		n += int64(m)
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// PrintPodTail writes the last lines of a pod container's log, as the
// kubelet keeps it, to out with prefix: previous selects the instance that
// ended before an in-place restart.
func PrintPodTail(ctx context.Context, client corev1client.PodsGetter, namespace, pod, container string, previous bool, lines int64, out *Prefixer, prefix string) error {
	data, err := client.Pods(namespace).GetLogs(pod, &corev1.PodLogOptions{
		Container: container, TailLines: &lines, Previous: previous,
	}).DoRaw(ctx)
	if err != nil {
		return fmt.Errorf("reading the log of %s: %w", pod, err)
	}
	w := out.Writer(prefix)
	if _, err := w.Write(data); err != nil {
		return err
	}
	return w.Close()
}
