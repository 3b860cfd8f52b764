// Package outputs hands a finished run's result to Argo Workflows: one file
// per output parameter under the outputs directory, the result as one JSON
// line on stdout, and the "N/M" progress file.
//
// File format, chosen so each file is usable as an Argo output parameter as
// it is: one value per file and no trailing newline. duration-seconds is a
// plain decimal number of seconds with one decimal place ("12.3"), restarts
// an integer, replicas.json a JSON array ("[]" when there are none) and
// metrics.json a JSON object ("{}" when there are none: the deciding
// replica's termination message over the last reported status's metrics),
// trainer-status.json the last reported status ("{}" when none came),
// resumes.json the job's whole-job restarts and what each cost ("[]" when
// none),
// termination-message the deciding replica's termination message with the
// bytes a terminal acts on escaped, as its log lines are ("" when there is
// none). The result line on stdout carries the same values, its
// durationSeconds with the same one decimal place. Every file is
// written through a temporary file and a rename, so a reader sees either the
// old content or the new one, never half a file.
//
// The package only formats and writes what it is given: it decides nothing
// about the run and must not read flags or the environment (callers pass
// the directory and the progress file path).
package outputs

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/trainstep/trainstep/pkg/logs"
	"github.com/trainstep/trainstep/pkg/result"
)

// Output file names under the outputs directory; each is also the name of
// the Argo output parameter that reads it.
const (
	FilePhase           = "phase"
	FileReason          = "reason"
	FileJobName         = "job-name"
	FileDurationSeconds = "duration-seconds"
	FileRestarts        = "restarts"
	FileReplicas        = "replicas.json"
	FileMetrics         = "metrics.json"
	// FileTerminationMessage keeps the termination message, escaped as the
	// log is, so a message that is not a JSON object (and gives
	// metrics.json "{}") is not lost.
	FileTerminationMessage = "termination-message"
	// FileResumes lists the job's whole-job restarts during the step, with
	// what each cost when the replicas report progress ("[]" when none).
	FileResumes = "resumes.json"
	// FileTrainerStatus keeps the last status the replicas reported
	// (Kubeflow Trainer's trainerStatus object), "{}" when none came.
	FileTrainerStatus = "trainer-status.json"
)

// CheckDir makes sure dir exists and a file can be written in it, so a
// run can refuse to start when its outputs would be lost.
func CheckDir(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("creating the outputs directory: %w", err)
	}
	probe, err := os.CreateTemp(dir, ".trainstep-write-check.*")
	if err != nil {
		return fmt.Errorf("writing in the outputs directory: %w", err)
	}
	_ = probe.Close()
	return os.Remove(probe.Name())
}

// Write writes every output file for r under dir, creating dir if needed.
// All files are always written, even when some of them fail; the errors
// are joined.
func Write(dir string, r result.Result) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("creating outputs directory: %w", err)
	}
	r = normalize(r)
	replicas, err := marshalCompact(r.Replicas)
	if err != nil {
		return fmt.Errorf("encoding replicas: %w", err)
	}
	metrics, err := marshalCompact(r.Metrics)
	if err != nil {
		return fmt.Errorf("encoding metrics: %w", err)
	}
	resumes, err := marshalCompact(r.Resumes)
	if err != nil {
		return fmt.Errorf("encoding resumes: %w", err)
	}
	files := []struct {
		name    string
		content []byte
	}{
		{FilePhase, []byte(r.Phase)},
		{FileReason, []byte(r.Reason)},
		{FileJobName, []byte(r.JobName)},
		{FileDurationSeconds, []byte(r.DurationSeconds.String())},
		{FileRestarts, []byte(strconv.FormatInt(int64(r.Restarts), 10))},
		{FileReplicas, replicas},
		{FileMetrics, metrics},
		{FileTerminationMessage, []byte(logs.EscapeText(r.TerminationMessage))},
		{FileTrainerStatus, trainerStatus(r)},
		{FileResumes, resumes},
	}
	var errs []error
	for _, f := range files {
		if err := writeAtomic(filepath.Join(dir, f.name), f.content); err != nil {
			errs = append(errs, fmt.Errorf("writing output %s: %w", f.name, err))
		}
	}
	return errors.Join(errs...)
}

