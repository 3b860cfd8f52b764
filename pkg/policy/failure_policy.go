package policy

import (
	"fmt"
	"slices"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/frameworks"
)

// verdict is what the failure policy makes of one ended or lost replica.
type verdict int

const (
	verdictKeep verdict = iota
	verdictFail
	verdictTolerate
	verdictRestartReplica
	verdictRestartJob
)

// judgement is one replica's verdict and whether the restart it asks for
// counts against backoffLimit.
type judgement struct {
	replica *Replica
	verdict verdict
	counted bool
	// rule is the index of the rule that matched, -1 when none did.
	rule int
}

// judge applies the job's failure policy to one replica: the first rule
// that matches decides; without one, the replica type's restart policy
// says whether the failure is retryable, and FailurePolicy.Restart what a
// retry restarts.
func judge(v *View, r *Replica) judgement {
	spec := v.Job.Spec.ReplicaSpecs[r.Type]
	if spec == nil || (r.Phase != PhaseFailed && !r.Lost) {
		return judgement{replica: r, verdict: verdictKeep, rule: -1}
	}
	restart := v1alpha1.FailureRestartReplica
	if frameworks.RestartsWithJob(v.Job, r.Type) {
		restart = v1alpha1.FailureRestartJob
	}
	if r.LostUnseen {
		return judgement{replica: r, verdict: restartVerdict(restart), rule: -1}
	}
	if fp := v.Job.Spec.RunPolicy.FailurePolicy; fp != nil {
		for i, rule := range fp.Rules {
			if !ruleMatches(rule, r) {
				continue
			}
			j := judgement{replica: r, rule: i, counted: true}
			switch rule.Action {
			case v1alpha1.FailureActionIgnore:
				j.verdict, j.counted = restartVerdict(restart), false
			case v1alpha1.FailureActionRestartJob:
				j.verdict = verdictRestartJob
			case v1alpha1.FailureActionRestartReplica:
				j.verdict = verdictRestartReplica
			case v1alpha1.FailureActionFailJob:
				j.verdict = verdictFail
			}
			return j
		}
	}
	j := judgement{replica: r, counted: true, rule: -1}
	switch DecideRestart(spec, *r) {
	case Recreate:
		j.verdict = restartVerdict(restart)
	case FailPermanently:
		j.verdict = verdictFail
		if ToleratesLoss(v, *r) {
			j.verdict = verdictTolerate
		}
	default:
		j.verdict = verdictKeep
	}
	return j
}

func restartVerdict(r v1alpha1.FailureRestart) verdict {
	if r == v1alpha1.FailureRestartJob {
		return verdictRestartJob
	}
	return verdictRestartReplica
}

// restartOf is what a retryable failure restarts; a job without a failure
// policy (not defaulted) restarts replicas, as before there was one.
func restartOf(job *v1alpha1.TrainJob) v1alpha1.FailureRestart {
	if fp := job.Spec.RunPolicy.FailurePolicy; fp != nil && fp.Restart != "" {
		return fp.Restart
	}
	return v1alpha1.FailureRestartReplica
}

// ruleMatches reports whether rule matches replica r's failure.
func ruleMatches(rule v1alpha1.FailurePolicyRule, r *Replica) bool {
	if len(rule.ReplicaTypes) > 0 && !slices.Contains(rule.ReplicaTypes, r.Type) {
		return false
	}
	if ec := rule.OnExitCodes; ec != nil {
		if r.Lost || r.ExitCode == nil {
			return false
		}
		in := slices.Contains(ec.Values, *r.ExitCode)
		return in == (ec.Operator == v1alpha1.ExitCodesOpIn)
	}
	for _, c := range rule.OnPodConditions {
		status := c.Status
		if status == "" {
			status = corev1.ConditionTrue
		}
		// Only True conditions are carried in the view.
		if status == corev1.ConditionTrue && r.HasCondition(string(c.Type)) {
			return true
		}
	}
	return false
}

// JobRestart is a decision to stop every replica and start the job's next
// attempt because of Cause.
type JobRestart struct {
	Cause ReplicaID
	// Counted says whether it counts against backoffLimit (a rule's Ignore does not).
	Counted bool
	// Why says it in words, for the progress line and the event.
	Why string
}

// collectiveSettle is how long a permanent failure of a job that restarts
// as a whole waits for its peers' failures to be seen: when one rank is
// killed, the others' collective calls fail within moments, and the one
// that died first is the cause — but a kubelet may report that one's end
// seconds after a peer's.
const collectiveSettle = 10 * time.Second

