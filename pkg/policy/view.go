package policy

import (
	"fmt"
	"time"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/frameworks"
)

// Phase is where one replica's current instance stands.
type Phase string

// Replica phases. Missing means no instance exists: not created yet, or
// removed (by trainstep for a recreation, or from outside by preemption or
// eviction).
const (
	PhaseMissing   Phase = "Missing"
	PhasePending   Phase = "Pending"
	PhaseRunning   Phase = "Running"
	PhaseSucceeded Phase = "Succeeded"
	PhaseFailed    Phase = "Failed"
)

// ReplicaID names one replica: its type and index.
type ReplicaID struct {
	Type  v1alpha1.ReplicaType
	Index int
}

func (id ReplicaID) String() string { return fmt.Sprintf("%s/%d", id.Type, id.Index) }

// Replica is what a backend observed of one replica's current instance.
type Replica struct {
	ReplicaID
	// Attempt counts recreations of this replica (0 for the first instance).
	Attempt int
	Phase   Phase
	// ExitCode of the main container's last termination, when known.
	ExitCode *int32
	// Restarts counts in-place restarts of the current instance.
	Restarts int32
	// EarlierRestarts counts this replica's restarts before its current
	// instance: its recreations plus the in-place restarts of the instances
	// they replaced. Over all replicas, Restarts + EarlierRestarts (and one
	// for each RestartCounted) add up to View.Restarts.
	EarlierRestarts int32
	// WaitingReason is the main container's waiting reason (e.g.
	// ImagePullBackOff) and WaitingSince when it was first seen.
	WaitingReason string
	WaitingSince  time.Time
	// Unschedulable is true while the scheduler cannot place the replica;
	// PendingSince is when the instance was created.
	Unschedulable bool
	PendingSince  time.Time
	// Lost is true when the instance disappeared while not finished and
	// trainstep did not remove it (preemption, eviction, deletion from outside).
	Lost bool
	// RestartCounted is true for a failed instance whose counted restart
	// was decided and is not carried out yet: View.Restarts holds it, and
	// deciding it again costs nothing more.
	RestartCounted bool
	// LostUnseen is true for a replica whose pod was gone when a step
	// re-attached to the job: no run saw why it went, so its loss costs no
	// restart.
	LostUnseen bool
	// TerminationMessage of the main container, when it terminated.
	TerminationMessage string
	// Node is where the instance runs, when known.
	Node string
	// Conditions are the pod conditions that are True on the instance
	// (for a lost one, as last seen), e.g. DisruptionTarget.
	Conditions []string
	// NodeNotReadySince is when the pod's Ready condition went False while
	// its main container was still running without a readiness probe: its
	// node stopped answering (zero otherwise).
	NodeNotReadySince time.Time
	// DisruptedAt is when the pod was marked for removal by a disruption
	// (its DisruptionTarget condition), zero when it was not: a running
	// replica so marked is going, and its peers' failures after that
	// moment followed it.
	DisruptedAt time.Time
	// FinishedAt is when the main container ended (zero when unknown):
	// the first replica of a collective job to die is the cause, the rest
	// followed it.
	FinishedAt time.Time
	// GoneBy is, for a lost replica, when a watch delivered its pod's
	// deletion (zero when none did): with no end on record, it ended
	// before then.
	GoneBy time.Time
	// WorldSize is, for a worker of an elastic job, how many workers ran
	// (or had finished) the last time this one was seen running: the
	// number of nodes of the rendezvous it last trained in. 0 otherwise.
	WorldSize int
}

// NodeLost reports whether r's node has not answered for timeout (0: never
// judged lost): the kubelet cannot report the replica's end, so it is
// treated as lost to a disruption.
func NodeLost(r *Replica, now time.Time, timeout time.Duration) bool {
	return timeout > 0 && !r.NodeNotReadySince.IsZero() && now.Sub(r.NodeNotReadySince) >= timeout
}

// HasCondition reports whether condition is True on the replica's pod.
func (r *Replica) HasCondition(condition string) bool {
	for _, c := range r.Conditions {
		if c == condition {
			return true
		}
	}
	return false
}

// View is the whole job as a backend sees it at one moment.
type View struct {
	Job      *v1alpha1.TrainJob
	Replicas []Replica
	// Restarts counts every restart so far: in-place restarts of current and
	// earlier instances plus recreations. It is what backoffLimit bounds.
	Restarts int32
	// StartTime is when the job started running (deadline origin).
	StartTime time.Time
	Now       time.Time
	// ElasticShortSince is when an elastic job last fell short of
	// minReplicas running workers while some waited for capacity (zero
	// while it is not short): the backend keeps it from view to view with
	// ElasticShortSince.
	ElasticShortSince time.Time
	// WorkerTarget is an elastic job's worker target under
	// elasticPolicy.metrics (0 without): the slots at or above it get no pod.
	WorkerTarget int
}

// Replica returns the replica with id, or nil.
func (v *View) Replica(id ReplicaID) *Replica {
	for i := range v.Replicas {
		if v.Replicas[i].ReplicaID == id {
			return &v.Replicas[i]
		}
	}
	return nil
}

// OfType returns the replicas of one type, in index order as listed.
func (v *View) OfType(t v1alpha1.ReplicaType) []Replica {
	var out []Replica
	for _, r := range v.Replicas {
		if r.Type == t {
			out = append(out, r)
		}
	}
	return out
}

// Desired lists every replica a job should have, in creation order
// (frameworks.AllReplicas).
func Desired(job *v1alpha1.TrainJob) []ReplicaID {
	refs := frameworks.AllReplicas(job)
	ids := make([]ReplicaID, len(refs))
	for i, ref := range refs {
		ids[i] = ReplicaID{Type: ref.Type, Index: ref.Index}
	}
	return ids
}
