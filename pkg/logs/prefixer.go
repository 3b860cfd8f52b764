package logs

import (
	"bytes"
	"errors"
	"io"
	"sync"
	"unicode/utf8"
)

// MaxLineBytes is the longest line content written as one output line.
// Longer lines are split into several prefixed lines, never dropped, so one
// runaway line cannot hold unbounded memory or block the other replicas.
const MaxLineBytes = 64 << 10

// errWriterClosed is returned by writes to a replica writer after Close.
var errWriterClosed = errors.New("writing replica log: writer is closed")

// Prefixer writes whole lines from many sources to one writer. Each source
// gets its own Writer; every line it writes comes out as "[prefix] line\n"
// in a single write to the underlying writer, so lines of different
// replicas never mix within a line. Control characters of a line are
// escaped (see appendEscaped): the lines come from replicas, which the step
// does not trust. It is safe for concurrent use.
type Prefixer struct {
	mu  sync.Mutex
	out io.Writer
}

// NewPrefixer returns a Prefixer that writes to w.
func NewPrefixer(w io.Writer) *Prefixer {
	return &Prefixer{out: w}
}

// Writer returns a writer whose lines are prefixed with "[prefix] " (an
// empty prefix adds nothing). Bytes after the last newline are held until
// the line completes, grows past MaxLineBytes or the writer is closed:
// Close flushes them as a final line. Writes after Close fail.
func (p *Prefixer) Writer(prefix string) io.WriteCloser {
	w := &lineWriter{prefixer: p}
	if prefix != "" {
		w.prefix = []byte("[" + prefix + "] ")
	}
	return w
}

// emit writes a batch of complete, prefixed lines in one call.
func (p *Prefixer) emit(batch []byte) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, err := p.out.Write(batch)
	return err
}

// lineWriter is one source's writer. Its own mutex lets a source share it
// between goroutines (a process's stdout and stderr, say).
type lineWriter struct {
	prefixer *Prefixer
	prefix   []byte

	mu      sync.Mutex
	partial []byte // content after the last newline, at most MaxLineBytes
	closed  bool
}

func (w *lineWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return 0, errWriterClosed
	}
	written := len(b)
	var batch []byte
	for len(b) > 0 {
		end := bytes.IndexByte(b, '\n')
		if end < 0 {
			w.partial = append(w.partial, b...)
			batch = w.appendOverlong(batch)
			break
		}
		w.partial = append(w.partial, b[:end]...)
		batch = w.appendLine(batch, w.partial)
		w.partial = w.partial[:0]
		b = b[end+1:]
	}
	if len(batch) == 0 {
		return written, nil
	}
	if err := w.prefixer.emit(batch); err != nil {
		return 0, err
	}
	return written, nil
}

// Close flushes a partial last line and makes later writes fail. Closing
// twice is harmless.
func (w *lineWriter) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil
	}
	w.closed = true
	if len(w.partial) == 0 {
		return nil
	}
	batch := w.appendLine(nil, w.partial)
	w.partial = nil
	return w.prefixer.emit(batch)
}

// appendOverlong moves whole MaxLineBytes chunks out of a partial line that
// has grown too long, keeping the rest for the next write.
func (w *lineWriter) appendOverlong(batch []byte) []byte {
	for len(w.partial) > MaxLineBytes {
		cut := runeBoundary(w.partial, MaxLineBytes)
		batch = w.appendChunk(batch, w.partial[:cut])
		w.partial = w.partial[:copy(w.partial, w.partial[cut:])]
	}
	return batch
}

// appendLine appends one complete line, split into chunks of at most
// MaxLineBytes. An empty line stays an (empty) prefixed line.
func (w *lineWriter) appendLine(batch, line []byte) []byte {
	for len(line) > MaxLineBytes {
		cut := runeBoundary(line, MaxLineBytes)
		batch = w.appendChunk(batch, line[:cut])
		line = line[cut:]
	}
	return w.appendChunk(batch, line)
}

func (w *lineWriter) appendChunk(batch, chunk []byte) []byte {
	batch = append(batch, w.prefix...)
	batch = appendEscaped(batch, chunk)
	return append(batch, '\n')
}

// runeBoundary returns the largest cut <= limit that does not split a UTF-8
// sequence, so split lines stay valid text. Input that is not UTF-8 near the
// limit is cut at the limit.
func runeBoundary(b []byte, limit int) int {
	for cut := limit; cut > limit-utf8.UTFMax && cut > 0; cut-- {
		if utf8.RuneStart(b[cut]) {
			return cut
		}
	}
	return limit
}