// decideJobRestart looks at the judgements of a job where a failure may
// restart the whole job. The earliest failure is the cause (ties go to a
// restart over a permanent failure: a rank killed by a signal and a peer
// that lost its connection end within the same second); the others
// followed it and cost nothing. It returns the restart, or the permanent
// failure, or wait > 0 while a permanent failure may still turn out to be
// a peer's.
func decideJobRestart(v *View, js []judgement) (restart *JobRestart, permanent *Replica, wait time.Duration) {
	var failed []judgement
	for _, j := range js {
		if j.verdict != verdictKeep && j.verdict != verdictTolerate {
			failed = append(failed, j)
		}
	}
	// A rank marked for a disruption while it still runs is the notice the
	// others need: the whole job stops now, every rank together, while the
	// collective still works and each can checkpoint — not when a peer's
	// next collective fails on the rank gone.
	failed = append(failed, disruptedRunning(v, js)...)
	if len(failed) == 0 {
		return nil, nil, 0
	}
	slices.SortStableFunc(failed, func(a, b judgement) int {
		// A pod's times have whole seconds: a kill and its peers' failures
		// often share one, and then the rank that was killed or disrupted
		// is the cause, and a restart wins over a permanent failure.
		if c := a.replica.FinishedAt.Compare(b.replica.FinishedAt); c != 0 {
			return c
		}
		if c := boolRank(!endedFromOutside(a.replica)) - boolRank(!endedFromOutside(b.replica)); c != 0 {
			return c
		}
		return boolRank(a.verdict == verdictFail) - boolRank(b.verdict == verdictFail)
	})
	cause := failed[0]
	if cause.replica.FinishedAt.IsZero() {
		// Gone with no end on record (lost while no step watched): it
		// may well be the cause of its peers' error exits, but not of a
		// rank killed or disrupted at a known time, nor of an MPI worker's
		// exit (the workers do not talk to each other: only mpirun does)
		// — unless a watch delivered its deletion before that end: the
		// first end is the cause.
		for _, j := range failed {
			if !j.replica.FinishedAt.IsZero() {
				goneFirst := !cause.replica.GoneBy.IsZero() && cause.replica.GoneBy.Before(j.replica.FinishedAt)
				if !goneFirst && (endedFromOutside(j.replica) || !frameworks.FailsWithPeers(v.Job, j.replica.Type)) {
					cause = j
				}
				break
			}
		}
	}
	switch cause.verdict {
	case verdictRestartReplica:
		return nil, nil, 0 // a rule restarts that replica alone: decided replica by replica
	case verdictFail:
		if wait := settling(v, cause.replica); wait > 0 {
			return nil, nil, wait
		}
		return nil, cause.replica, 0
	}
	// A rank that exited with an error may have been a peer of one killed
	// at the same moment whose end is not seen yet: one still running.
	if !endedFromOutside(cause.replica) && peerRunning(v, cause.replica) {
		if wait := settling(v, cause.replica); wait > 0 {
			return nil, nil, wait
		}
	}
	return &JobRestart{Cause: cause.replica.ReplicaID, Counted: cause.counted, Why: describeFailure(cause.replica)}, nil, 0
}

// disruptedRunning judges the replicas still running whose pods were
// marked for removal by a disruption (or whose node is being drained) as
// if they had ended then, lost: their peers are stopped with them at once,
// and a node that stops answering keeps such a pod's end from being seen.
func disruptedRunning(v *View, js []judgement) []judgement {
	var going []judgement
	for _, j := range js {
		if r := j.replica; r.Phase == PhaseRunning && !r.DisruptedAt.IsZero() {
			ended := *r
			ended.Phase, ended.Lost, ended.FinishedAt = PhaseMissing, true, r.DisruptedAt
			going = append(going, judge(v, &ended))
		}
	}
	return going
}

// settling is how much longer r's failure waits for its peers' to be seen.
func settling(v *View, r *Replica) time.Duration {
	if at := r.FinishedAt; !at.IsZero() && v.Now.Sub(at) < collectiveSettle {
		return collectiveSettle - v.Now.Sub(at)
	}
	return 0
}

// peerRunning reports whether a replica other than r still runs.
func peerRunning(v *View, r *Replica) bool {
	for i := range v.Replicas {
		if p := &v.Replicas[i]; p.ReplicaID != r.ReplicaID && p.Phase == PhaseRunning {
			return true
		}
	}
	return false
}

// endedFromOutside reports a replica ended by a signal (exit 128 and up:
// a kill, the OOM killer), a disruption or a lost node, rather than by its
// own error exit: in a collective job, the likelier cause of its peers'.
func endedFromOutside(r *Replica) bool {
	return r.Lost || r.HasCondition(string(v1alpha1.PodConditionDisruptionTarget)) || (r.ExitCode != nil && *r.ExitCode >= 128)
}

func boolRank(b bool) int {
	if b {
		return 1
	}
	return 0
}

// describeFailure says how a replica ended: "worker-1 exit 137".
func describeFailure(r *Replica) string {
	name := fmt.Sprintf("%s-%d", lower(string(r.Type)), r.Index)
	switch {
	case r.HasCondition(string(v1alpha1.PodConditionDisruptionTarget)):
		return name + " disrupted (preemption, eviction or a lost node)"
	case r.Lost:
		return name + " lost"
	case r.ExitCode != nil:
		return name + " exit " + strconv.Itoa(int(*r.ExitCode))
	}
	return name + " failed"
}

func lower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}
