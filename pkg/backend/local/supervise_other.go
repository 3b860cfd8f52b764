//go:build !linux

package local

import (
	"errors"
	"fmt"
	"os"
)

// Supervisors need Linux (child subreapers); elsewhere replicas start
// directly, and only trainstep's own children die with it.
const canSupervise = false

var errNoSupervisor = errors.New("supervising a replica needs Linux")

func startSupervised(_, _, _ []string, _ *os.File) (*process, error) {
	return nil, errNoSupervisor
}

// Supervise is Linux's; here it only says so.
func Supervise([]string) int {
	fmt.Fprintln(os.Stderr, "trainstep supervise:", errNoSupervisor)
	return exitCodeStartError
}
