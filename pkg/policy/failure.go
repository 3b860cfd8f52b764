package policy

import (
	"fmt"
	"slices"
	"time"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
)

// Failures is what the failure policy found among ended or lost replicas.
type Failures struct {
	// Permanent is the replica whose failure fails the job (nil when none).
	Permanent *Replica
	// Recreate lists replicas to replace with a new attempt, each counting
	// one restart; RecreateUncounted those a rule's Ignore replaces for free.
	Recreate, RecreateUncounted []ReplicaID
	// Tolerated lists permanently failed workers an elastic job carries on without.
	Tolerated []ReplicaID
	// RestartJob, when set, restarts every replica at the job's next attempt.
	RestartJob *JobRestart
	// Wait > 0: a failure of a job that restarts as a whole is not decided
	// yet; look again after this long.
	Wait time.Duration
	// countedAlready is how many of Recreate the view counts already
	// (RestartCounted): decided before, not carried out yet.
	countedAlready int32
}

// CheckFailures applies the job's failure policy (its rules, then each
// replica type's restart policy) to the replicas that ended or vanished.
func CheckFailures(v *View, t Timeouts) Failures {
	var f Failures
	js := make([]judgement, 0, len(v.Replicas))
	// A job that restarts as a whole decides on its first failure.
	jobWide := restartOf(v.Job) == v1alpha1.FailureRestartJob
	for i := range v.Replicas {
		r := &v.Replicas[i]
		if NodeLost(r, v.Now, t.NodeLost) {
			lost := *r
			lost.Phase, lost.Lost = PhaseMissing, true
			lost.Conditions = append(slices.Clone(r.Conditions), string(v1alpha1.PodConditionDisruptionTarget))
			r = &lost
		}
		j := judge(v, r)
		js = append(js, j)
		jobWide = jobWide || j.verdict == verdictRestartJob
		if j.verdict == verdictTolerate {
			f.Tolerated = append(f.Tolerated, j.replica.ReplicaID)
		}
	}
	if jobWide {
		restart, permanent, wait := decideJobRestart(v, js)
		switch {
		case wait > 0:
			f.Wait = wait
			return f
		case permanent != nil:
			f.Permanent = permanent
			return f
		case restart != nil:
			f.RestartJob = restart
			return f
		}
	}
	for _, j := range js {
		switch j.verdict {
		case verdictFail:
			if f.Permanent == nil {
				f.Permanent = j.replica
			}
		case verdictRestartReplica:
			if j.counted {
				f.Recreate = append(f.Recreate, j.replica.ReplicaID)
				if j.replica.RestartCounted {
					f.countedAlready++
				}
			} else {
				f.RecreateUncounted = append(f.RecreateUncounted, j.replica.ReplicaID)
			}
		}
	}
	return f
}

// Counted is how many restarts carrying out f costs beyond those the view
// counts already.
func (f Failures) Counted() int32 {
	n := int32(len(f.Recreate)) - f.countedAlready
	if f.RestartJob != nil && f.RestartJob.Counted {
		n++
	}
	return n
}

func failureMessage(r *Replica) string {
	code := "unknown"
	if r.ExitCode != nil {
		code = fmt.Sprint(*r.ExitCode)
	}
	return fmt.Sprintf("replica %s failed with exit code %s", r.ReplicaID, code)
}
