// Package logs copies replica logs into the step's stderr, one prefixed line
// at a time ("[worker-1] loss=0.31"), so `argo logs` of the step shows what
// the training printed.
//
// Prefixer makes lines from many sources atomic on one writer; PodStreamer
// follows replica pods' logs through the Kubernetes API across container
// restarts and pod recreations; the local backend pipes its processes'
// output into Prefixer writers directly.
//
// The package only copies logs: it never decides which replicas are
// streamed (the caller does, with Mode), never changes cluster objects and
// never writes to stdout, which carries the run's result.
package logs

import (
	"fmt"
	"strconv"
	"strings"
)

// Mode says which replicas' logs are streamed.
type Mode string

// Log modes, as given to `--logs`.
const (
	// ModeLeaders streams the replicas that lead the job: chief/master,
	// worker-0 when there is neither, launcher.
	ModeLeaders Mode = "leaders"
	// ModeAll streams every replica.
	ModeAll Mode = "all"
	// ModeNone streams nothing.
	ModeNone Mode = "none"
)

// ParseMode parses a log mode; anything but leaders, all or none is an error
// that names the accepted values.
func ParseMode(s string) (Mode, error) {
	switch m := Mode(s); m {
	case ModeLeaders, ModeAll, ModeNone:
		return m, nil
	}
	return "", fmt.Errorf("parsing log mode: %q is not one of %s, %s, %s", s, ModeLeaders, ModeAll, ModeNone)
}

// Selects reports whether a replica's logs are streamed in this mode, given
// whether the caller counts the replica as a leader.
func (m Mode) Selects(leader bool) bool {
	switch m {
	case ModeAll:
		return true
	case ModeLeaders:
		return leader
	}
	return false
}

// ReplicaPrefix is the line prefix of a replica: its type in lower case and
// its index, "worker-1", matching the names of its pod and Service.
func ReplicaPrefix(replicaType string, index int) string {
	return strings.ToLower(replicaType) + "-" + strconv.Itoa(index)
}
