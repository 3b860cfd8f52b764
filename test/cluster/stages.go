package cluster

import _ "embed"

// Annotations that drive the test cluster's KWOK Stages (stages.yaml). They are read from
// the live pod: set in a pod template they apply to every replica made from it; patched
// onto one running pod they make just that pod exit.
const (
	// AnnotationExitAfter is a Go duration ("30s", "1m30s"): the containers exit that long
	// after they started running (up to a second later: start times are kept in whole
	// seconds). Without it a pod runs until deleted.
	AnnotationExitAfter = "kwok.trainstep.dev/exit-after"
	// AnnotationExitCode is the exit code (default "0"). With restartPolicy Never the pod
	// ends Succeeded for 0 and Failed otherwise; with OnFailure a non-zero code, and with
	// Always any code, restarts the containers in place: restartCount+1, lastState
	// terminated with the code, Running again.
	AnnotationExitCode = "kwok.trainstep.dev/exit-code"
	// AnnotationTerminationMessage becomes state.terminated.message (and lastState's).
	AnnotationTerminationMessage = "kwok.trainstep.dev/termination-message"
	// AnnotationExitTimes ("N") bounds in-place restarts: once restartCount reaches N the
	// containers keep running ("fails once, then trains" is exit-times "1").
	AnnotationExitTimes = "kwok.trainstep.dev/exit-times"
	// AnnotationWaitingReason keeps the containers Waiting with this reason (for example
	// "ImagePullBackOff") instead of starting them; removing it lets them start.
	AnnotationWaitingReason = "kwok.trainstep.dev/waiting-reason"
)

// stagesYAML is the kwok configuration: trainstep's pod Stages (node Stages are kwok's).
//
//go:embed stages.yaml
var stagesYAML []byte
