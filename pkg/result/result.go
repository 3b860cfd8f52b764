// Package result defines how a trainstep run ends: its phase, reason, exit
// code and the result object written to stdout and the output files.
//
// It is the single home of DESIGN's exit-code contract. It must not do I/O.
package result

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
)

// Phase is how a run ended.
type Phase string

// Phases, as written to the `phase` output file.
const (
	PhaseSucceeded  Phase = "Succeeded"
	PhaseFailed     Phase = "Failed"
	PhaseInvalid    Phase = "Invalid"
	PhaseTransient  Phase = "Transient"
	PhaseTerminated Phase = "Terminated"
)

// Exit codes of DESIGN's contract. 1 and 2 (Go panics, usage) and 126–165
// (shell and signals) are avoided on purpose.
const (
	ExitSucceeded  = 0
	ExitFailed     = 10
	ExitInvalid    = 11
	ExitTransient  = 12
	ExitTerminated = 13
)

// ExitCode maps a phase to the process exit code.
func (p Phase) ExitCode() int {
	switch p {
	case PhaseSucceeded:
		return ExitSucceeded
	case PhaseFailed:
		return ExitFailed
	case PhaseInvalid:
		return ExitInvalid
	case PhaseTransient:
		return ExitTransient
	case PhaseTerminated:
		return ExitTerminated
	}
	return ExitFailed
}

// Reasons written to the `reason` output file.
const (
	ReasonSucceeded            = "Succeeded"
	ReasonReplicaFailed        = "ReplicaFailed"
	ReasonBackoffLimitExceeded = "BackoffLimitExceeded"
	ReasonDeadlineExceeded     = "DeadlineExceeded"
	ReasonInvalidSpec          = "InvalidSpec"
	ReasonForbidden            = "Forbidden"
	ReasonUnauthorized         = "Unauthorized"
	ReasonAPIUnreachable       = "APIServerUnreachable"
	ReasonUnschedulable        = "Unschedulable"
	ReasonPendingTimeout       = "PendingTimeout"
	ReasonTerminated           = "Terminated"
	// ReasonQuotaExceeded: a ResourceQuota kept refusing the job's objects
	// until --pending-timeout; what exists is left for a retry of the step.
	ReasonQuotaExceeded = "QuotaExceeded"
	// ReasonNotOwned: an object the job would create exists already and is
	// not the job's (no job label, or another owner): nothing of it is used
	// or deleted.
	ReasonNotOwned = "ObjectNotOwned"
	// ReasonInternalError: trainstep itself failed (a panic); the message
	// says where.
	ReasonInternalError = "InternalError"
	// ReasonStepDisrupted: the step's own pod was removed by the
	// infrastructure (a drain, a preemption, a node shutdown: its
	// DisruptionTarget condition) while the job ran; the replicas are kept
	// for the step's retry, which re-attaches to them.
	ReasonStepDisrupted = "StepDisrupted"
	// ReasonLeaseLost: another run of the same job took over its Lease
	// (this one could not renew it); the replicas are left to that run.
	ReasonLeaseLost = "LeaseLost"
	// ReasonInvalidArguments: a command line trainstep cannot run (unknown
	// flag, bad flag value, a job file that cannot be read).
	ReasonInvalidArguments = "InvalidArguments"
	// ReasonOutputsDirUnusable: --outputs-dir cannot be written.
	ReasonOutputsDirUnusable = "OutputsDirUnusable"
	// ReasonNoCluster: no kubeconfig was found and trainstep does not run
	// inside a cluster; ReasonInvalidKubeconfig: the kubeconfig cannot be used.
	ReasonNoCluster         = "NoCluster"
	ReasonInvalidKubeconfig = "InvalidKubeconfig"
)

// ReplicaPhaseStopped is the phase in replicas.json of a replica trainstep
// stopped because the job ended (cleanPodPolicy, a failure elsewhere, a
// signal), rather than one that ended by itself.
const ReplicaPhaseStopped = "Stopped"

// Error is an error that carries the phase (and so the exit code) a run
// ends with. Commands return it; main turns it into the exit code.
type Error struct {
	Phase  Phase
	Reason string
	Err    error
}

