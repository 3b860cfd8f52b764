package logs

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"math/rand"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
)

func TestPrefixerLines(t *testing.T) {
	long := strings.Repeat("a", MaxLineBytes)
	cases := []struct {
		name           string
		prefix         string
		writes         []string
		wantBeforeDone string // output after the writes, before Close
		want           string // output after Close
	}{
		{
			name:           "whole lines",
			prefix:         "worker-1",
			writes:         []string{"step 1\nstep 2\n"},
			wantBeforeDone: "[worker-1] step 1\n[worker-1] step 2\n",
			want:           "[worker-1] step 1\n[worker-1] step 2\n",
		},
		{
			name:           "line split across writes is held until complete",
			prefix:         "chief-0",
			writes:         []string{"lo", "ss=0.", "31\nacc"},
			wantBeforeDone: "[chief-0] loss=0.31\n",
			want:           "[chief-0] loss=0.31\n[chief-0] acc\n",
		},
		{
			name:           "partial last line is flushed on close",
			prefix:         "ps-0",
			writes:         []string{"no newline"},
			wantBeforeDone: "",
			want:           "[ps-0] no newline\n",
		},
		{
			name:           "empty lines are kept",
			prefix:         "worker-0",
			writes:         []string{"a\n\nb\n"},
			wantBeforeDone: "[worker-0] a\n[worker-0] \n[worker-0] b\n",
			want:           "[worker-0] a\n[worker-0] \n[worker-0] b\n",
		},
		{
			name:           "empty prefix adds nothing",
			writes:         []string{"plain\n"},
			wantBeforeDone: "plain\n",
			want:           "plain\n",
		},
		{
			name:           "line of exactly the maximum stays one line",
			prefix:         "w",
			writes:         []string{long, "\n"},
			wantBeforeDone: "[w] " + long + "\n",
			want:           "[w] " + long + "\n",
		},
		{
			name:           "overlong line is split, not dropped",
			prefix:         "w",
			writes:         []string{long + long + "tail\n"},
			wantBeforeDone: "[w] " + long + "\n[w] " + long + "\n[w] tail\n",
			want:           "[w] " + long + "\n[w] " + long + "\n[w] tail\n",
		},
		{
			name:           "overlong partial line is split before its newline arrives",
			prefix:         "w",
			writes:         []string{long, "bc", "d"},
			wantBeforeDone: "[w] " + long + "\n",
			want:           "[w] " + long + "\n[w] bcd\n",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			w := NewPrefixer(&out).Writer(tc.prefix)
			for _, s := range tc.writes {
				n, err := w.Write([]byte(s))
				if err != nil || n != len(s) {
					t.Fatalf("Write(%d bytes) = %d, %v", len(s), n, err)
				}
			}
			if diff := cmp.Diff(tc.wantBeforeDone, out.String()); diff != "" {
				t.Errorf("output before Close (-want +got):\n%s", diff)
			}
			if err := w.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			if diff := cmp.Diff(tc.want, out.String()); diff != "" {
				t.Errorf("output after Close (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPrefixerSplitKeepsMultibyteCharactersWhole(t *testing.T) {
	// One byte short of the limit, then a three-byte character: cutting at
	// the limit would split it.
	line := strings.Repeat("a", MaxLineBytes-1) + "€€"
	var out bytes.Buffer
	w := NewPrefixer(&out).Writer("w")
	if _, err := w.Write([]byte(line + "\n")); err != nil {
		t.Fatal(err)
	}
	var joined strings.Builder
	for _, l := range strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n") {
		content := strings.TrimPrefix(l, "[w] ")
		if !utf8.ValidString(content) {
			t.Errorf("split line is not valid UTF-8: ends with %q", content[len(content)-3:])
		}
		if len(content) > MaxLineBytes {
			t.Errorf("split line has %d bytes, want at most %d", len(content), MaxLineBytes)
		}
		joined.WriteString(content)
	}
	if joined.String() != line {
		t.Error("split lines joined do not give back the original line")
	}
}

func TestPrefixerWriterAfterClose(t *testing.T) {
	var out bytes.Buffer
	w := NewPrefixer(&out).Writer("w")
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := w.Write([]byte("late\n")); err == nil {
		t.Error("Write after Close succeeded, want an error")
	}
	if out.Len() != 0 {
		t.Errorf("output = %q, want nothing", out.String())
	}
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("stderr closed") }

func TestPrefixerReportsUnderlyingWriteErrors(t *testing.T) {
	w := NewPrefixer(failingWriter{}).Writer("w")
	if _, err := w.Write([]byte("line\n")); err == nil {
		t.Error("Write to a failing writer succeeded, want the error")
	}
}

// TestPrefixerConcurrentWritersNeverInterleave has many replicas write
// lines in random fragments at once; every output line must be one whole
// line of one replica, and each replica's lines must arrive complete and in
// order.
func TestPrefixerConcurrentWritersNeverInterleave(t *testing.T) {
	const writers, linesEach = 16, 300
	var out exclusiveWriter
	p := NewPrefixer(&out)
	var wg sync.WaitGroup
	for id := 0; id < writers; id++ {
		wg.Add(1)
		go func(id int) {
			defer wg.Done()
			rng := rand.New(rand.NewSource(int64(id)))
			w := p.Writer(ReplicaPrefix("worker", id))
			var text strings.Builder
			for n := 0; n < linesEach; n++ {
				fmt.Fprintf(&text, "worker %d line %d %s\n", id, n, strings.Repeat("x", rng.Intn(200)))
			}
			rest := text.String()
			for len(rest) > 0 {
				size := 1 + rng.Intn(64)
				if size > len(rest) {
					size = len(rest)
				}
				if _, err := w.Write([]byte(rest[:size])); err != nil {
					t.Errorf("worker %d: Write: %v", id, err)
					return
				}
				rest = rest[size:]
			}
			if err := w.Close(); err != nil {
				t.Errorf("worker %d: Close: %v", id, err)
			}
		}(id)
	}
	wg.Wait()
	if n := out.overlaps.Load(); n > 0 {
		t.Errorf("%d writes to the underlying writer overlapped, want none", n)
	}

	lineFormat := regexp.MustCompile(`^\[worker-(\d+)\] worker (\d+) line (\d+) x*$`)
	next := make([]int, writers)
	scanner := bufio.NewScanner(strings.NewReader(out.String()))
	for scanner.Scan() {
		m := lineFormat.FindStringSubmatch(scanner.Text())
		if m == nil || m[1] != m[2] {
			t.Fatalf("interleaved or malformed line: %q", scanner.Text())
		}
		id, _ := strconv.Atoi(m[1])
		n, _ := strconv.Atoi(m[3])
		if n != next[id] {
			t.Fatalf("worker %d: got line %d, want line %d", id, n, next[id])
		}
		next[id]++
	}
	for id, n := range next {
		if n != linesEach {
			t.Errorf("worker %d: %d lines written out, want %d", id, n, linesEach)
		}
	}
}

// exclusiveWriter is an unsynchronized buffer that counts writes entered
// while another is still in progress.
type exclusiveWriter struct {
	writing  atomic.Bool
	overlaps atomic.Int64
	buf      bytes.Buffer
}

func (w *exclusiveWriter) Write(p []byte) (int, error) {
	if !w.writing.CompareAndSwap(false, true) {
		w.overlaps.Add(1)
		return len(p), nil
	}
	defer w.writing.Store(false)
	runtime.Gosched() // widen the window for overlapping writers
	return w.buf.Write(p)
}

func (w *exclusiveWriter) String() string { return w.buf.String() }

// A replica's bytes cannot act on the terminal of whoever reads the step's
// log: the forged line below would, unescaped, erase the replica's prefix
// and print what looks like trainstep's own JSON line.
func TestPrefixerEscapesControlCharacters(t *testing.T) {
	cases := []struct {
		name, in, want string
	}{
		{"erase and forge", "\r\x1b[2K{\"level\":\"info\",\"msg\":\"job succeeded\"}\n", `[worker-0] \r\x1b[2K{"level":"info","msg":"job succeeded"}` + "\n"},
		{"clipboard write (OSC 52)", "\x1b]52;c;Y3VybCBldmlsIHwgc2g=\x07\n", `[worker-0] \x1b]52;c;Y3VybCBldmlsIHwgc2g=\x07` + "\n"},
		{"C1 CSI and DEL", "a\u009b31mb\x7f\n", `[worker-0] a\x9b31mb\x7f` + "\n"},
		{"bytes that are not UTF-8", "ok \xff\xfe end\n", `[worker-0] ok \xff\xfe end` + "\n"},
		{"bidirectional override", "loss=\u202e13.0\n", `[worker-0] loss=\u202e13.0` + "\n"},
		{"CRLF line end", "step 1\r\n", "[worker-0] step 1\n"},
		{"tabs, UTF-8 and backslashes kept", "épreuve\t✓ C:\\data\n", "[worker-0] épreuve\t✓ C:\\data\n"},
		{"backspace and bell", "a\bb\a\n", `[worker-0] a\x08b\x07` + "\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			w := NewPrefixer(&out).Writer("worker-0")
			if _, err := w.Write([]byte(tc.in)); err != nil {
				t.Fatal(err)
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, out.String()); diff != "" {
				t.Errorf("step log (-want +got):\n%s", diff)
			}
		})
	}
}
