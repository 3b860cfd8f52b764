package policy

import (
	"slices"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
)

// RestartAction is what to do with a replica whose instance ended or vanished.
type RestartAction string

// Restart actions.
const (
	// Keep: nothing to do (running, pending, succeeded, or restarting in place).
	Keep RestartAction = "Keep"
	// Recreate: remove the instance (if any) and start a new one, attempt + 1.
	Recreate RestartAction = "Recreate"
	// FailPermanently: the replica failed and its restart policy forbids a retry.
	FailPermanently RestartAction = "FailPermanently"
)

// Retryable reports whether exitCode is retried under the ExitCode restart
// policy: 128–255 (killed by a signal, e.g. 137 for OOM or preemption) and
// the replica type's extra retryable codes; 1–127 are permanent.
func Retryable(exitCode int32, extra []int32) bool {
	if exitCode >= 128 && exitCode <= 255 {
		return true
	}
	return slices.Contains(extra, exitCode)
}

// DecideRestart says what to do with one replica under its type's restart
// policy. A lost instance (no exit code to blame) is always recreated.
func DecideRestart(spec *v1alpha1.ReplicaSpec, r Replica) RestartAction {
	if r.Lost {
		return Recreate
	}
	if r.Phase != PhaseFailed {
		return Keep
	}
	switch spec.RestartPolicy {
	case v1alpha1.RestartPolicyExitCode:
		if r.ExitCode != nil && Retryable(*r.ExitCode, spec.RetryableExitCodes) {
			return Recreate
		}
		return FailPermanently
	case v1alpha1.RestartPolicyOnFailure, v1alpha1.RestartPolicyAlways:
		// The kubelet restarts these in place; a Failed pod means the pod
		// itself was lost (evicted, node gone), so it is recreated.
		return Recreate
	default:
		return FailPermanently
	}
}

// RestartsInPlace reports whether a container that exited with exitCode is
// restarted in place under policy, as a kubelet does. The local backend
// uses it to behave like a node.
func RestartsInPlace(policy v1alpha1.RestartPolicy, exitCode int32) bool {
	switch policy {
	case v1alpha1.RestartPolicyAlways:
		return true
	case v1alpha1.RestartPolicyOnFailure:
		return exitCode != 0
	}
	return false
}

// BackoffExceeded reports whether restarts have gone past backoffLimit.
// backoffLimit is the number of restarts allowed: with 2, the third restart
// that would be needed fails the job. Nil means no limit.
func BackoffExceeded(backoffLimit *int32, restarts int32) bool {
	return backoffLimit != nil && restarts > *backoffLimit
}
