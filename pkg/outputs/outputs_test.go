package outputs

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/trainstep/trainstep/pkg/result"
)

func int32Ptr(v int32) *int32 { return &v }

func TestWriteProducesEveryFileWithExactContent(t *testing.T) {
	cases := []struct {
		name   string
		result result.Result
		want   map[string]string
	}{
		{
			name:   "minimal result still writes every file",
			result: result.Result{Phase: result.PhaseInvalid, Reason: result.ReasonInvalidSpec},
			want: map[string]string{
				"phase":               "Invalid",
				"reason":              "InvalidSpec",
				"job-name":            "",
				"duration-seconds":    "0.0",
				"restarts":            "0",
				"replicas.json":       "[]",
				"metrics.json":        "{}",
				"termination-message": "",
				"trainer-status.json": "{}",
				"resumes.json":        "[]",
			},
		},
		{
			name: "full result, replicas sorted by type and index",
			result: result.Result{
				Phase:           result.PhaseSucceeded,
				Reason:          result.ReasonSucceeded,
				Message:         "worker 0 succeeded",
				JobName:         "mnist-ts-0a1b2c3d4e",
				Namespace:       "team-a",
				DurationSeconds: 12.34,
				Restarts:        2,
				Replicas: []result.ReplicaStatus{
					{Type: "Worker", Index: 1, Phase: "Succeeded", ExitCode: int32Ptr(0), Restarts: 2, Node: "node-b"},
					{Type: "PS", Index: 0, Phase: "Running"},
					{Type: "Worker", Index: 0, Phase: "Succeeded", ExitCode: int32Ptr(0), Node: "node-a"},
				},
				Metrics:            map[string]any{"accuracy": json.Number("0.981"), "note": "a<b"},
				TerminationMessage: `{"accuracy": 0.981, "note": "a<b"}`,
			},
			want: map[string]string{
				"phase":            "Succeeded",
				"reason":           "Succeeded",
				"job-name":         "mnist-ts-0a1b2c3d4e",
				"duration-seconds": "12.3",
				"restarts":         "2",
				"replicas.json": `[{"type":"PS","index":0,"phase":"Running","restarts":0},` +
					`{"type":"Worker","index":0,"phase":"Succeeded","exitCode":0,"restarts":0,"node":"node-a"},` +
					`{"type":"Worker","index":1,"phase":"Succeeded","exitCode":0,"restarts":2,"node":"node-b"}]`,
				"metrics.json":        `{"accuracy":0.981,"note":"a<b"}`,
				"termination-message": `{"accuracy": 0.981, "note": "a<b"}`,
				"trainer-status.json": "{}",
				"resumes.json":        "[]",
			},
		},
		{
			name: "reported status: its metrics merged, the termination message's winning",
			result: result.Result{
				Phase: result.PhaseSucceeded, Reason: result.ReasonSucceeded,
				Metrics:            map[string]any{"accuracy": json.Number("0.981")},
				TerminationMessage: `{"accuracy": 0.981}`,
				TrainerStatus:      json.RawMessage(`{"progressPercentage":100,"metrics":[{"name":"accuracy","value":"0.97"},{"name":"loss","value":"0.12"}],"lastUpdatedTime":"2025-01-23T10:30:45Z"}`),
				TrainerMetrics:     map[string]any{"accuracy": json.Number("0.97"), "loss": json.Number("0.12")},
			},
			want: map[string]string{
				"phase":               "Succeeded",
				"reason":              "Succeeded",
				"job-name":            "",
				"duration-seconds":    "0.0",
				"restarts":            "0",
				"replicas.json":       "[]",
				"metrics.json":        `{"accuracy":0.981,"loss":0.12}`,
				"termination-message": `{"accuracy": 0.981}`,
				"trainer-status.json": `{"progressPercentage":100,"metrics":[{"name":"accuracy","value":"0.97"},{"name":"loss","value":"0.12"}],"lastUpdatedTime":"2025-01-23T10:30:45Z"}`,
				"resumes.json":        "[]",
			},
		},
		{
			name:   "duration that is not a number is written as zero",
			result: result.Result{Phase: result.PhaseTerminated, Reason: result.ReasonTerminated, DurationSeconds: result.Seconds(math.NaN())},
			want: map[string]string{
				"phase":               "Terminated",
				"reason":              "Terminated",
				"job-name":            "",
				"duration-seconds":    "0.0",
				"restarts":            "0",
				"replicas.json":       "[]",
				"metrics.json":        "{}",
				"termination-message": "",
				"trainer-status.json": "{}",
				"resumes.json":        "[]",
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "not", "yet", "there")
			if err := Write(dir, tc.result); err != nil {
				t.Fatalf("Write: %v", err)
			}
			if diff := cmp.Diff(tc.want, readDir(t, dir)); diff != "" {
				t.Errorf("output files (-want +got):\n%s", diff)
			}
		})
	}
}

