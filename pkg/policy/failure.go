package policy

import "fmt"

// Failures is what the failure policy found among ended or lost replicas.
type Failures struct {
	// Permanent is the first replica that failed and may not be retried
	// (nil when none); the job fails because of it.
	Permanent *Replica
	// Recreate lists replicas to replace with a new attempt.
	Recreate []ReplicaID
	// Tolerated lists permanently failed workers an elastic job carries on without.
	Tolerated []ReplicaID
}

// CheckFailures applies each replica type's restart policy to the replicas
// that ended or vanished.
func CheckFailures(v *View) Failures {
	var f Failures
	for i := range v.Replicas {
		r := v.Replicas[i]
		spec := v.Job.Spec.ReplicaSpecs[r.Type]
		if spec == nil {
			continue
		}
		switch DecideRestart(spec, r) {
		case Recreate:
			f.Recreate = append(f.Recreate, r.ReplicaID)
		case FailPermanently:
			if ToleratesLoss(v, r) {
				f.Tolerated = append(f.Tolerated, r.ReplicaID)
				continue
			}
			if f.Permanent == nil {
				f.Permanent = &v.Replicas[i]
			}
		}
	}
	return f
}

func failureMessage(r *Replica) string {
	code := "unknown"
	if r.ExitCode != nil {
		code = fmt.Sprint(*r.ExitCode)
	}
	return fmt.Sprintf("replica %s failed with exit code %s", r.ReplicaID, code)
}
