package trainerstatus

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Bounds on what one status may hold. A status is kept, logged and written
// to the outputs, so every part of it is bounded and printable.
const (
	// MaxBodyBytes is the largest request body accepted (413 above it).
	MaxBodyBytes = 64 << 10
	// MaxMetrics is the most metrics one status may carry.
	MaxMetrics = 64
	// MaxMetricNameLength and MaxMetricValueLength bound a metric's parts.
	MaxMetricNameLength  = 128
	MaxMetricValueLength = 256
)

// Payload is the body a replica POSTs, as Kubeflow Trainer defines it.
type Payload struct {
	TrainerStatus *Status `json:"trainerStatus"`
}

// Status is Kubeflow Trainer's TrainJobTrainerStatus: every field but
// LastUpdatedTime is optional.
type Status struct {
	// ProgressPercentage is 0..100.
	ProgressPercentage *int32 `json:"progressPercentage,omitempty"`
	// EstimatedRemainingSeconds is at least 0.
	EstimatedRemainingSeconds *int32    `json:"estimatedRemainingSeconds,omitempty"`
	Metrics                   []Metric  `json:"metrics,omitempty"`
	LastUpdatedTime           time.Time `json:"lastUpdatedTime"`
}

// Metric is one named value; values travel as strings ("0.2347").
type Metric struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// InvalidError is a payload refused for its content: HTTP 400.
type InvalidError struct {
	Errs field.ErrorList
}

func (e *InvalidError) Error() string { return e.Errs.ToAggregate().Error() }

// Decode parses and validates one payload. Unknown fields are ignored, as
// Kubeflow reserves the object for more statuses; the trainerStatus object
// is required. The error is an *InvalidError naming the field.
func Decode(body []byte) (*Status, error) {
	root := field.NewPath("trainerStatus")
	dec := json.NewDecoder(bytes.NewReader(body))
	var p Payload
	if err := dec.Decode(&p); err != nil {
		return nil, &InvalidError{Errs: field.ErrorList{decodeError(err)}}
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, &InvalidError{Errs: field.ErrorList{field.Invalid(field.NewPath("body"), "", "must hold exactly one JSON object")}}
	}
	if p.TrainerStatus == nil {
		return nil, &InvalidError{Errs: field.ErrorList{field.Required(root, `the body is {"trainerStatus": {...}}`)}}
	}
	if errs := p.TrainerStatus.validate(root); len(errs) > 0 {
		return nil, &InvalidError{Errs: errs}
	}
	return p.TrainerStatus, nil
}

// decodeError names the field a JSON error is about, where encoding/json
// knows it.
func decodeError(err error) *field.Error {
	var typeErr *json.UnmarshalTypeError
	var timeErr *time.ParseError
	switch {
	case errors.As(err, &typeErr) && typeErr.Field != "":
		return field.Invalid(field.NewPath(typeErr.Field), typeErr.Value, "must be a JSON "+jsonKind(typeErr.Type.Kind().String()))
	case errors.As(err, &timeErr):
		return field.Invalid(field.NewPath("trainerStatus", "lastUpdatedTime"), timeErr.Value, "must be an RFC 3339 time")
	default:
		return field.Invalid(field.NewPath("body"), "", "not valid JSON: "+err.Error())
	}
}

func jsonKind(goKind string) string {
	switch {
	case strings.HasPrefix(goKind, "int"):
		return "integer in range"
	case goKind == "string":
		return "string"
	case goKind == "slice":
		return "array"
	default:
		return "object"
	}
}