func TestWriteReplacesEarlierOutputs(t *testing.T) {
	dir := t.TempDir()
	first := result.Result{Phase: result.PhaseFailed, Reason: result.ReasonReplicaFailed, Restarts: 7,
		Metrics: map[string]any{"loss": 1.5}}
	if err := Write(dir, first); err != nil {
		t.Fatalf("first Write: %v", err)
	}
	if err := Write(dir, result.Result{Phase: result.PhaseTerminated, Reason: result.ReasonTerminated}); err != nil {
		t.Fatalf("second Write: %v", err)
	}
	got := readDir(t, dir)
	if got["phase"] != "Terminated" || got["restarts"] != "0" || got["metrics.json"] != "{}" {
		t.Errorf("second Write did not replace the first: %v", got)
	}
}

func TestWriteFailsWhenDirectoryCannotBeCreated(t *testing.T) {
	file := filepath.Join(t.TempDir(), "a-file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Write(filepath.Join(file, "outputs"), result.Result{}); err == nil {
		t.Error("Write under a regular file succeeded, want an error")
	}
}

func TestWriteIsAtomicForConcurrentReaders(t *testing.T) {
	dir := t.TempDir()
	long := strings.Repeat("x", 1<<16)
	results := []result.Result{
		{Phase: result.PhaseSucceeded, Reason: "short"},
		{Phase: result.PhaseFailed, Reason: long},
	}
	if err := Write(dir, results[0]); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; i < 100; i++ {
			if err := Write(dir, results[i%2]); err != nil {
				t.Errorf("Write: %v", err)
				return
			}
		}
		close(stop)
	}()
	for done := false; !done; {
		select {
		case <-stop:
			done = true
		default:
		}
		b, err := os.ReadFile(filepath.Join(dir, "reason"))
		if err != nil {
			t.Fatalf("reading reason while writing: %v", err)
		}
		if got := string(b); got != "short" && got != long {
			t.Fatalf("reader saw a partial file of %d bytes", len(got))
		}
	}
	wg.Wait()
}

func TestPrintResultIsOneLineOfTheSameResult(t *testing.T) {
	r := result.Result{
		Phase:           result.PhaseFailed,
		Reason:          result.ReasonBackoffLimitExceeded,
		Message:         "worker 1 exited 137\nthree times",
		JobName:         "job",
		DurationSeconds: 3.04,
		Restarts:        3,
		Replicas:        []result.ReplicaStatus{{Type: "Worker", Index: 1, Phase: "Failed", ExitCode: int32Ptr(137), Restarts: 3}},
		Metrics:         ParseMetrics(`{"step": 12345678901234567890}`),
	}
	var out bytes.Buffer
	if err := PrintResult(&out, r); err != nil {
		t.Fatalf("PrintResult: %v", err)
	}
	text := out.String()
	if strings.Count(text, "\n") != 1 || !strings.HasSuffix(text, "\n") {
		t.Fatalf("PrintResult wrote %q, want exactly one line ending in a newline", text)
	}
	want := `{"phase":"Failed","reason":"BackoffLimitExceeded","message":"worker 1 exited 137\nthree times",` +
		`"jobName":"job","durationSeconds":3.0,"restarts":3,` +
		`"replicas":[{"type":"Worker","index":1,"phase":"Failed","exitCode":137,"restarts":3}],` +
		`"metrics":{"step":12345678901234567890},"resumes":[]}` + "\n"
	if diff := cmp.Diff(want, text); diff != "" {
		t.Errorf("printed result (-want +got):\n%s", diff)
	}
	var decoded map[string]any
	if err := json.Unmarshal(out.Bytes(), &decoded); err != nil {
		t.Errorf("printed line is not valid JSON: %v", err)
	}
}

// The result line and the duration-seconds file read the same, whole
// seconds included (JSON would print 12.0 as 12).
func TestDurationIsTheSameOnStdoutAndInTheFile(t *testing.T) {
	for _, seconds := range []float64{12, 12.04, 0.96, 3599.95} {
		dir := t.TempDir()
		r := result.Result{Phase: result.PhaseSucceeded, DurationSeconds: result.Seconds(seconds)}
		if err := Write(dir, r); err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		if err := PrintResult(&out, r); err != nil {
			t.Fatal(err)
		}
		var printed struct {
			DurationSeconds json.RawMessage `json:"durationSeconds"`
		}
		if err := json.Unmarshal(out.Bytes(), &printed); err != nil {
			t.Fatal(err)
		}
		if file := readDir(t, dir)["duration-seconds"]; string(printed.DurationSeconds) != file {
			t.Errorf("%g s: stdout durationSeconds %s, file %q", seconds, printed.DurationSeconds, file)
		}
	}
}

func TestCheckDir(t *testing.T) {
	file := filepath.Join(t.TempDir(), "a-file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := CheckDir(filepath.Join(file, "outputs")); err == nil {
		t.Error("CheckDir under a regular file succeeded, want an error")
	}
	dir := filepath.Join(t.TempDir(), "new", "outputs")
	if err := CheckDir(dir); err != nil {
		t.Fatalf("CheckDir of a new directory: %v", err)
	}
	if left := readDir(t, dir); len(left) != 0 {
		t.Errorf("CheckDir left files behind: %v", left)
	}
}