func (e *Error) Error() string { return e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// Invalid wraps err as an Invalid error (exit 11).
func Invalid(reason string, err error) *Error {
	return &Error{Phase: PhaseInvalid, Reason: reason, Err: err}
}

// Transient wraps err as a Transient error (exit 12).
func Transient(reason string, err error) *Error {
	return &Error{Phase: PhaseTransient, Reason: reason, Err: err}
}

// Invalidf builds an Invalid error with reason InvalidSpec.
func Invalidf(format string, args ...any) *Error {
	return Invalid(ReasonInvalidSpec, fmt.Errorf(format, args...))
}

// PhaseOf returns the phase an error ends a run with: the carried phase for
// an *Error, Failed otherwise.
func PhaseOf(err error) Phase {
	if err == nil {
		return PhaseSucceeded
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Phase
	}
	return PhaseFailed
}

// ReplicaStatus is one replica's line in replicas.json.
type ReplicaStatus struct {
	Type     string `json:"type"`
	Index    int    `json:"index"`
	Phase    string `json:"phase"`
	ExitCode *int32 `json:"exitCode,omitempty"`
	Restarts int32  `json:"restarts"`
	Node     string `json:"node,omitempty"`
	// WorldSize is, for a worker of an elastic job, how many workers ran
	// the last time this one ran: the world of its last rendezvous.
	WorldSize int `json:"worldSize,omitempty"`
}

// Result is the outcome of one run: printed as one JSON line on stdout and
// split into the output files.
type Result struct {
	Phase           Phase           `json:"phase"`
	Reason          string          `json:"reason"`
	Message         string          `json:"message,omitempty"`
	JobName         string          `json:"jobName"`
	Namespace       string          `json:"namespace,omitempty"`
	DurationSeconds Seconds         `json:"durationSeconds"`
	Restarts        int32           `json:"restarts"`
	Replicas        []ReplicaStatus `json:"replicas"`
	Metrics         map[string]any  `json:"metrics"`
	// TerminationMessage is the raw termination message metrics came from.
	TerminationMessage string `json:"terminationMessage,omitempty"`
	// TrainerStatus is the last status the replicas reported through the
	// progress endpoint or a log line (Kubeflow Trainer's trainerStatus
	// object), empty when none came.
	TrainerStatus json.RawMessage `json:"trainerStatus,omitempty"`
	// TrainerMetrics are that status's metrics. The outputs merge them
	// into Metrics, whose values (the termination message's) win.
	TrainerMetrics map[string]any `json:"-"`
	// Resumes are the job's whole-job restarts while this step ran, with
	// what each cost when the replicas report their progress.
	Resumes []Resume `json:"resumes"`
}

// Resume is one whole-job restart and where the job took up its work
// after it, from the statuses its replicas reported just before and just
// after: Redone is how much was done again (in Unit: "steps" from a step
// metric, else "percent"), absent when no status says.
type Resume struct {
	Attempt        int    `json:"attempt"`
	Reason         string `json:"reason"`
	RestartedAt    string `json:"restartedAt"`
	ResumedAt      string `json:"resumedAt,omitempty"`
	StepBefore     *int64 `json:"stepBefore,omitempty"`
	StepAfter      *int64 `json:"stepAfter,omitempty"`
	ProgressBefore *int32 `json:"progressBefore,omitempty"`
	ProgressAfter  *int32 `json:"progressAfter,omitempty"`
	Redone         *int64 `json:"redone,omitempty"`
	Unit           string `json:"unit,omitempty"`
}

// Err is the error a run that ended so returns: nil when it succeeded, an
// *Error carrying its phase and reason otherwise.
func (r *Result) Err() error {
	if r.Phase == PhaseSucceeded {
		return nil
	}
	return &Error{Phase: r.Phase, Reason: r.Reason, Err: errors.New(r.Message)}
}

// Seconds is a duration in seconds, written with one decimal place ("12.0",
// "12.3") in the result line and the duration-seconds file alike. A value
// that is not a duration (negative, NaN, infinite) is written as 0.0.
type Seconds float64

func (s Seconds) String() string {
	v := float64(s)
	if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
		v = 0
	}
	return strconv.FormatFloat(math.Round(v*10)/10, 'f', 1, 64)
}

// MarshalJSON writes the same text as String.
func (s Seconds) MarshalJSON() ([]byte, error) { return []byte(s.String()), nil }