func (s *Status) validate(path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if p := s.ProgressPercentage; p != nil && (*p < 0 || *p > 100) {
		errs = append(errs, field.Invalid(path.Child("progressPercentage"), *p, "must be between 0 and 100"))
	}
	if e := s.EstimatedRemainingSeconds; e != nil && *e < 0 {
		errs = append(errs, field.Invalid(path.Child("estimatedRemainingSeconds"), *e, "must be 0 or more"))
	}
	if s.LastUpdatedTime.IsZero() {
		errs = append(errs, field.Required(path.Child("lastUpdatedTime"), "the time the status was observed (RFC 3339)"))
	}
	metrics := path.Child("metrics")
	if len(s.Metrics) > MaxMetrics {
		return append(errs, field.TooMany(metrics, len(s.Metrics), MaxMetrics))
	}
	seen := make(map[string]bool, len(s.Metrics))
	for i, m := range s.Metrics {
		at := metrics.Index(i)
		errs = append(errs, validateToken(at.Child("name"), m.Name, MaxMetricNameLength, isNameByte)...)
		errs = append(errs, validateToken(at.Child("value"), m.Value, MaxMetricValueLength, isValueByte)...)
		if seen[m.Name] {
			errs = append(errs, field.Duplicate(at.Child("name"), m.Name))
		}
		seen[m.Name] = true
	}
	return errs
}

// validateToken checks a metric's name or value: not empty, bounded, and
// made of bytes safe to print in a log line and to use as a JSON key.
func validateToken(path *field.Path, s string, max int, allowed func(byte) bool) field.ErrorList {
	switch {
	case s == "":
		return field.ErrorList{field.Required(path, "")}
	case len(s) > max:
		return field.ErrorList{field.TooLong(path, "", max)}
	}
	for i := 0; i < len(s); i++ {
		if !allowed(s[i]) {
			return field.ErrorList{field.Invalid(path, strconv.QuoteToASCII(s), fmt.Sprintf("character %q at %d is not allowed", s[i], i))}
		}
	}
	return nil
}

// isNameByte allows letters, digits and _ . - / (eval/loss, train.loss).
func isNameByte(b byte) bool {
	return b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' || b == '_' || b == '.' || b == '-' || b == '/'
}

// isValueByte allows printable ASCII but spaces, quotes, backslashes and =,
// so a value never breaks the "name=value" log line.
func isValueByte(b byte) bool {
	return b > ' ' && b < 0x7f && b != '"' && b != '\\' && b != '='
}

// MetricsMap gives the metrics as a metrics.json object: a value that is a
// JSON number stays a number, so Argo expressions can compare it.
func (s *Status) MetricsMap() map[string]any {
	out := make(map[string]any, len(s.Metrics))
	for _, m := range s.Metrics {
		if json.Valid([]byte(m.Value)) && isNumber(m.Value) {
			out[m.Name] = json.Number(m.Value)
		} else {
			out[m.Name] = m.Value
		}
	}
	return out
}

func isNumber(s string) bool {
	var n json.Number
	return json.Unmarshal([]byte(s), &n) == nil
}

// Summary is the step's log line for a status:
// "training 45% (eta 13m15s) loss=0.2347 eval_loss=0.2451", metrics in the
// order sent.
func (s *Status) Summary() string {
	var b strings.Builder
	b.WriteString("training")
	if s.ProgressPercentage != nil {
		fmt.Fprintf(&b, " %d%%", *s.ProgressPercentage)
	}
	if s.EstimatedRemainingSeconds != nil {
		fmt.Fprintf(&b, " (eta %s)", time.Duration(*s.EstimatedRemainingSeconds)*time.Second)
	}
	for _, m := range s.Metrics {
		fmt.Fprintf(&b, " %s=%s", m.Name, m.Value)
	}
	return b.String()
}

// sameContent reports whether two statuses say the same thing, whatever
// their times: only a change is logged.
func sameContent(a, b *Status) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Summary() == b.Summary()
}

// decodeRaw is Decode that also returns the status re-encoded: only its
// known, validated fields reach the outputs.
func decodeRaw(body []byte) (*Status, []byte, error) {
	status, err := Decode(body)
	if err != nil {
		return nil, nil, err
	}
	raw, err := json.Marshal(status)
	if err != nil {
		return nil, nil, fmt.Errorf("encoding the status: %w", err)
	}
	return status, raw, nil
}