func TestMetricsSaysWhyAMessageGivesNone(t *testing.T) {
	for msg, wantErr := range map[string]bool{"": false, "  \n": false, `{"a": 1}`: false, "accuracy=0.9": true, `[1]`: true, `{"a": 1} {"b": 2}`: true} {
		if _, err := Metrics(msg); (err != nil) != wantErr {
			t.Errorf("Metrics(%q) error = %v, want error %v", msg, err, wantErr)
		}
	}
}

func TestPrintResultOfEmptyResultHasEmptyCollections(t *testing.T) {
	var out bytes.Buffer
	if err := PrintResult(&out, result.Result{Phase: result.PhaseInvalid}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), `"replicas":[]`) || !strings.Contains(out.String(), `"metrics":{}`) {
		t.Errorf("empty result printed as %q, want replicas [] and metrics {}", out.String())
	}
}

func TestWriteProgress(t *testing.T) {
	cases := []struct {
		name        string
		done, total int
		want        string
		wantErr     bool
	}{
		{name: "none running", done: 0, total: 4, want: "0/4"},
		{name: "some running", done: 3, total: 4, want: "3/4"},
		{name: "all running", done: 16, total: 16, want: "16/16"},
		{name: "more than total", done: 5, total: 4, wantErr: true},
		{name: "no replicas", done: 0, total: 0, wantErr: true},
		{name: "negative", done: -1, total: 4, wantErr: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "progress")
			err := WriteProgress(path, tc.done, tc.total)
			if tc.wantErr {
				if err == nil {
					t.Fatalf("WriteProgress(%d, %d) succeeded, want an error", tc.done, tc.total)
				}
				return
			}
			if err != nil {
				t.Fatalf("WriteProgress: %v", err)
			}
			if diff := cmp.Diff(map[string]string{"progress": tc.want}, readDir(t, dir)); diff != "" {
				t.Errorf("progress directory (-want +got):\n%s", diff)
			}
		})
	}
}

func TestWriteProgressWithoutPathIsANoOp(t *testing.T) {
	if err := WriteProgress("", 1, 2); err != nil {
		t.Errorf("WriteProgress with no path: %v", err)
	}
}

func TestParseMetrics(t *testing.T) {
	cases := []struct {
		name    string
		message string
		want    map[string]any
	}{
		{name: "object", message: `{"accuracy": 0.98, "epochs": 10}`,
			want: map[string]any{"accuracy": json.Number("0.98"), "epochs": json.Number("10")}},
		{name: "object with surrounding whitespace", message: "\n  {\"loss\": 0.1}\n",
			want: map[string]any{"loss": json.Number("0.1")}},
		{name: "nested values", message: `{"per_class": [0.9, 0.8], "best": {"epoch": 3}, "ok": true}`,
			want: map[string]any{
				"per_class": []any{json.Number("0.9"), json.Number("0.8")},
				"best":      map[string]any{"epoch": json.Number("3")},
				"ok":        true,
			}},
		{name: "empty object", message: `{}`, want: map[string]any{}},
		{name: "empty message", message: "", want: map[string]any{}},
		{name: "plain text", message: "training finished", want: map[string]any{}},
		{name: "array", message: `[1, 2]`, want: map[string]any{}},
		{name: "null", message: `null`, want: map[string]any{}},
		{name: "number", message: `42`, want: map[string]any{}},
		{name: "truncated object", message: `{"accuracy": 0.9`, want: map[string]any{}},
		{name: "two objects", message: `{"a": 1} {"b": 2}`, want: map[string]any{}},
		{name: "object followed by text", message: `{"a": 1} done`, want: map[string]any{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := ParseMetrics(tc.message)
			if got == nil {
				t.Fatal("ParseMetrics returned nil, want a map")
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ParseMetrics(%q) (-want +got):\n%s", tc.message, diff)
			}
		})
	}
}

// readDir returns every file in dir by name with its content, so a test sees
// leftovers such as temporary files as well as the expected outputs.
func readDir(t *testing.T, dir string) map[string]string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatalf("reading %s: %v", dir, err)
	}
	files := map[string]string{}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatalf("reading %s: %v", e.Name(), err)
		}
		files[e.Name()] = string(b)
	}
	return files
}

// A termination message is a replica's bytes: its output parameter, which
// Argo's UI and CLI show, carries no escape sequence (here OSC 52, which
// writes the reader's clipboard, and a bidirectional override), while its
// lines stay lines.
func TestTerminationMessageIsEscapedAsTheLogIs(t *testing.T) {
	dir := t.TempDir()
	msg := "loss diverged\n\x1b]52;c;ZXZpbA==\x07done \u202eevil"
	if err := Write(dir, result.Result{Phase: result.PhaseFailed, TerminationMessage: msg}); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(dir, FileTerminationMessage))
	if err != nil {
		t.Fatal(err)
	}
	want := `loss diverged` + "\n" + `\x1b]52;c;ZXZpbA==\x07done \u202eevil`
	if string(got) != want {
		t.Errorf("termination-message = %q, want %q", got, want)
	}
}