// PrintResult writes r to w as exactly one line of JSON followed by "\n",
// in a single Write call. It carries the same values as the output files.
func PrintResult(w io.Writer, r result.Result) error {
	line, err := marshalCompact(normalize(r))
	if err != nil {
		return fmt.Errorf("encoding result: %w", err)
	}
	if _, err := w.Write(append(line, '\n')); err != nil {
		return fmt.Errorf("printing result: %w", err)
	}
	return nil
}

// WriteProgress replaces the content of the progress file at path with
// "done/total" (no trailing newline), the format Argo reads from
// $ARGO_PROGRESS_FILE. An empty path means progress is not wanted and is a
// no-op. Values Argo would reject (total < 1, done outside 0..total) are an
// error.
func WriteProgress(path string, done, total int) error {
	if path == "" {
		return nil
	}
	if total < 1 || done < 0 || done > total {
		return fmt.Errorf("writing progress: invalid progress %d/%d", done, total)
	}
	if err := writeAtomic(path, []byte(fmt.Sprintf("%d/%d", done, total))); err != nil {
		return fmt.Errorf("writing progress: %w", err)
	}
	return nil
}

// ParseMetrics turns a replica's termination message into the metrics map.
// Only a single JSON object counts; anything else (plain text, an array,
// null, a truncated message) gives an empty map. The result is never nil.
// Numbers keep their exact text (json.Number) so re-encoding them does not
// change them.
func ParseMetrics(terminationMessage string) map[string]any {
	metrics, _ := Metrics(terminationMessage)
	return metrics
}

// Metrics is ParseMetrics that also says why a message that is not empty
// gives no metrics, so the caller can warn. The map is never nil.
func Metrics(terminationMessage string) (map[string]any, error) {
	if strings.TrimSpace(terminationMessage) == "" {
		return map[string]any{}, nil
	}
	dec := json.NewDecoder(strings.NewReader(terminationMessage))
	dec.UseNumber()
	var metrics map[string]any
	if err := dec.Decode(&metrics); err != nil || metrics == nil {
		return map[string]any{}, errors.New("the termination message is not a JSON object")
	}
	// Trailing content after the object means the message is not one object.
	if _, err := dec.Token(); err != io.EOF {
		return map[string]any{}, errors.New("the termination message holds more than one JSON object")
	}
	return metrics, nil
}

// normalize gives r the shape written everywhere: replicas sorted by type
// and index and never nil, metrics never nil. r's slices are not modified.
func normalize(r result.Result) result.Result {
	replicas := make([]result.ReplicaStatus, len(r.Replicas))
	copy(replicas, r.Replicas)
	sort.SliceStable(replicas, func(i, j int) bool {
		if replicas[i].Type != replicas[j].Type {
			return replicas[i].Type < replicas[j].Type
		}
		return replicas[i].Index < replicas[j].Index
	})
	r.Replicas = replicas
	r.Metrics = mergeMetrics(r.Metrics, r.TrainerMetrics)
	if r.Resumes == nil {
		r.Resumes = []result.Resume{}
	}
	return r
}

// mergeMetrics is the termination message's metrics over the reported
// status's: on a name both have, the termination message wins. Neither
// map is modified; the result is never nil.
func mergeMetrics(terminationMessage, reported map[string]any) map[string]any {
	out := make(map[string]any, len(terminationMessage)+len(reported))
	for k, v := range reported {
		out[k] = v
	}
	for k, v := range terminationMessage {
		out[k] = v
	}
	return out
}

// trainerStatus is the trainer-status.json content: the last status, or
// "{}" when none came.
func trainerStatus(r result.Result) []byte {
	if len(r.TrainerStatus) == 0 {
		return []byte("{}")
	}
	return r.TrainerStatus
}

// marshalCompact encodes v as JSON without HTML escaping (the files are read
// by people and by Argo expressions, not embedded in HTML) and without the
// encoder's trailing newline.
func marshalCompact(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// writeAtomic writes content to a temporary file next to path and renames it
// over path, so readers never observe a partly written file. There is no
// fsync: the files only need to survive the process, not a machine crash.
func writeAtomic(path string, content []byte) (err error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = tmp.Close()
			_ = os.Remove(tmp.Name())
		}
	}()
	if _, err = tmp.Write(content); err != nil {
		return err
	}
	if err = tmp.Chmod(0o644); err != nil {
		return err
	}
	if err = tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
